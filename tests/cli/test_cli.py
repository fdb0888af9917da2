"""The command line, run as a user runs it: ``python -m nlu_engine ...`` in a subprocess."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from nlu_engine.training_data import load_data

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA = PROJECT_ROOT / "data" / "nlu.yml"
LOGREG = PROJECT_ROOT / "nlu_engine" / "pipelines" / "logreg.yml"
HEAVY = ("tensorflow", "keras", "sklearn", "scipy", "numpy", "matplotlib", "starlette", "uvicorn",
         "spacy", "transformers", "torch", "ray", "pyarrow")


def run(
    *args: str, cwd: Path, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "nlu_engine", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def assert_user_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit code 1 and exactly one ``error: ...`` line on stderr, no traceback."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def trained(workdir: Path) -> Path:
    """A logreg model of the example assistant, trained through the CLI."""
    result = run("train", "-c", str(LOGREG), "--data", str(DATA), "--out", "models",
                 "--fixed-model-name", "logreg", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "model written to models/logreg.tar.gz" in result.stderr
    archive = workdir / "models" / "logreg.tar.gz"
    assert archive.is_file()
    return archive


# --- startup ------------------------------------------------------------------------------------
def test_building_the_parser_imports_nothing_heavy() -> None:
    code = (
        "import sys, json, nlu_engine.cli.main; nlu_engine.cli.main.build_parser(); "
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [], "nlu-engine --help must not import these"
    check = (
        "import sys, nlu_engine.cli.main; nlu_engine.cli.main.build_parser(); "
        "print('tensorflow' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False"


def test_help_is_fast(tmp_path: Path) -> None:
    run("--help", cwd=tmp_path)  # warm the file cache
    start = time.perf_counter()
    result = run("--help", cwd=tmp_path)
    seconds = time.perf_counter() - start
    print(f"\n`python -m nlu_engine --help` took {seconds:.2f} s")
    assert result.returncode == 0
    for command in ("train", "parse", "shell", "data"):
        assert command in result.stdout
    assert seconds < 5.0


def test_no_command_prints_help(tmp_path: Path) -> None:
    result = run(cwd=tmp_path)
    assert result.returncode == 2
    assert "usage:" in result.stdout


# --- train and parse ----------------------------------------------------------------------------
def test_parse_text_argument(trained: Path, workdir: Path) -> None:
    result = run("parse", "-m", "models/logreg.tar.gz", "hello there", cwd=workdir)
    assert result.returncode == 0, result.stderr
    parsed = json.loads(result.stdout)
    assert parsed["text"] == "hello there"
    assert parsed["intent"]["name"] == "greet"
    assert set(parsed) >= {"text", "intent", "entities", "text_tokens", "intent_ranking"}
    assert parsed["text_tokens"] == [[0, 5], [6, 11]]


def test_empty_and_whitespace_messages_parse_as_the_python_api(trained: Path, workdir: Path) -> None:
    from nlu_engine.assembly.model import Model

    model = Model.load(trained)
    empty = model.parse("")
    assert empty["text"] == "" and empty["entities"] == []
    for text in ("", "   ", " \t "):
        result = run("parse", "-m", "models/logreg.tar.gz", text, cwd=workdir)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == empty == model.parse(text)
    assert model.parse("  hello there ") == model.parse("hello there")  # Rasa strips messages


def test_parse_stdin_one_json_per_line_in_order(trained: Path, workdir: Path) -> None:
    texts = ["hi", "book a table for two in Berlin", "thanks, bye", "what's the weather in Paris"]
    stdin = "\n".join([texts[0], "", *texts[1:], "   "]) + "\n"  # blank lines are skipped
    result = run("parse", "-m", "models", "--batch-size", "2", cwd=workdir, stdin=stdin)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(texts)
    parsed = [json.loads(line) for line in lines]
    assert [p["text"] for p in parsed] == texts
    assert parsed[0]["intent"]["name"] == "greet"
    # the same answers as one at a time
    single = json.loads(run("parse", "-m", "models", texts[1], cwd=workdir).stdout)
    assert single == parsed[1]


# --- bad input: exit 1, one `error:` line ---------------------------------------------------------
def test_missing_data_file(tmp_path: Path) -> None:
    result = run("train", "-c", str(LOGREG), "--data", "nowhere.yml", cwd=tmp_path)
    assert_user_error(result, "nowhere.yml", "not found")
    assert not (tmp_path / "models").exists()


def test_malformed_yaml_data_names_line(tmp_path: Path) -> None:
    write(tmp_path / "bad.yml", 'version: "3.1"\nnlu:\n- intent: greet\n  examples: |\n    - hi\n'
                                "  - intent: bye\n")
    result = run("train", "-c", str(LOGREG), "--data", "bad.yml", cwd=tmp_path)
    assert_user_error(result, "bad.yml:6:", "invalid YAML")


def test_empty_intent(tmp_path: Path) -> None:
    write(tmp_path / "empty.yml", 'version: "3.1"\nnlu:\n- intent: greet\n  examples: |\n    - hi\n'
                                  "    - hello\n- intent: silent\n")
    result = run("train", "-c", str(LOGREG), "--data", "empty.yml", cwd=tmp_path)
    assert_user_error(result, "empty.yml:7", "intent 'silent' has no examples")


def test_unknown_component(tmp_path: Path) -> None:
    write(tmp_path / "config.yml", "language: en\npipeline:\n- name: WhitespaceTokenizr\n")
    result = run("train", "-c", "config.yml", "--data", str(DATA), cwd=tmp_path)
    assert_user_error(result, "config.yml", "unknown component 'WhitespaceTokenizr'",
                      "did you mean 'WhitespaceTokenizer'")


@pytest.mark.parametrize(
    "override, fragment",
    [("max_iter=3", "expected Component.key=value"),
     ("LogisticRegressionClassifier.max_itr=3", "did you mean 'max_iter'")],
)
def test_bad_set(tmp_path: Path, override: str, fragment: str) -> None:
    result = run("train", "-c", str(LOGREG), "--data", str(DATA), "--set", override, cwd=tmp_path)
    assert_user_error(result, fragment)


def test_corrupt_archive(tmp_path: Path, trained: Path) -> None:
    data = trained.read_bytes()
    (tmp_path / "cut.tar.gz").write_bytes(data[: len(data) // 2])  # a truncated download
    result = run("parse", "-m", "cut.tar.gz", "hi", cwd=tmp_path)
    assert_user_error(result, "cut.tar.gz", "is not a readable .tar.gz")


def test_missing_model_folder(tmp_path: Path) -> None:
    assert_user_error(run("parse", "hi", cwd=tmp_path), "model archive 'models' not found")
    (tmp_path / "empty").mkdir()
    assert_user_error(run("parse", "-m", "empty", "hi", cwd=tmp_path), "no model archive")


def test_split_fraction_out_of_range(tmp_path: Path) -> None:
    result = run("data", "split", "--data", str(DATA), "--training-fraction", "1.5", cwd=tmp_path)
    assert_user_error(result, "--training-fraction")


def test_validate_missing_file(tmp_path: Path) -> None:
    assert_user_error(run("data", "validate", "--data", "nope.yml", cwd=tmp_path), "nope.yml")


# --- data tools ---------------------------------------------------------------------------------
def test_data_validate_counts(tmp_path: Path) -> None:
    result = run("data", "validate", "--data", str(DATA), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = load_data(DATA)
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{len(data.messages)} examples, {len(data.intents)} intents")
    assert "no warnings" in result.stdout


def test_data_validate_warns_about_misaligned_entity(tmp_path: Path) -> None:
    write(tmp_path / "nlu.yml", 'version: "3.1"\nnlu:\n- intent: travel\n  examples: |\n'
                                "    - fly to [Berl](city)in today\n    - fly to [Paris](city)\n"
                                "- intent: greet\n  examples: |\n    - hi\n    - hello\n")
    result = run("data", "validate", "--data", "nlu.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "entity 'city' ('Berl') in example 'fly to Berlin today' does not fall on token boundaries" in (
        result.stdout
    )
    assert "1 warnings" in result.stdout
    failing = run("data", "validate", "--data", "nlu.yml", "--fail-on-warnings", cwd=tmp_path)
    assert failing.returncode == 1
    assert "Traceback" not in failing.stderr


def test_data_rules_rasa_applies_at_load(tmp_path: Path) -> None:
    """Exact duplicates are dropped with one notice but still warned about; a bad entity offset
    drops that annotation with a warning naming file and example; the project still trains."""
    write(tmp_path / "a.yml", "nlu:\n- intent: greet\n  examples: |\n    - hi\n    - hello\n    - hi\n"
                              "- intent: bye\n  examples: |\n    - bye\n    - see you\n")
    write(tmp_path / "b.json", json.dumps({"rasa_nlu_data": {"common_examples": [
        {"text": "hello", "intent": "greet"},
        {"text": "ciao", "intent": "bye", "entities": [{"start": 2, "end": 7, "entity": "x"}]}]}}))
    result = run("data", "validate", "--data", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("5 examples, 2 intents, 0 entity types")
    assert "example 'hi' appears 2 times under intent 'greet'" in result.stdout
    assert "example 'hello' appears 2 times under intent 'greet'" in result.stdout
    assert ("b.json: common_examples[1].entities[0]: entity 'x' at start=2, end=7 does not fit the "
            "text 'ciao'") in result.stdout
    notices = [line for line in result.stderr.splitlines() if "duplicate" in line]
    assert len(notices) == 1 and "dropped 2 exact duplicate examples" in notices[0]
    failing = run("data", "validate", "--data", ".", "--fail-on-warnings", cwd=tmp_path)
    assert failing.returncode == 1 and "Traceback" not in failing.stderr
    assert failing.stderr.splitlines()[-1] == (
        "error: 3 warnings in the training data (--fail-on-warnings)")
    trained = run("train", "-c", str(LOGREG), "--data", ".", "--out", "m", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    assert "b.json: common_examples[1].entities[0]" in trained.stderr
    assert "dropped 2 exact duplicate examples" in trained.stderr


RASA_PROJECT = {
    "data/nlu.yml": 'version: "3.1"\nnlu:\n- intent: greet\n  examples: |\n    - hi\n    - hello\n'
                    "- intent: faq/ask_name\n  examples: |\n    - your name?\n    - who are you?\n"
                    "- intent: faq/ask_age\n  examples: |\n    - how old are you?\n    - your age?\n",
    "data/stories.yml": "stories:\n- story: s\n  steps:\n  - intent: greet\n  - action: utter_greet\n"
                        "  - intent: mood_great\n  - action: utter_happy\n",
    "data/broken_rules.yml": "rules:\n- rule: r\n  steps: [\n",
    "domain.yml": "intents: [greet, faq, bye]\nresponses:\n  utter_greet:\n  - text: hey\n"
                  "  utter_faq/ask_name:\n  - text: I am Bot.\n  utter_faq/ask_age:\n  - text: Two.\n",
    "config.yml": "recipe: default.v1\nlanguage: en\npipeline:\n- name: WhitespaceTokenizer\n"
                  "- name: CountVectorsFeaturizer\n- name: LogisticRegressionClassifier\n"
                  "- name: ResponseSelector\n  epochs: 1\n  run_eagerly: true\n"
                  "  number_of_transformer_layers: 0\npolicies:\n- name: RulePolicy\n",
}


@pytest.fixture
def rasa_project(tmp_path: Path) -> Path:
    for name, text in RASA_PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        write(tmp_path / name, text)
    return tmp_path


def test_train_a_rasa_project_with_its_domain(rasa_project: Path) -> None:
    result = run("train", "--config", "config.yml", "--data", "data/", "--out", "models",
                 "--fixed-model-name", "project", cwd=rasa_project)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    notices = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert any(line.startswith("notice: using domain.yml") for line in result.stderr.splitlines())
    assert any("skipped what is not NLU: 1 response, 1 story (in data/stories.yml, domain.yml)" in line
               for line in notices), notices
    broken = "warning: skipped data/broken_rules.yml:4: not valid YAML"
    assert any(line.startswith(broken) for line in notices)
    parsed = run("parse", "-m", "models/project.tar.gz", "who are you?", cwd=rasa_project)
    result_json = json.loads(parsed.stdout)
    selected = result_json["response_selector"]["default"]["response"]
    assert selected["intent_response_key"] in {"faq/ask_name", "faq/ask_age"}
    texts = {"faq/ask_name": "I am Bot.", "faq/ask_age": "Two."}
    assert selected["responses"] == [{"text": texts[selected["intent_response_key"]]}]


def test_data_validate_against_the_domain(rasa_project: Path) -> None:
    result = run("data", "validate", "--data", "data", "--domain", "domain.yml", cwd=rasa_project)
    assert result.returncode == 0, result.stderr
    assert "warning: skipped data/broken_rules.yml" in result.stderr
    warnings = [line.removeprefix("  - ") for line in result.stdout.splitlines() if line.startswith("  - ")]
    assert warnings == [
        "intent 'bye' is listed in domain.yml but has no NLU examples; add examples or remove it from "
        "the domain",
        "intent 'mood_great' is used in data/stories.yml but is not listed in domain.yml; add it under "
        "'intents:'",
        "intent 'faq' is not used in any story or rule",
        "intent 'bye' is not used in any story or rule",
    ]
    failing = run("data", "validate", "--data", "data", "--domain", "domain.yml", "--fail-on-warnings",
                  cwd=rasa_project)
    assert failing.returncode == 1 and "Traceback" not in failing.stderr
    last = failing.stderr.strip().splitlines()[-1]
    assert last == "error: 4 warnings in the training data (--fail-on-warnings)"


def test_a_missing_domain_is_one_line(rasa_project: Path) -> None:
    result = run("train", "--data", "data", "--domain", "nowhere.yml", cwd=rasa_project)
    assert_user_error(result, "nowhere.yml", "domain not found")


def test_data_convert_round_trip(tmp_path: Path) -> None:
    result = run("data", "convert", "--data", str(DATA), "--out", "nlu.json", "-f", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # Rasa's JSON format has no place for a responses: section; the user is told so, in one line
    (warning,) = result.stderr.splitlines()
    assert warning.startswith("warning: Rasa's JSON format has no place for the ") and "responses" in warning
    assert json.loads((tmp_path / "nlu.json").read_text())["rasa_nlu_data"]["common_examples"]
    result = run("data", "convert", "--data", "nlu.json", "--out", "back.yml", "-f", "yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    original = load_data(DATA)
    via_json, back = load_data(tmp_path / "nlu.json"), load_data(tmp_path / "back.yml")
    for converted in (via_json, back):
        assert [(m.text, m.intent, m.entities) for m in converted.messages] == [
            (m.text, m.intent, m.entities) for m in original.messages
        ]
        assert converted.synonyms == original.synonyms
        assert converted.regex_features == original.regex_features
        assert converted.lookup_tables == original.lookup_tables
    original.responses = {}
    assert back.fingerprint() == original.fingerprint()
    assert f"wrote {len(original.messages)} examples to back.yml" in result.stdout


def test_warnings_are_one_line_each_however_often_the_cli_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nlu_engine.cli.main import main

    for _ in range(2):  # in one process: the handler is installed once
        assert main(["data", "convert", "--data", str(DATA), "--out", str(tmp_path / "nlu.json"),
                     "-f", "json"]) == 0
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("warning: Rasa's JSON format"), lines


def test_a_warning_of_several_lines_is_shown_as_one() -> None:
    from nlu_engine.cli.main import OneLineFormatter

    record = logging.LogRecord("nlu_engine.x", logging.WARNING, __file__, 1, "first\n  then %s",
                               ("that",), None)
    assert OneLineFormatter().format(record) == "warning: first then that"


def test_data_split_counts_and_stratification(tmp_path: Path) -> None:
    result = run("data", "split", "--data", str(DATA), "--training-fraction", "0.75",
                 "--out", "split", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    original = load_data(DATA)
    train = load_data(tmp_path / "split" / "training_data.yml")
    test = load_data(tmp_path / "split" / "test_data.yml")
    assert f"{len(train.messages)} training and {len(test.messages)} test examples" in result.stdout
    key = lambda m: (m.text, m.intent, json.dumps(m.entities, sort_keys=True))  # noqa: E731
    assert Counter(map(key, train.messages)) + Counter(map(key, test.messages)) == Counter(
        map(key, original.messages)
    )
    per_intent = original.intent_counts()
    for intent, n in per_intent.items():
        expected = min(n - 1, max(1, round(n * 0.75)))
        assert train.intent_counts()[intent] == expected, intent
        assert test.intent_counts()[intent] == n - expected, intent
    # both sides keep the synonyms, regexes and lookup tables
    assert train.synonyms == test.synonyms == original.synonyms
    assert train.lookup_tables == test.lookup_tables == original.lookup_tables
    # the same seed gives the same split
    again = run("data", "split", "--data", str(DATA), "--training-fraction", "0.75",
                "--out", "split2", cwd=tmp_path)
    assert again.returncode == 0
    assert (tmp_path / "split2" / "test_data.yml").read_text() == (
        tmp_path / "split" / "test_data.yml"
    ).read_text()


# --- train --finetune ------------------------------------------------------------------------------
def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_finetune_reports_what_it_reused_resumed_and_retrained(tmp_path: Path, trained: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "base.tar.gz").write_bytes(trained.read_bytes())
    data = load_data(DATA)
    more = data.with_messages([*data.messages, *[type(m)(text=f"{m.text} again", intent=m.intent)
                                                 for m in data.messages[:3]]])
    from nlu_engine.training_data import write_data

    write_data(more, tmp_path / "more.yml", "yaml")
    result = run("train", "--finetune", "--data", "more.yml", "--epoch-fraction", "0.3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[:2] == ["fine-tuning models/base.tar.gz", "[1/4] WhitespaceTokenizer reused"]
    assert lines[-3] == ("notice: trained from scratch, as they cannot resume: "
                         "LogisticRegressionClassifier (no incremental training)")
    assert lines[-1].startswith("model written to models/nlu-")
    again = run("train", "--finetune", "--data", "more.yml", cwd=tmp_path)  # the newest: no change
    assert again.returncode == 0, again.stderr
    assert "fine-tuning: reused: WhitespaceTokenizer, CountVectorsFeaturizer, CountVectorsFeaturizer, " \
           "LogisticRegressionClassifier" in again.stderr
    assert len(list((tmp_path / "models").glob("*.tar.gz"))) == 3


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--finetune"], ["no model to fine-tune: 'models' does not exist", "--finetune MODEL"]),
        (["--finetune", "cut.tar.gz"], ["cut.tar.gz", "is not a readable .tar.gz"]),
        (["--finetune", "logreg.tar.gz", "-c", "diet"],
         ["cannot fine-tune 'logreg.tar.gz': step 1 is WhitespaceTokenizer in the model "
          "and LanguageIdentifier in the config"]),
        (["--finetune", "logreg.tar.gz", "--set", "CountVectorsFeaturizer.max_ngram=2"],
         ["'max_ngram' = 1 in the model and 2 in the config"]),
        (["--epoch-fraction", "0.5"], ["--epoch-fraction only apply with --finetune"]),
        (["--allow-component", "a.b.C"], ["--allow-component only apply with --finetune"]),
        (["--finetune", "logreg.tar.gz", "--rehearsal-fraction", "2"],
         ["rehearsal-fraction must be a number from 0 to 1, got 2.0"]),
    ],
)
def test_finetune_refusals_are_one_line_and_write_nothing(
    tmp_path: Path, trained: Path, args: list[str], fragments: list[str]
) -> None:
    (tmp_path / "logreg.tar.gz").write_bytes(trained.read_bytes())
    (tmp_path / "cut.tar.gz").write_bytes(trained.read_bytes()[:3000])
    before = _files(tmp_path)
    result = run("train", "--data", str(DATA), *args, cwd=tmp_path)
    assert_user_error(result, *fragments)
    assert _files(tmp_path) == before and not (tmp_path / "models").exists()


COMBINER_ALONE = """language: en
pipeline:
- name: WhitespaceTokenizer
- name: CountVectorsFeaturizer
- name: IntentCombiner
"""
CHOOSER_WITHOUT_CRF = """language: en
pipeline:
- name: WhitespaceTokenizer
- name: CountVectorsFeaturizer
- name: DIETClassifier
- name: EntityChooser
"""


@pytest.mark.parametrize("command", [["train"], ["data", "validate"]])
def test_a_link_the_pipeline_cannot_make_is_one_line_naming_both_components(
    tmp_path: Path, command: list[str]
) -> None:
    """A component's declared links (``Component.links``) are checked with the config, by
    ``train`` and ``data validate`` alike, before anything trains."""
    write(tmp_path / "combiner.yml", COMBINER_ALONE)
    result = run(*command, "-c", "combiner.yml", "--data", str(DATA), cwd=tmp_path)
    assert_user_error(result, "combiner.yml: IntentCombiner (step 3) needs an intent classifier before "
                      "it: add DIETClassifier or LogisticRegressionClassifier above it")
    write(tmp_path / "chooser.yml", CHOOSER_WITHOUT_CRF)
    result = run(*command, "-c", "chooser.yml", "--data", str(DATA), cwd=tmp_path)
    assert_user_error(result, "chooser.yml: EntityChooser (step 4) names CRFEntityExtractor in "
                      "`extractors`, which is not in the pipeline: add it above EntityChooser or "
                      "leave it out of `extractors`")
