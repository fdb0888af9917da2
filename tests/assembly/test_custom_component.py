"""A custom component named by its import path: validated, trained, persisted and loaded.

Loading imports it only when the user allows it (``allow_components``, ``--allow-component`` or
the ``--config`` it was trained from): a model archive is data and never chooses what is imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import nlu_engine
from nlu_engine.assembly.config import load_config
from nlu_engine.contract.errors import ArchiveError, ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
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
    model = nlu_engine.load(archive, allow_components=[SENTIMENT])
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
    reloaded = nlu_engine.load(archive, allow_components=[SENTIMENT])
    assert json.dumps(reloaded.parse_batch(texts)) == json.dumps(results)
    assert reloaded.parse(texts[1]) == results[1]


def test_a_load_written_for_a_dict_config_still_loads(
    tmp_path: Path, feedback_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load`` receives the typed Config; one written when it got a dict (``cls(**config)``,
    ``config["key"]``) still works, with a DeprecationWarning saying what to change."""
    from examples.custom_components.sentiment import LEXICON_FILE, SentimentAnalyzer

    seen: list[object] = []

    def old_load(cls: type[SentimentAnalyzer], directory: Path, config: dict) -> SentimentAnalyzer:
        seen.append(config["negation_window"])
        component = cls(**config)
        component.lexicon_ = json.loads((directory / LEXICON_FILE).read_text(encoding="utf-8"))
        return component

    archive = nlu_engine.train(config(negation_window=2), str(feedback_data), out=str(tmp_path),
                               fixed_model_name="old")
    expected = nlu_engine.load(archive, allow_components=[SENTIMENT]).parse("not really good")
    monkeypatch.setattr(SentimentAnalyzer, "load", classmethod(old_load))
    with pytest.warns(DeprecationWarning, match=r"build the component with cls\(config\)"):
        model = nlu_engine.load(archive, allow_components=[SENTIMENT])
    assert seen == [2]
    assert model.parse("not really good") == expected
    assert sentiments(expected) == [("good", "negative")]  # negation_window 2 reached "not"


def test_learning_can_be_switched_off(tmp_path: Path, feedback_data: Path) -> None:
    archive = nlu_engine.train(config(learn_from_data=False, negations=[]), str(feedback_data),
                               out=str(tmp_path), fixed_model_name="plain")
    model = nlu_engine.load(archive, allow_components=[SENTIMENT])
    assert sentiments(model.parse("the crew was superb")) == []
    assert sentiments(model.parse("not good")) == [("good", "positive")]


def test_loading_elsewhere_names_the_missing_module(tmp_path: Path, feedback_data: Path) -> None:
    archive = nlu_engine.train(config(), str(feedback_data), out=str(tmp_path), fixed_model_name="m")
    code = (
        "import sys, nlu_engine\n"
        "from nlu_engine.contract.errors import ArchiveError\n"
        "try:\n"
        f"    nlu_engine.load({archive!r}, allow_components=[{SENTIMENT!r}])\n"
        "except ArchiveError as error:\n"
        "    print(error)\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # this checkout's nlu_engine, without the project root (which holds examples/) on the path
    site = tmp_path / "site"
    site.mkdir()
    (site / "nlu_engine").symlink_to(PROJECT_ROOT / "nlu_engine")
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True,
                            text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert "cannot import module 'examples.custom_components.sentiment'" in result.stdout


@pytest.fixture
def feedback_archive(tmp_path: Path, feedback_data: Path) -> str:
    return nlu_engine.train(config(), str(feedback_data), out=str(tmp_path / "models"),
                            fixed_model_name="feedback")


def test_loading_without_allowing_it_is_refused(feedback_archive: str) -> None:
    with pytest.raises(ArchiveError) as info:
        nlu_engine.load(feedback_archive)
    message = str(info.value)
    assert f"--allow-component {SENTIMENT}" in message and "\n" not in message
    with pytest.raises(ArchiveError, match="--allow-component"):
        nlu_engine.load(feedback_archive, allow_components=["examples.other.Component"])


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-m", "nlu_engine", *args], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120, env=env)


def test_the_cli_loads_it_when_allowed_by_name_or_by_config(
    feedback_archive: str, tmp_path: Path
) -> None:
    expected = nlu_engine.load(feedback_archive, allow_components=[SENTIMENT]).parse("I love it")
    refused = cli("parse", "-m", feedback_archive, "I love it")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()]
    assert f"--allow-component {SENTIMENT}" in refused.stderr

    by_name = cli("parse", "-m", feedback_archive, "--allow-component", SENTIMENT, "I love it")
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout) == expected

    config_file = tmp_path / "config.yml"
    config_file.write_text(json.dumps(config()), encoding="utf-8")  # JSON is YAML
    by_config = cli("parse", "-m", feedback_archive, "--config", str(config_file), "I love it")
    assert by_config.returncode == 0, by_config.stderr
    assert json.loads(by_config.stdout) == expected


def test_finetuning_a_model_with_a_custom_component(tmp_path: Path, feedback_data: Path) -> None:
    """The model's own config is used when none is given: its custom component must then be
    allowed, as for loading; the config that names it allows it too."""
    from nlu_engine.assembly.model import train

    base = train(config(), feedback_data, out=tmp_path, fixed_model_name="base", log=None)
    with pytest.raises(ArchiveError, match=f"--allow-component {SENTIMENT}"):
        train(None, feedback_data, out=tmp_path, finetune=base, log=None)
    tuned = train(None, feedback_data, out=tmp_path, finetune=base, log=None,
                  allow_components=[SENTIMENT])
    again = train(config(), feedback_data, out=tmp_path, finetune=tuned, log=None)
    manifest = nlu_engine.load(str(again), allow_components=[SENTIMENT]).manifest
    outcome = manifest["finetune"]["components"][3]
    assert (outcome["name"], outcome["decision"]) == (SENTIMENT, "reused")  # no data change
