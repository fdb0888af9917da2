"""A custom component named by its import path: validated, trained, persisted and loaded."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import nlu_engine
from nlu_engine.config import load_config
from nlu_engine.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SENTIMENT = "examples.custom_components.sentiment.SentimentAnalyzer"

FEEDBACK = """version: "3.1"
nlu:
- intent: praise
  examples: |
    - the crew was [superb]{"entity": "sentiment", "value": "positive"}
    - I love this airline
    - great service, thanks
    - what a nice flight
- intent: complain
  examples: |
    - the seat was [cramped]{"entity": "sentiment", "value": "negative"}
    - the food was terrible
    - I hate waiting
    - the staff was not nice
"""


def config(**params: object) -> dict[str, object]:
    return {
        "language": "en",
        "pipeline": [
            {"name": "WhitespaceTokenizer"},
            {"name": "CountVectorsFeaturizer"},
            {"name": "LogisticRegressionClassifier"},
            {"name": SENTIMENT, **params},
        ],
    }


@pytest.fixture(autouse=True)
def project_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Custom components resolve from the working directory, as in Rasa."""
    monkeypatch.chdir(PROJECT_ROOT)


@pytest.fixture
def feedback_data(tmp_path: Path) -> Path:
    path = tmp_path / "feedback.yml"
    path.write_text(FEEDBACK, encoding="utf-8")
    return path


def sentiments(result: dict[str, object]) -> list[tuple[str, str]]:
    text = str(result["text"])
    return [
        (text[e["start"] : e["end"]], e["value"])
        for e in result["entities"]  # type: ignore[attr-defined]
        if e["entity"] == "sentiment"
    ]


def test_config_validates_the_custom_component() -> None:
    step = load_config(config(negation_window=2)).steps[-1]
    assert step.cls.__name__ == "SentimentAnalyzer"
    assert step.params["negation_window"] == 2
    assert step.params["learn_from_data"] is True
    with pytest.raises(ConfigError, match="did you mean 'negation_window'"):
        load_config(config(negation_windw=2))
    with pytest.raises(ConfigError, match="'negation_window' = 9 is out of range"):
        load_config(config(negation_window=9))
    with pytest.raises(ConfigError, match="'positive_words' must be a list of a string"):
        load_config(config(positive_words="good"))
    with pytest.raises(ConfigError, match=r"\(step 4\): positive_words and negative_words share good"):
        load_config(config(negative_words=["Good"]))  # the Config's validate, before training
    with pytest.raises(ConfigError, match="needs tokens"):
        load_config({"pipeline": [{"name": SENTIMENT}]})


def test_train_parse_persist_load(tmp_path: Path, feedback_data: Path) -> None:
    archive = nlu_engine.train(config(), str(feedback_data), out=str(tmp_path / "models"),
                               fixed_model_name="feedback")
    model = nlu_engine.load(archive)
    texts = [
        "the crew was superb",  # learned from the training data
        "the food was not good",  # negation flips the polarity
        "I love it but the seat was cramped",
        "when does the flight leave",  # no opinion words
    ]
    results = model.parse_batch(texts)
    assert [sentiments(r) for r in results] == [
        [("superb", "positive")],
        [("good", "negative")],
        [("love", "positive"), ("cramped", "negative")],
        [],
    ]
    entity = results[0]["entities"][0]
    assert entity["extractor"] == "SentimentAnalyzer"
    assert entity["confidence_entity"] == 1.0
    assert results[2]["intent"]["name"] in {"praise", "complain"}

    # the archive holds the lexicon as JSON in the component's own folder
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        lexicon_name = "components/3_SentimentAnalyzer/lexicon.json"
        assert lexicon_name in names
        lexicon = json.loads(tar.extractfile(lexicon_name).read())  # type: ignore[union-attr]
    assert lexicon["superb"] == "positive" and lexicon["cramped"] == "negative"
    manifest = model.manifest
    assert manifest["pipeline"][-1]["name"] == SENTIMENT

    # loading again gives the same answers, bit for bit
    reloaded = nlu_engine.load(archive)
    assert json.dumps(reloaded.parse_batch(texts)) == json.dumps(results)
    assert reloaded.parse(texts[1]) == results[1]


def test_learning_can_be_switched_off(tmp_path: Path, feedback_data: Path) -> None:
    archive = nlu_engine.train(config(learn_from_data=False, negations=[]), str(feedback_data),
                               out=str(tmp_path), fixed_model_name="plain")
    model = nlu_engine.load(archive)
    assert sentiments(model.parse("the crew was superb")) == []
    assert sentiments(model.parse("not good")) == [("good", "positive")]


def test_loading_elsewhere_names_the_missing_module(tmp_path: Path, feedback_data: Path) -> None:
    archive = nlu_engine.train(config(), str(feedback_data), out=str(tmp_path), fixed_model_name="m")
    code = (
        "import sys, nlu_engine\n"
        "from nlu_engine.errors import ArchiveError\n"
        "try:\n"
        f"    nlu_engine.load({archive!r})\n"
        "except ArchiveError as error:\n"
        "    print(error)\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "cannot import module 'examples.custom_components.sentiment'" in result.stdout
