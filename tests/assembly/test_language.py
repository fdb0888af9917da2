"""``language:`` picks the tokenizer the language needs (``contract.languages``, resolved in
``assembly.config``): the table, the notices and errors, Japanese end to end, and an archive
trained before the table keeping its tokenizer."""

from __future__ import annotations

import ast
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

import nlu_engine.tokenizers.segmenter as segmenter
from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.model import Model, train
from nlu_engine.assembly.registry import component_class
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.languages import LANGUAGES
from nlu_engine.contract.message import Message, Token
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.tokenizers.base import BaseTokenizer
from nlu_engine.tokenizers.whitespace import whitespace_tokenize
from nlu_engine.training_data import load_data
from tests.extras import requires_extra

TOKENIZER = {"name": "WhitespaceTokenizer"}
FEATURIZER = {"name": "CountVectorsFeaturizer"}


def steps(language: str, *pipeline: dict[str, Any]) -> tuple[list[str], list[str]]:
    config = load_config({"language": language, "pipeline": list(pipeline or [TOKENIZER, FEATURIZER])})
    return [s.name for s in config.steps], config.notices


@pytest.mark.parametrize("language, tokenizer", [
    pytest.param("zh", "JiebaTokenizer", marks=requires_extra("zh")),
    pytest.param("zh-TW", "JiebaTokenizer", marks=requires_extra("zh")),
    pytest.param("ja", "SudachiTokenizer", marks=requires_extra("ja")),
    pytest.param("ko", "KiwiTokenizer", marks=requires_extra("ko")),
    pytest.param("th", "PyThaiNLPTokenizer", marks=requires_extra("th")),
    ("en", "WhitespaceTokenizer"), ("de", "WhitespaceTokenizer"), ("ar", "WhitespaceTokenizer"),
    ("pt_BR", "WhitespaceTokenizer"), ("xx", "WhitespaceTokenizer"),
])
def test_the_language_chooses_the_tokenizer_in_place_of_whitespace(language: str, tokenizer: str) -> None:
    names, notices = steps(language)
    assert names == [tokenizer, "CountVectorsFeaturizer"]
    if tokenizer == "WhitespaceTokenizer":
        assert notices == []
    else:
        assert len(notices) == 1 and f"{tokenizer} splits the words" in notices[0]
        assert "language_tokenizer: false" in notices[0] and "\n" not in notices[0]


@requires_extra("ja")
def test_the_common_tokenizer_parameters_carry_over_and_the_default_pipeline_resolves() -> None:
    config = load_config({"language": "ja", "pipeline": [
        {**TOKENIZER, "intent_tokenization_flag": True, "intent_split_symbol": "+"}, FEATURIZER]})
    assert config.steps[0].params["intent_tokenization_flag"] is True
    assert config.steps[0].params["intent_split_symbol"] == "+"
    assert config.as_dict()["pipeline"][0]["name"] == "SudachiTokenizer"
    default = load_config({"language": "ja"})  # no pipeline: diet.yml with the language's tokenizer
    assert [s.name for s in default.steps][:2] == ["LanguageIdentifier", "SudachiTokenizer"]
    assert sum("SudachiTokenizer splits the words" in n for n in default.notices) == 1


def test_a_named_tokenizer_and_language_tokenizer_false_are_kept() -> None:
    assert steps("ja", {**TOKENIZER, "language_tokenizer": False}, FEATURIZER) == (
        ["WhitespaceTokenizer", "CountVectorsFeaturizer"], [])
    custom = {"name": "tests.assembly.test_language.SpacedTokenizer"}
    assert steps("zh", custom, FEATURIZER)[0][0] == custom["name"]


def test_an_unspaced_language_without_a_tokenizer_keeps_whitespace_with_a_notice() -> None:
    names, notices = steps("km")
    assert names[0] == "WhitespaceTokenizer"
    assert len(notices) == 1 and "Khmer does not separate words by spaces" in notices[0]


@pytest.mark.parametrize("language", ["jp", "english", "", 3, ["en"], "z"])
def test_an_unknown_language_is_one_line_listing_the_known_ones(language: object) -> None:
    if language == "":
        assert steps("en")[0][0] == "WhitespaceTokenizer"  # an empty language is the default, en
        return
    with pytest.raises(ConfigError) as info:
        steps(language)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message and "is not known" in message
    assert "ja, ka" in message and "'xx' for any language" in message


def test_every_tokenizer_of_the_table_is_registered_with_its_extra_of_setup_py() -> None:
    tree = ast.parse((Path(__file__).parents[2] / "setup.py").read_text(encoding="utf-8"))
    extras = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "EXTRAS" for t in node.targets))
    assert isinstance(extras, ast.Dict)
    names = {key.value for key in extras.keys if isinstance(key, ast.Constant)}
    for code, row in LANGUAGES.items():
        if row.tokenizer:
            cls = component_class(row.tokenizer)
            assert getattr(cls, "extra", None) == row.extra and row.extra in names, code


def test_a_missing_package_is_one_line_at_config_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segmenter.importlib.util, "find_spec", lambda *_: None)
    with pytest.raises(ConfigError) as info:
        steps("ja")
    message = str(info.value)
    assert "\n" not in message and "pip install 'nlu-engine[ja]'" in message
    assert "language 'ja' (Japanese)" in message and "language_tokenizer: false" in message


