"""The Python API: ``nlu_engine.train`` and ``nlu_engine.load(path).parse / parse_batch``."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import nlu_engine
from nlu_engine.assembly.model import Model
from nlu_engine.contract.errors import ArchiveError, ConfigError, DataError, NLUError
from nlu_engine.training_data import load_data, write_data
from nlu_engine.training_data.split import train_test_split

PROJECT_ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.parametrize("text", ["Grüße aus Köln 🎉", "a" * 2000, "?!", " \t hi there \n"])
def test_parse_odd_texts(model: Model, text: str) -> None:
    result = model.parse(text)
    assert result["text"] == text.strip()  # as Rasa's UserMessage strips it
    assert set(result) == RASA_KEYS
    assert result["intent"]["name"] in INTENTS
    for start, end in result["text_tokens"]:
        assert 0 <= start <= end <= len(text.strip())
    json.dumps(result, allow_nan=False)


@pytest.mark.parametrize("text", ["", "   ", "\t\n "])
def test_empty_and_whitespace_messages_parse_as_rasas_server(model: Model, text: str) -> None:
    """Rasa 3.6.21 (``Agent.parse_message``, what ``/model/parse`` calls; DIET and
    ResponseSelector, measured with ``rasa-reference``) strips the message, runs the empty text
    through the pipeline and answers the model's guess for featureless input: for "", "   " and
    "\t\n" alike ``{"text": "", "intent": {"name": "greet", "confidence": 0.835...},
    "entities": [], "text_tokens": [[0, 0]], "intent_ranking": [<every intent>],
    "response_selector": {...}}``. The same shape here, with this model's guess."""
    result = model.parse(text)
    assert result == model.parse("")
    assert set(result) == RASA_KEYS
    assert result["text"] == "" and result["entities"] == [] and result["text_tokens"] == [[0, 0]]
    assert result["intent"]["name"] in INTENTS
    assert result["intent_ranking"][0]["name"] == result["intent"]["name"]
    assert {r["name"] for r in result["intent_ranking"]} == INTENTS


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
    assert manifest["runtime"] == model.runtime == "float32"  # the parse runtime, recorded


