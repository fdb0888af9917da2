"""JiebaTokenizer: jieba's words with exact offsets, user dictionaries kept per model."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.model import Model, train
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.tokenizers.jieba import JiebaTokenizer
from tests.extras import requires_extra

pytestmark = requires_extra("zh")


def words(tokenizer: JiebaTokenizer, text: str) -> list[tuple[str, int, int]]:
    message = Message(text=text)
    tokenizer.process([message])
    return [(t.text, t.start, t.end) for t in message.tokens["text"]]


def trained(**params: object) -> JiebaTokenizer:
    tokenizer = JiebaTokenizer(**params)
    tokenizer.train(TrainingData([]))
    return tokenizer


def test_words_have_the_offsets_of_the_text() -> None:
    tokens = words(trained(), "播放周杰伦的稻香")
    assert tokens == [("播放", 0, 2), ("周杰伦", 2, 5), ("的", 5, 6), ("稻香", 6, 8)]


def test_whitespace_is_never_a_token_rasa_7910() -> None:
    tokens = words(trained(), "我想 去  北京")
    assert [t[0] for t in tokens] == ["我", "想", "去", "北京"]
    text = "我想 去  北京"
    assert all(text[start:end] == word for word, start, end in tokens)


@pytest.mark.parametrize(
    "text",
    ["Hello world，你好！😀", "打开QQ音乐放一首Yesterday", "（全角）？！。", "👍", "", "   "],
)
def test_mixed_scripts_punctuation_emoji_and_empty_text(text: str) -> None:
    tokens = words(trained(), text)
    assert tokens, text
    for word, start, end in tokens:
        assert text[start:end] == word
    if text.strip():
        assert all(word.strip() for word, _, _ in tokens)


def test_labels_split_on_the_split_symbol() -> None:
    tokenizer = trained(intent_tokenization_flag=True, intent_split_symbol="+")
    message = Message(text="你好", intent="问候+打招呼")
    tokenizer.process([message])
    assert [t.text for t in message.tokens["intent"]] == ["问候", "打招呼"]


def test_token_pattern_splits_words_into_characters() -> None:
    tokenizer = trained(token_pattern=r"[\u4e00-\u9fff]|[^\W\u4e00-\u9fff]+")
    assert [w for w, _, _ in words(tokenizer, "播放Jay的歌")] == ["播", "放", "Jay", "的", "歌"]


@pytest.fixture
def dictionaries(tmp_path: Path) -> Path:
    folder = tmp_path / "dicts"
    folder.mkdir()
    (folder / "singers.txt").write_text("韩雅乐 100 nr\n", encoding="utf-8")
    return folder


def test_a_user_dictionary_changes_only_its_own_model(dictionaries: Path) -> None:
    plain = trained()
    custom = trained(dictionary_path=str(dictionaries))
    assert "韩雅乐" in [w for w, _, _ in words(custom, "来一首韩雅乐的歌")]
    assert "韩雅乐" not in [w for w, _, _ in words(plain, "来一首韩雅乐的歌")]
    assert "韩雅乐" not in [w for w, _, _ in words(trained(), "来一首韩雅乐的歌")]
    import jieba

    assert "韩雅乐" not in jieba.lcut("来一首韩雅乐的歌")  # jieba's module-level segmenter too


def test_user_dictionaries_are_stored_in_the_archive(dictionaries: Path, tmp_path: Path) -> None:
    config = load_config({"language": "zh", "pipeline": [
        {"name": "JiebaTokenizer", "dictionary_path": str(dictionaries)},
        {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
    ]})
    data = TrainingData([Message(text="来一首韩雅乐的歌", intent="play"),
                         Message(text="今天天气怎么样", intent="weather")])
    archive = train(config, data, out=tmp_path / "models", fixed_model_name="zh", log=None)
    for file in dictionaries.iterdir():
        file.unlink()
    dictionaries.rmdir()
    model = Model.load(archive)  # loaded while the folder is gone: from the archive
    assert [3, 6] in model.parse("来一首韩雅乐的歌")["text_tokens"]  # 韩雅乐 is one word
    tokenizer = model.pipeline.components[0]
    assert isinstance(tokenizer, JiebaTokenizer)
    assert tokenizer.dictionaries_ == [("singers.txt", "韩雅乐 100 nr\n")]


def test_a_missing_dictionary_folder_is_one_line_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError) as info:
        trained(dictionary_path=str(missing))
    assert str(missing) in str(info.value) and "\n" not in str(info.value)


def test_a_dictionary_that_is_not_utf8_is_one_line_naming_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "dicts"
    folder.mkdir()
    (folder / "gbk.txt").write_bytes("韩雅乐 100 nr\n".encode("gbk"))
    with pytest.raises(ConfigError) as info:
        trained(dictionary_path=str(folder))
    message = str(info.value)
    assert str(folder / "gbk.txt") in message and "UTF-8" in message and "\n" not in message


def test_chinese_and_english_models_in_one_process_each_parse_as_trained(
    dictionaries: Path, tmp_path: Path
) -> None:
    def model(language: str, tokenizer: dict[str, object], examples: list[tuple[str, str]]) -> Model:
        config = load_config({"language": language, "pipeline": [
            tokenizer, {"name": "CountVectorsFeaturizer"}, {"name": "LogisticRegressionClassifier"},
        ]})
        data = TrainingData([Message(text=text, intent=intent) for text, intent in examples])
        return Model.load(train(config, data, out=tmp_path, fixed_model_name=language, log=None))

    chinese = model("zh", {"name": "JiebaTokenizer", "dictionary_path": str(dictionaries)},
                    [("来一首韩雅乐的歌", "play"), ("今天天气怎么样", "weather")])
    english = model("en", {"name": "WhitespaceTokenizer"},
                    [("play a song by adele", "play"), ("how is the weather today", "weather")])
    plain = model("zh-CN", {"name": "JiebaTokenizer"},
                  [("来一首韩雅乐的歌", "play"), ("今天天气怎么样", "weather")])
    assert chinese.parse("今天天气怎么样")["intent"]["name"] == "weather"
    assert english.parse("how is the weather")["intent"]["name"] == "weather"
    assert [3, 6] in chinese.parse("来一首韩雅乐的歌")["text_tokens"]
    assert [3, 6] not in plain.parse("来一首韩雅乐的歌")["text_tokens"]
    assert english.parse("play adele")["text_tokens"] == [[0, 4], [5, 10]]
