"""Chinese end to end: Rasa's reported failures with Chinese, reproduced and passing here.

- RasaHQ/rasa #10578: JiebaTokenizer with LanguageModelFeaturizer crashed DIET's training on a
  misaligned annotation.
- #5972: in unspaced text, an entity DIET found was widened to the whole sentence.
- #7689: LanguageModelTokenizer refused ``zh``, and annotations cutting jieba's words were lost
  ("Misaligned entity annotation").
- #6752 / #7910: each example became one token, and whitespace tokens were kept.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.model import Model, train
from nlu_engine.training_data import load_data
from tests.extras import requires_extra

pytestmark = requires_extra("zh")

ZH_NLU = """\
version: "3.1"
nlu:
- intent: play_music
  examples: |
    - 播放[周杰伦](singer)的歌
    - 我想听[王菲](singer)的歌
    - 来点[陈奕迅](singer)的歌
    - 放一首[刘德华](singer)的歌
    - 我要听[邓紫棋](singer)唱的歌
    - 播放[林俊杰](singer)的歌曲
    - 给我放[周杰伦](singer)的歌曲
- intent: weather
  examples: |
    - [北京](city)天气怎么样
    - [上海](city)明天下雨吗
    - [深圳](city)热不热
    - [杭州](city)天气好吗
    - 帮我查一下[南京](city)的天气
    - [广州](city)会下雨吗
    - [今天](date)天气怎么样
    - [今天](date)天气好吗
    - 帮我查一下[今天](date)天气
"""

DIET = {"epochs": 60, "random_seed": 1, "number_of_transformer_layers": 1, "transformer_size": 32,
        "embedding_dimension": 16, "show_progress": False}


@pytest.fixture(scope="module")
def zh_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("zh") / "nlu.yml"
    path.write_text(ZH_NLU, encoding="utf-8")
    return path


def _train(pipeline: list[dict[str, Any]], data: Path, out: Path) -> tuple[Model, list[str]]:
    """The model, and the progress lines and warnings training wrote."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logging.getLogger("nlu_engine").addHandler(handler)
    try:
        config = load_config({"language": "zh", "pipeline": pipeline})
        archive = train(config, load_data(data), out=out, fixed_model_name="zh", log=lines.append)
    finally:
        logging.getLogger("nlu_engine").removeHandler(handler)
    return Model.load(archive), lines


@pytest.fixture(scope="module")
def sparse_model(zh_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Model, list[str]]:
    pipeline = [
        {"name": "JiebaTokenizer"},
        {"name": "CountVectorsFeaturizer"},
        {"name": "CountVectorsFeaturizer", "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 3},
        {"name": "DIETClassifier", **DIET},
    ]
    return _train(pipeline, zh_data, tmp_path_factory.mktemp("sparse"))


def _spans(result: dict[str, Any]) -> list[tuple[str, int, int, str]]:
    return [(e["entity"], e["start"], e["end"], e["value"]) for e in result["entities"]]


def test_rasa_5972_an_entity_keeps_its_exact_span(sparse_model: tuple[Model, list[str]]) -> None:
    model, _ = sparse_model
    result = model.parse("我想听周杰伦的歌")
    assert result["intent"]["name"] == "play_music"
    assert _spans(result) == [("singer", 3, 6, "周杰伦")]


def test_rasa_6752_7910_words_not_sentences_and_no_whitespace_tokens(
    sparse_model: tuple[Model, list[str]],
) -> None:
    model, _ = sparse_model
    text = "我想 听  周杰伦的歌"
    tokens = model.parse(text)["text_tokens"]
    assert len(tokens) >= 5
    assert all(text[start:end].strip() == text[start:end] != "" for start, end in tokens)


def test_rasa_7689_an_annotation_inside_a_jieba_word_is_learned(
    sparse_model: tuple[Model, list[str]],
) -> None:
    """jieba reads 今天天气 as one word; [今天](date) is kept, counted once, and found again."""
    model, lines = sparse_model
    notices = [line for line in lines if "split(s) of tokens" in line]
    assert len(notices) == 1 and "3 split(s) of tokens in 3 training example(s)" in notices[0]
    assert "今天天气 -> 今天 天气" in notices[0]
    result = model.parse("今天天气怎么样")
    assert [0, 2] in result["text_tokens"] and [2, 4] in result["text_tokens"]
    assert ("date", 0, 2, "今天") in _spans(result)


@requires_extra("lm")
def test_rasa_10578_jieba_with_a_language_model_trains_on_misaligned_annotations(
    zh_data: Path, tmp_path: Path
) -> None:
    from tests.featurizers.tiny_bert import tiny_bert

    pipeline = [
        {"name": "JiebaTokenizer", "split_annotated_words": False},
        {"name": "LanguageModelFeaturizer", "model_weights": str(tiny_bert(tmp_path / "bert"))},
        {"name": "CountVectorsFeaturizer", "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 2},
        {"name": "DIETClassifier", **DIET, "epochs": 2, "run_eagerly": True},
    ]
    model, lines = _train(pipeline, zh_data, tmp_path / "models")
    assert any("3 split(s) of tokens" in line for line in lines)
    for text in ["今天天气怎么样", "播放周杰伦的歌", "Hello，世界！😀", ""]:
        result = model.parse(text)
        assert result["intent"]["name"] in {"play_music", "weather", None}
        for entity in result["entities"]:
            assert text[entity["start"] : entity["end"]] == entity["value"]


@pytest.mark.parametrize(
    "text",
    ["打开QQ音乐放Yesterday", "（北京）天气？！", "播放周杰伦的歌😀👍", "😀", "", "   ", "hello world"],
)
def test_mixed_scripts_full_width_punctuation_emoji_and_empty_messages_parse(
    sparse_model: tuple[Model, list[str]], text: str
) -> None:
    model, _ = sparse_model
    result = model.parse(text)
    text = text.strip()  # as Rasa's server does
    assert result["text"] == text
    assert result["intent"]["name"] in {"play_music", "weather", None}
    for entity in result["entities"]:
        assert text[entity["start"] : entity["end"]] == entity["value"]
    for start, end in result["text_tokens"]:
        assert 0 <= start <= end <= len(text)