def test_a_missing_onnxruntime_is_one_line_at_load_naming_what_to_install(
    archive: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if not installed
    with pytest.raises(ConfigError) as raised:
        nlu_engine.load(archive)
    assert "\n" not in str(raised.value)
    assert "needs onnxruntime" in str(raised.value) and "pip install 'onnxruntime" in str(raised.value)
    monkeypatch.undo()
    assert nlu_engine.load(archive, runtime="int8").runtime == "int8"


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


# --- fine-tuning: train(..., finetune=...) ---------------------------------------------------------
def _folder_state(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes (hidden partial files too)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def without_greet(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Path:
    """The tiny data set without the intent greet, as a file."""
    data = load_data(tiny_data_path)
    path = tmp_path_factory.mktemp("no-greet") / "nlu.yml"
    write_data(data.with_messages([m for m in data.messages if m.intent != "greet"]), path, "yaml")
    return path


def test_finetune_adds_an_intent_and_keeps_the_old_archive(
    tmp_path: Path, tiny_data_path: Path, without_greet: Path
) -> None:
    base = Path(nlu_engine.train(LOGREG, str(without_greet), out=str(tmp_path), fixed_model_name="base"))
    before = base.read_bytes()
    lines: list[str] = []
    from nlu_engine.assembly.model import train

    path = train(None, tiny_data_path, out=tmp_path, finetune=True, log=lines.append)
    assert base.read_bytes() == before and path != base
    assert "notice: new intents: greet" in lines
    assert "[2/4] CountVectorsFeaturizer resumed" in "\n".join(lines)
    assert lines[-2] == ("fine-tuning: reused: WhitespaceTokenizer; resumed: CountVectorsFeaturizer, "
                         "CountVectorsFeaturizer; trained from scratch: LogisticRegressionClassifier")
    model = nlu_engine.load(str(path))
    assert model.parse("hello there")["intent"]["name"] == "greet"
    assert model.manifest["finetuned_from"] == "base.tar.gz"
    assert model.manifest["labels"]["intents"] == sorted(INTENTS)
    decisions = [c["decision"] for c in model.manifest["finetune"]["components"]]
    assert decisions == ["reused", "resumed", "resumed", "trained from scratch"]


def test_finetune_again_and_again(tmp_path: Path, tiny_data_path: Path, without_greet: Path) -> None:
    """Each round starts from the archive the last one wrote (Rasa broke on the second, #8973)."""
    nlu_engine.train(LOGREG, str(without_greet), out=str(tmp_path), fixed_model_name="round0")
    data = load_data(tiny_data_path)
    texts = [m.text for m in data.messages]
    for round_ in range(1, 5):
        extra = [*data.messages, *[dataclasses.replace(m, text=f"{m.text} {'again ' * round_}")
                                   for m in data.messages[:round_]]]
        path = tmp_path / f"data{round_}.yml"
        write_data(data.with_messages(extra), path, "yaml")
        archive = nlu_engine.train(None, str(path), out=str(tmp_path), finetune=True,
                                   fixed_model_name=f"round{round_}")
        model = nlu_engine.load(archive)
        assert model.manifest["finetuned_from"] == f"round{round_ - 1}.tar.gz"
        assert len(model.parse_batch(texts)) == len(texts)
    assert sorted(p.name for p in tmp_path.glob("*.tar.gz")) == [f"round{i}.tar.gz" for i in range(5)]


def test_finetune_without_a_data_change_retrains_nothing(tmp_path: Path, tiny_data_path: Path) -> None:
    first = nlu_engine.train(LOGREG, str(tiny_data_path), out=str(tmp_path), fixed_model_name="first")
    second = nlu_engine.train(None, str(tiny_data_path), out=str(tmp_path), finetune=first)
    manifest = nlu_engine.load(second).manifest
    assert {c["decision"] for c in manifest["finetune"]["components"]} == {"reused"}
    assert manifest["fingerprints"] == nlu_engine.load(first).manifest["fingerprints"]
    assert nlu_engine.load(second).parse_batch(["hi", "track order 1"]) == \
        nlu_engine.load(first).parse_batch(["hi", "track order 1"])


def test_finetune_removing_an_intent_says_so(
    tmp_path: Path, tiny_data_path: Path, without_greet: Path
) -> None:
    from nlu_engine.assembly.model import train

    train(LOGREG, tiny_data_path, out=tmp_path, fixed_model_name="all", log=None)
    lines: list[str] = []
    path = train(None, without_greet, out=tmp_path, finetune=True, log=lines.append)
    assert "notice: intents no longer in the data, no longer predicted: greet" in lines
    results = nlu_engine.load(str(path)).parse_batch(["hi", "hello there", "hey bot"])
    assert all(r["name"] != "greet" for result in results for r in result["intent_ranking"])


def test_finetune_edges_write_nothing(tmp_path: Path, tiny_data_path: Path) -> None:
    """No archive, a corrupt one, an incompatible config, a name that would replace the model:
    a one-line NLUError and not a byte written."""
    from nlu_engine.assembly.model import train

    out = tmp_path / "models"
    with pytest.raises(ArchiveError, match=r"no model to fine-tune: '.*models' does not exist"):
        train(LOGREG, tiny_data_path, out=out, finetune=True, log=None)
    assert not out.exists()
    out.mkdir()
    with pytest.raises(ArchiveError, match=re.escape("no archive (*.tar.gz) in")):
        train(LOGREG, tiny_data_path, out=out, finetune=True, log=None)
    base = train(LOGREG, tiny_data_path, out=out, fixed_model_name="base", log=None)
    (out / "cut.tar.gz").write_bytes(base.read_bytes()[:2000])
    state = _folder_state(out)
    bad = [
        ({"finetune": out / "cut.tar.gz"}, ArchiveError, "is not a readable .tar.gz"),
        ({"finetune": out / "nope.tar.gz"}, ArchiveError, "does not exist"),
        ({"finetune": base, "overrides": ["LogisticRegressionClassifier.max_iter=7"]}, ConfigError,
         "LogisticRegressionClassifier (step 4) has 'max_iter' = 100 in the model and 7"),
        ({"finetune": base, "fixed_model_name": "base"}, ConfigError, "would replace the model"),
    ]
    for kwargs, error, fragment in bad:
        with pytest.raises(error) as caught:
            train(LOGREG, tiny_data_path, out=out, log=None, **kwargs)
        assert fragment in str(caught.value) and "\n" not in str(caught.value)
        assert _folder_state(out) == state


def test_an_interrupted_finetune_leaves_the_old_archive_untouched(
    tmp_path: Path, tiny_data_path: Path, without_greet: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nlu_engine.assembly.model import train
    from nlu_engine.classifiers.logistic_regression import LogisticRegressionClassifier

    train(LOGREG, without_greet, out=tmp_path, fixed_model_name="base", log=None)
    state = _folder_state(tmp_path)

    def interrupted(self: Any, data: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(LogisticRegressionClassifier, "train", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(None, tiny_data_path, out=tmp_path, finetune=True, log=None)
    assert _folder_state(tmp_path) == state


def test_finetune_an_archive_from_before_fine_tuning(tmp_path: Path) -> None:
    """The 0.1.0 archive (every built-in component without optional models) has no fingerprints
    and its DIET no recorded input layout: the featurizers resume, DIET is trained afresh."""
    from nlu_engine.assembly.model import train

    old = PROJECT_ROOT / "tests" / "fixtures" / "archive_0.1.0"
    lines: list[str] = []
    path = train(None, old / "nlu.yml", out=tmp_path, finetune=old / "model.tar.gz", log=lines.append,
                 overrides=["DIETClassifier.run_eagerly=true", "ResponseSelector.run_eagerly=true",
                            "DIETClassifier.epochs=1", "ResponseSelector.epochs=1"])
    outcomes = {c["name"]: c for c in nlu_engine.load(str(path)).manifest["finetune"]["components"]}
    assert outcomes["CountVectorsFeaturizer"]["decision"] == "resumed"
    assert outcomes["RegexFeaturizer"]["decision"] == "resumed"
    assert outcomes["DIETClassifier"]["decision"] == "trained from scratch"
    assert "does not record its input layout" in outcomes["DIETClassifier"]["reason"]
    assert outcomes["WhitespaceTokenizer"]["decision"] == "reused"
    notice = next(line for line in lines if line.startswith("notice: trained from scratch"))
    assert "DIETClassifier (the model does not record its input layout" in notice


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
