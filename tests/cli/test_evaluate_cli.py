"""`nlu-engine test`: model test, cross-validation and pipeline comparison on tiny data.

The pipeline is fast and exact: KeywordIntentClassifier plus a small custom extractor (written
into tmp_path, named by its import path) that tags words it saw as entities in training.
"""

import json
import textwrap

import pytest

from nlu_engine.cli.main import main
from tests.extras import requires_extra

EXTRACTOR = '''
import json
from dataclasses import dataclass
from nlu_engine.contract.component import EntityExtractor


class WordExtractor(EntityExtractor):
    requires = ("tokens",)

    @dataclass(frozen=True, kw_only=True)
    class Config(EntityExtractor.Config):
        min_length: int = 1

    def train(self, data):
        self.words_ = {}
        for m in data.messages:
            for e in m.entities:
                self.words_[m.text[e["start"]:e["end"]]] = e["entity"]

    def process(self, messages):
        for m in messages:
            m.entities = m.entities + [
                {"entity": self.words_[t.text], "start": t.start, "end": t.end, "value": t.text,
                 "confidence_entity": 1.0, "extractor": "WordExtractor"}
                for t in m.tokens["text"] if t.text in self.words_ and len(t.text) >= self.config.min_length
            ]

    def persist(self, directory):
        (directory / "words.json").write_text(json.dumps(self.words_))

    @classmethod
    def load(cls, directory, config):
        component = cls(config)
        component.words_ = json.loads((directory / "words.json").read_text())
        return component
'''

DATA = textwrap.dedent("""\
    version: "3.1"
    nlu:
    - intent: greet
      examples: |
        - hi
        - hello
        - hey
        - hi there
        - hello friend
        - good morning
    - intent: weather
      examples: |
        - weather in [paris](city)
        - weather in [rome](city)
        - is it raining in [oslo](city)
        - forecast for [berlin](city)
        - weather in [new york](city)
        - forecast for [lima](city)
    """)

TEST_DATA = textwrap.dedent("""\
    version: "3.1"
    nlu:
    - intent: greet
      examples: |
        - hi
        - hello stranger
    - intent: weather
      examples: |
        - weather in [paris](city)
        - is it raining in [new york](city)
        - forecast for [madrid](city)
    """)