JA_NLU = """\
version: "3.1"
nlu:
- intent: book_train
  examples: |
    - [東京](city)までの新幹線を予約して
    - [大阪](city)行きの切符を買いたい
    - 明日[京都](city)に行く電車を予約
    - [名古屋](city)までの指定席をお願い
    - [博多](city)行きの新幹線を二枚
    - [仙台](city)まで一枚予約して
- intent: weather
  examples: |
    - 今日の天気は？
    - 明日は雨が降りますか
    - 週末の天気を教えて
    - 傘は必要かな
    - 外は寒いですか
    - 天気予報を見せて
"""


@requires_extra("ja")
def test_unspaced_japanese_trains_entities_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "nlu.yml"
    data.write_text(JA_NLU, encoding="utf-8")
    diet = {"name": "DIETClassifier", "epochs": 60, "random_seed": 1, "number_of_transformer_layers": 1,
            "transformer_size": 32, "embedding_dimension": 16, "show_progress": False}
    config = load_config({"language": "ja", "pipeline": [
        TOKENIZER, FEATURIZER,
        {**FEATURIZER, "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 3}, diet]})
    archive = train(config, load_data(data), out=tmp_path, fixed_model_name="ja", log=None)
    model = Model.load(archive)
    assert model.manifest["pipeline"][0]["name"] == "SudachiTokenizer"
    assert model.pipeline.config.steps[0].name == "SudachiTokenizer"
    result = model.parse("大阪までの新幹線を予約して")
    assert result["intent"]["name"] == "book_train"
    assert [(e["entity"], e["start"], e["end"], e["value"]) for e in result["entities"]] == [
        ("city", 0, 2, "大阪")]
    for text in ["iPhoneで東京の天気😀", "（東京）まで！\n２枚", ""]:
        for entity in model.parse(text)["entities"]:
            assert text.strip()[entity["start"]:entity["end"]] == entity["value"]


def _as_before_the_table(archive: Path, target: Path, language: str) -> Path:
    """``archive`` as an engine before this change wrote it: its WhitespaceTokenizer without
    ``language_tokenizer``, its language ``language``."""
    with tarfile.open(archive) as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]  # type: ignore[union-attr]
    with tarfile.open(target, "w:gz") as tar:
        for member, data in members:
            if member.name == "manifest.json" and data is not None:
                manifest = json.loads(data)
                manifest["language"] = language
                for step in manifest["pipeline"]:
                    step.pop("language_tokenizer", None)
                data = json.dumps(manifest).encode()
                member.size = len(data)
            tar.addfile(member, None if data is None else io.BytesIO(data))
    return target


def test_an_archive_from_before_the_table_loads_and_parses_as_before(tmp_path: Path) -> None:
    config = load_config({"language": "en", "pipeline": [
        TOKENIZER, FEATURIZER, {"name": "LogisticRegressionClassifier"}]})
    data = TrainingData([Message(text=t, intent=i) for t, i in [
        ("东京 天气", "weather"), ("明天 下雨 吗", "weather"), ("播放 音乐", "music"),
        ("放 一首 歌", "music")]])
    archive = train(config, data, out=tmp_path, fixed_model_name="en", log=None)
    old = _as_before_the_table(archive, tmp_path / "old.tar.gz", "zh")
    before, loaded = Model.load(archive), Model.load(old)
    assert loaded.manifest["language"] == "zh"
    assert loaded.pipeline.config.steps[0].name == "WhitespaceTokenizer"
    for text in ["东京 天气", "播放 音乐 吧", "明天下雨吗"]:
        assert loaded.parse(text) == before.parse(text)
    assert loaded.parse("明天下雨吗")["text_tokens"] == [[0, 5]]  # whitespace tokens, as trained


class SpacedTokenizer(BaseTokenizer):
    """A custom tokenizer the config names: the language never replaces it."""

    def tokenize(self, message: Message, attribute: str) -> list[Token]:
        return whitespace_tokenize(message.get(attribute) or "")


# --- steps that serve some languages only (the default's English-only encoder) ----------------
@pytest.mark.parametrize(("language", "kept"), [("en", True), ("en-GB", True), ("de", False), ("xx", True)])
def test_a_step_serving_other_languages_is_left_out_with_a_notice(tmp_path: Path, language: str,
                                                                 kept: bool) -> None:
    path = tmp_path / "config.yml"
    path.write_text(f"language: {language}\npipeline:\n  - name: WhitespaceTokenizer\n"
                    "  - name: CountVectorsFeaturizer\n"
                    "  - name: LanguageModelFeaturizer\n    languages: [en]\n"
                    "  - name: LogisticRegressionClassifier\n", encoding="utf-8")
    config = load_config(path)
    names = [step.name for step in config.steps]
    assert ("LanguageModelFeaturizer" in names) == kept
    left_out = [n for n in config.notices if "serves en only; left out" in n]
    assert bool(left_out) != kept


def test_the_default_pipeline_drops_its_english_encoder_for_german(tmp_path: Path) -> None:
    path = tmp_path / "config.yml"
    path.write_text("language: de\n", encoding="utf-8")
    names = [step.name for step in load_config(path).steps]
    assert "LanguageModelFeaturizer" not in names and "UniversalSentenceEncoderFeaturizer" in names
    assert "IntentCombiner" in names
