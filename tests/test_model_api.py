"""The Python API: ``nlu_engine.train`` and ``nlu_engine.load(path).parse / parse_batch``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nlu_engine
from nlu_engine.errors import ArchiveError, ConfigError, DataError, NLUError
from nlu_engine.model import Model
from nlu_engine.training_data import load_data, write_data
from nlu_engine.training_data.split import train_test_split

PROJECT_ROOT = Path(__file__).resolve().parents[1]
LOGREG = str(PROJECT_ROOT / "nlu_engine" / "pipelines" / "logreg.yml")
RASA_KEYS = {"text", "intent", "entities", "text_tokens", "intent_ranking"}
INTENTS = {"greet", "book_flight", "check_order"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> str:
    out = tmp_path_factory.mktemp("api")
    return nlu_engine.train(LOGREG, str(tiny_data_path), out=str(out), fixed_model_name="api")


@pytest.fixture(scope="module")
def model(archive: str) -> Model:
    return nlu_engine.load(archive)


def test_train_returns_the_archive_path(archive: str) -> None:
    assert isinstance(archive, str)
    assert archive.endswith("api.tar.gz")
    assert Path(archive).is_file()


def test_parse_result_has_rasa_keys(model: Model) -> None:
    result = model.parse("hello there")
    assert set(result) == RASA_KEYS
    assert result["text"] == "hello there"
    assert set(result["intent"]) == {"name", "confidence"}
    assert result["intent"]["name"] == "greet"
    assert isinstance(result["intent"]["confidence"], float)
    assert result["entities"] == []  # no entity extractor in this pipeline
    assert result["text_tokens"] == [[0, 5], [6, 11]]
    ranking = result["intent_ranking"]
    assert {r["name"] for r in ranking} == INTENTS
    assert all(set(r) == {"name", "confidence"} for r in ranking)
    confidences = [r["confidence"] for r in ranking]
    assert confidences == sorted(confidences, reverse=True)
    assert ranking[0] == result["intent"]
    assert sum(confidences) == pytest.approx(1.0)
    json.dumps(result, allow_nan=False)  # plain JSON


def test_parse_batch_matches_parse_in_order(model: Model, tiny_texts: list[str]) -> None:
    texts = [*tiny_texts, "where is order 98765", "hi"]
    batch = model.parse_batch(texts)
    assert [r["text"] for r in batch] == texts
    assert batch == [model.parse(text) for text in texts]
    assert model.parse_batch(texts, batch_size=2) == batch
    assert model.parse_batch([]) == []
    assert batch[-2]["intent"]["name"] == "check_order"


@pytest.mark.parametrize("text", ["", "   ", "Grüße aus Köln 🎉", "a" * 2000, "?!"])
def test_parse_odd_texts(model: Model, text: str) -> None:
    result = model.parse(text)
    assert result["text"] == text
    assert set(result) == RASA_KEYS
    assert result["intent"]["name"] in INTENTS
    for start, end in result["text_tokens"]:
        assert 0 <= start <= end <= len(text)
    json.dumps(result, allow_nan=False)


def test_model_properties(model: Model, archive: str) -> None:
    assert model.path == Path(archive)
    manifest = model.manifest
    assert manifest["engine"] == "nlu_engine"
    assert manifest["version"] == nlu_engine.__version__
    assert manifest["labels"]["intents"] == sorted(INTENTS)
    assert manifest["labels"]["entities"] == ["city", "count", "order_id"]
    assert manifest["num_examples"] == 12
    assert [step["name"] for step in manifest["pipeline"]] == [
        "WhitespaceTokenizer", "CountVectorsFeaturizer", "CountVectorsFeaturizer",
        "LogisticRegressionClassifier",
    ]
    assert model.model_id == f"{manifest['fingerprint']['data']}-api"


def test_load_folder_and_default_name(tmp_path: Path, tiny_data_path: Path, model: Model) -> None:
    path = nlu_engine.train(LOGREG, str(tiny_data_path), out=str(tmp_path))
    assert re.fullmatch(r"nlu-\d{8}-\d{6}\.tar\.gz", Path(path).name)
    loaded = nlu_engine.load(str(tmp_path))
    assert loaded.path == Path(path)
    assert loaded.parse("good morning") == model.parse("good morning")


def test_train_on_several_files_and_overrides(tmp_path: Path, tiny_data_path: Path) -> None:
    first, second = train_test_split(load_data(tiny_data_path), 0.5, seed=1)
    files = [str(write_data(first, tmp_path / "a.yml")), str(write_data(second, tmp_path / "b.json"))]
    path = nlu_engine.train(LOGREG, files, out=str(tmp_path / "m"), fixed_model_name="x.tar.gz",
                            overrides=["LogisticRegressionClassifier.ranking_length=2"])
    assert Path(path).name == "x.tar.gz"
    model = nlu_engine.load(path)
    assert model.manifest["num_examples"] == 12
    result = model.parse("hello there")
    assert len(result["intent_ranking"]) == 2


def test_train_from_a_config_dict(tmp_path: Path, tiny_data_path: Path) -> None:
    config = {"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"},
                                             {"name": "KeywordIntentClassifier"}]}
    model = nlu_engine.load(nlu_engine.train(config, str(tiny_data_path), out=str(tmp_path)))
    assert model.parse("well, hi")["intent"] == {"name": "greet", "confidence": 1.0}
    assert model.parse("nothing known")["intent"] == {"name": None, "confidence": 0.0}


def test_user_errors_are_nlu_errors(tmp_path: Path, tiny_data_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        nlu_engine.train(LOGREG, str(tmp_path / "missing.yml"), out=str(tmp_path))
    with pytest.raises(ConfigError, match="did you mean 'max_iter'"):
        nlu_engine.train(LOGREG, str(tiny_data_path), out=str(tmp_path),
                         overrides=["LogisticRegressionClassifier.maxiter=3"])
    with pytest.raises(ArchiveError, match="not found"):
        nlu_engine.load(str(tmp_path / "none.tar.gz"))
    assert issubclass(ArchiveError, NLUError)
    assert not list(tmp_path.glob("*.tar.gz")), "nothing is written when the input is bad"


def test_importing_the_package_is_light() -> None:
    code = (
        "import sys, nlu_engine\n"
        "heavy = ('tensorflow', 'keras', 'sklearn', 'scipy', 'numpy', 'yaml')\n"
        "print([m for m in heavy if m in sys.modules])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr


def test_keyword_classifier_keeps_an_earlier_prediction(tmp_path: Path, tiny_data_path: Path) -> None:
    """As in Rasa: after another classifier, keywords only override when one intent matches."""
    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"}, {"name": "KeywordIntentClassifier"}]}
    model = nlu_engine.load(nlu_engine.train(config, str(tiny_data_path), out=str(tmp_path)))
    unmatched = model.parse("track my parcel please")
    assert unmatched["intent"]["name"] in INTENTS
    assert unmatched["intent"] == unmatched["intent_ranking"][0]  # the logistic regression's answer
    matched = model.parse("oh hi")
    assert matched["intent"] == {"name": "greet", "confidence": 1.0}
    assert len(matched["intent_ranking"]) == 3  # the earlier ranking is kept


def test_intent_messages_in_a_batch_keep_their_place(model: Model) -> None:
    texts = ["hello there", "/check_order", "fly from Madrid to Paris", '/greet{"city": "Rome"}']
    results = model.parse_batch(texts)
    assert [r["text"] for r in results] == texts
    assert results[0] == model.parse("hello there") and results[2] == model.parse(texts[2])
    assert results[1]["intent"] == {"name": "check_order", "confidence": 1.0}
    # without a domain in the model, entities of any type are kept (as Rasa without a domain)
    assert [(e["entity"], e["value"]) for e in results[3]["entities"]] == [("city", "Rome")]


def test_a_domain_at_training_is_kept_for_intent_messages(tmp_path: Path, tiny_data_path: Path) -> None:
    domain = tmp_path / "domain.yml"
    domain.write_text("intents: [greet, book_flight, check_order, button_only]\nentities: [city]\n")
    archive = nlu_engine.train(LOGREG, str(tiny_data_path), out=str(tmp_path), fixed_model_name="d",
                               domain=str(domain))
    model = nlu_engine.load(archive)
    assert model.manifest["domain"] == {"intents": ["greet", "book_flight", "check_order", "button_only"],
                                        "entities": ["city"]}
    result = model.parse('/button_only{"city": "Rome", "size": "large"}')
    assert result["intent"]["name"] == "button_only"
    assert [e["entity"] for e in result["entities"]] == ["city"]