CONFIG = textwrap.dedent("""\
    language: en
    pipeline:
      - name: WhitespaceTokenizer
      - name: KeywordIntentClassifier
      - name: word_extractor.WordExtractor
    """)


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "word_extractor.py").write_text(EXTRACTOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.yml").write_text(DATA)
    (tmp_path / "test.yml").write_text(TEST_DATA)
    (tmp_path / "config.yml").write_text(CONFIG)
    return tmp_path


def read(path):
    return json.loads(path.read_text())


def test_an_unknown_runtime_is_one_line_naming_the_valid_ones(project, capsys):
    assert main(["train", "-c", "config.yml", "--data", "train.yml", "--out", "models",
                 "--fixed-model-name", "m"]) == 0
    capsys.readouterr()
    for command in (["test", "--data", "test.yml"], ["parse", "hello"]):
        assert main([*command, "--runtime", "int4", "--allow-component", "word_extractor.WordExtractor"]) != 0
        err = capsys.readouterr().err.strip()
        assert err.endswith("--runtime 'int4' is not a runtime: use one of float32, int8, int8_dynamic, "
                            "bfloat16")
        assert "\n" not in err and "Traceback" not in err


def test_model_test_writes_rasa_reports(project, capsys):
    assert main(["train", "-c", "config.yml", "--data", "train.yml", "--out", "models",
                 "--fixed-model-name", "m"]) == 0
    capsys.readouterr()
    assert main(["test", "--data", "test.yml", "--out", "results", "--successes", "--no-plot",
                 "--allow-component", "word_extractor.WordExtractor"]) == 0
    out = capsys.readouterr().out
    results = project / "results"

    # keywords match whole training texts inside the message: "hi", "hello stranger" (hello) and
    # "weather in paris" are recognised, the other two get no intent
    intent_report = read(results / "intent_report.json")
    assert intent_report["accuracy"] == pytest.approx(3 / 5)
    assert intent_report["greet"]["support"] == 2 and intent_report["greet"]["recall"] == 1.0
    assert intent_report["weather"]["recall"] == pytest.approx(1 / 3)
    assert intent_report["weather"]["confused_with"] == {"": 2}
    assert "micro avg" in intent_report  # the empty prediction is no gold intent
    errors = read(results / "intent_errors.json")
    assert [e["text"] for e in errors] == ["is it raining in new york", "forecast for madrid"]
    assert errors[0]["intent_prediction"] == {"name": None, "confidence": 0.0}
    assert len(read(results / "intent_successes.json")) == 3

    # entities: "paris" is found exactly; "new york" -> "york"? no: only whole tokens seen in
    # training ("new" and "york" are not single-token entities), "madrid" is unknown
    entity_report = read(results / "WordExtractor_report.json")
    exact = entity_report["span_exact"]["micro avg"]
    assert (exact["correct"], exact["support"], exact["predicted"]) == (1, 3, 1)
    assert entity_report["city"]["support"] == 4  # tokens paris, new, york, madrid
    assert len(read(results / "WordExtractor_errors.json")) == 2

    summary = read(results / "summary.json")
    assert summary["intent"]["accuracy"] == pytest.approx(0.6)
    assert summary["entities"]["WordExtractor"]["exact_f1"] == pytest.approx(0.5)
    assert summary["model"].endswith("m.tar.gz")
    assert summary["runtime"] == "float32" and "in the float32 runtime" in out
    assert (results / "index.html").is_file()
    assert not (results / "intent_confusion_matrix.png").exists()
    assert "accuracy 0.6000" in out and "exact F1 0.5000" in out


@requires_extra("plot")
def test_no_errors_flag_and_plots(project, capsys):
    main(["train", "-c", "config.yml", "--data", "train.yml", "--out", "models"])
    assert main(["test", "-m", "models", "--data", "test.yml", "--out", "r", "--no-errors",
                 "--allow-component", "word_extractor.WordExtractor"]) == 0
    names = {p.name for p in (project / "r").iterdir()}
    assert "intent_errors.json" not in names and "WordExtractor_errors.json" not in names
    assert {"intent_confusion_matrix.png", "intent_histogram.png"} <= names


def test_cross_validation(project, capsys):
    assert main(["test", "--config", "config.yml", "--data", "train.yml", "--cross-validation",
                 "--folds", "3", "--out", "cv", "--no-plot"]) == 0
    out = capsys.readouterr().out
    summary = read(project / "cv" / "summary.json")
    assert summary["mode"] == "cross_validation"
    assert summary["num_examples"] == 12  # every example is in exactly one test fold
    metrics = summary["cross_validation"]["metrics"]
    assert len(metrics["intent accuracy"]["folds"]) == 3
    assert metrics["intent accuracy"]["mean"] == pytest.approx(
        sum(metrics["intent accuracy"]["folds"]) / 3)
    # the aggregated report pools the held-out predictions of all folds
    per_fold = summary["cross_validation"]["per_fold"]
    errors = sum(fold["intent"]["num_errors"] for fold in per_fold)
    assert summary["intent"]["accuracy"] == pytest.approx(1 - errors / 12)
    assert summary["intent"]["num_errors"] == errors
    assert (project / "cv" / "WordExtractor_report.json").is_file()
    assert "±" in out
    assert summary["execution"] == {"ray": False, "ray_address": None, "cpus_per_trial": None}


def test_comparison(project, capsys):
    assert main(["test", "--config", "config.yml", "config.yml", "--data", "train.yml",
                 "--runs", "2", "--percentages", "0", "50", "--out", "cmp", "--no-plot"]) == 0
    comparison = read(project / "cmp" / "comparison.json")
    assert comparison["percentages"] == [0, 50]
    # 80/20 split of 6 + 6 examples: 5 + 5 train; half of that removed: 3 + 3 (rounding 2.5)
    assert [row[0] for row in comparison["num_examples"]] == [10, 10]
    assert all(row[1] < row[0] for row in comparison["num_examples"])
    assert comparison["num_test_examples"] == [2, 2]
    assert len(comparison["results"]) == 2  # the same file twice gets two names
    result = next(iter(comparison["results"].values()))
    assert len(result["intent_macro_f1"]) == 2 and len(result["intent_macro_f1"][0]) == 2
    assert set(result["entities"]) == {"WordExtractor"}
    assert (project / "cmp" / "index.html").is_file()
    assert "intent macro F1" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--folds", "1", "--cross-validation", "--config", "config.yml"], "--folds must be at least 2"),
        (["--config", "config.yml", "--percentages", "100"], "--percentages must be between"),
        (["--set", "DIETClassifier.epochs=2"], "--set changes training parameters"),
        (["-m", "nowhere"], "nowhere"),
        (["--ray"], "--ray, --ray-address and --cpus-per-trial run the trainings of --cross-validation"),
        (["--cross-validation", "--cpus-per-trial", "0"], "--cpus-per-trial must be at least 1"),
        (["--hold-out-intents", "1"], "--hold-out-intents goes with --cross-validation"),
        (["--cross-validation", "--config", "config.yml", "--hold-out-intents", "2"],
         "--hold-out-intents 2: the data has 2 intents"),
    ],
)
def test_user_errors_are_one_line(project, capsys, argv, message):
    assert main(["test", "--data", "test.yml", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_model_test_reports_test_data_in_another_script(project, capsys):
    assert main(["train", "-c", "config.yml", "--data", "train.yml", "--out", "models",
                 "--fixed-model-name", "m"]) == 0
    (project / "ru.yml").write_text(textwrap.dedent("""\
        version: "3.1"
        nlu:
        - intent: greet
          examples: |
            - привет, как дела у тебя сегодня
        - intent: weather
          examples: |
            - какая погода в [париже](city) завтра утром
        """))
    allowed = ["--allow-component", "word_extractor.WordExtractor", "--no-plot"]
    capsys.readouterr()
    assert main(["test", "--data", "ru.yml", "--out", "ru", *allowed]) == 0
    notices = [line for line in capsys.readouterr().err.splitlines() if "test data is" in line]
    assert len(notices) == 1
    assert notices[0].startswith("notice: the test data is mostly in the Cyrillic script (100% of")
    assert "language: en (English, written in Latin)" in notices[0]
    summary = read(project / "ru" / "summary.json")
    assert summary["test_language"]["main_script"] == "Cyrillic"
    assert summary["notices"][0] == notices[0].removeprefix("notice: ")

    # English test data under an English model: the shares, and no notice
    assert main(["test", "--data", "test.yml", "--out", "en", *allowed]) == 0
    assert "test data is" not in capsys.readouterr().err
    summary = read(project / "en" / "summary.json")
    assert summary["test_language"]["scripts"] == {"Latin": 1.0}
    assert summary["test_language"]["notice"] is None
    assert not any("test data is" in notice for notice in summary["notices"])
