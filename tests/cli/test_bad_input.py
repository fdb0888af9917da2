"""Bad input and edges at the command line (issue 40): what trains but cannot work as the data
means it to is a warning, one line each naming the intent, section or file and what to do, in
``nlu-engine train`` and ``nlu-engine data validate``; both exit 0 (``data validate`` fails only
with ``--fail-on-warnings``), and the model parses.

The commands run in this process (``main``), so the default pipeline trains without paying for
TensorFlow's import once a command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nlu_engine.cli.main import main

#: the shipped pipeline (pipelines/diet.yml), small and short enough for a test
FAST = ["--set", "DIETClassifier.epochs=1", "--set", "DIETClassifier.transformer_size=16",
        "--set", "DIETClassifier.number_of_transformer_layers=1", "--set", "ResponseSelector.epochs=1"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def intents_yaml(examples: dict[str, list[str]]) -> str:
    lines = ["nlu:"]
    for intent, texts in examples.items():
        lines += [f"- intent: {intent}", "  examples: |", *(f"    - {t}" for t in texts)]
    return "\n".join(lines) + "\n"


def lines_of(stderr: str, kind: str) -> list[str]:
    """The ``notice: ...`` or ``warning: ...`` lines, without their prefix."""
    return [line.removeprefix(f"{kind}: ") for line in stderr.splitlines() if line.startswith(f"{kind}: ")]


def reported(stdout: str) -> list[str]:
    """The warnings of ``data validate``'s report."""
    return [line.removeprefix("  - ") for line in stdout.splitlines() if line.startswith("  - ")]


def parse(capsys: pytest.CaptureFixture[str], archive: Path, text: str) -> dict:
    capsys.readouterr()
    assert main(["parse", "-m", str(archive), text]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no domain.yml of the working folder is read by default
    return tmp_path


# --- 1. an intent with one example ------------------------------------------------------------
def test_an_intent_with_one_example_trains_the_default_pipeline_with_one_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    data = write(tmp_path / "nlu.yml", intents_yaml({
        "greet": ["hi", "hello", "hey there", "good morning"],
        "bye": ["bye", "see you later", "goodbye", "ciao"],
        "thank": ["thanks a lot"],
    }))
    assert main(["train", "--data", str(data), "--out", "models", "--fixed-model-name", "m", *FAST]) == 0
    err = capsys.readouterr().err
    # a notice (level 25) reaches the terminal: the package logger no longer drops it
    assert [n for n in lines_of(err, "notice") if "one example" in n] == [
        "DIETClassifier: too few examples to hold 20 out by cross-fitting (intents with one example "
        "are never held out: thank); its confidences are not calibrated"]
    assert lines_of(err, "warning") == []
    assert parse(capsys, tmp_path / "models" / "m.tar.gz", "thanks a lot")["intent"]["name"] == "thank"


# --- 2. a response or an entity type no example teaches -----------------------------------------
PROJECT = {
    "data/nlu.yml": intents_yaml({"greet": ["hi", "hello", "hey there"],
                                  "bye": ["bye", "see you later", "goodbye"],
                                  "faq/ask_name": ["what is your name", "who are you"]})
    + "- lookup: airport\n  examples: |\n    - JFK\n    - LAX\n"
    + "- synonym: New York\n  examples: |\n    - NYC\n",
    "domain.yml": "intents: [greet, bye, faq, thank]\nentities: [city]\nresponses:\n"
                  "  utter_thank:\n  - text: you're welcome\n"
                  "  utter_faq/ask_name:\n  - text: I am Bot\n  utter_faq/ask_age:\n  - text: Two\n",
    "config.yml": "language: en\npipeline:\n- name: WhitespaceTokenizer\n- name: CountVectorsFeaturizer\n"
                  "- name: LogisticRegressionClassifier\n- name: RegexEntityExtractor\n"
                  "- name: EntitySynonymMapper\n"
                  "- name: ResponseSelector\n  epochs: 1\n  number_of_transformer_layers: 0\n",
}
UNTAUGHT = [
    "response 'utter_faq/ask_age' in domain.yml has no examples of retrieval intent 'faq/ask_age', "
    "so the ResponseSelector never selects it; add examples under '- intent: faq/ask_age' or "
    "remove the response",
    "lookup table 'airport' matches no annotated entity (no example annotates an entity of type "
    "'airport' or any of its 2 elements), so no extractor learns from it; annotate a few of its "
    "elements as 'airport' entities in examples",
    "synonym 'New York' (NYC) matches no annotated entity: EntitySynonymMapper maps only the values "
    "an extractor finds, and no example teaches one to find these; annotate a few of them as "
    "entities in examples",
    "intent 'thank' is listed in domain.yml but has no NLU examples; add examples or remove it from "
    "the domain",
    "entity 'city' is listed in domain.yml but no example annotates it, so no trained extractor "
    "finds it; annotate it in a few examples, or remove it from the domain (unless a pretrained "
    "extractor such as Duckling or spaCy sets it)",
]


def test_what_no_example_teaches_is_a_warning_in_validate_and_train(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    for name, text in PROJECT.items():
        write(tmp_path / name, text)
    assert main(["data", "validate", "--data", "data", "--domain", "domain.yml"]) == 0
    out = capsys.readouterr().out
    assert reported(out) == UNTAUGHT
    assert main(["data", "validate", "--data", "data", "--domain", "domain.yml",
                 "--fail-on-warnings"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: 5 warnings in the training data (--fail-on-warnings)")

    assert main(["train", "-c", "config.yml", "--data", "data", "--domain", "domain.yml",
                 "--out", "models", "--fixed-model-name", "m"]) == 0
    err = capsys.readouterr().err
    warnings = lines_of(err, "warning")  # the data's first, then the components' own
    assert warnings[: len(UNTAUGHT)] == UNTAUGHT
    assert all(w.startswith("RegexEntityExtractor: ") for w in warnings[len(UNTAUGHT):])
    assert "error" not in err
    result = parse(capsys, tmp_path / "models" / "m.tar.gz", "who are you")
    assert result["response_selector"]["default"]["response"]["intent_response_key"] == "faq/ask_name"


# --- 3. data that cannot tell intents apart ---------------------------------------------------------
SAME = "hello there"
CANNOT_TELL = {
    "one text 20 times": (
        "nlu:\n- intent: greet\n  examples: |\n" + f"    - {SAME}\n" * 20,
        "only one intent, 'greet': every message will be classified as 'greet'; add a second intent "
        "(what the bot should not act on can go under 'out_of_scope')",
    ),
    "three intents, one text": (
        "nlu:\n" + "".join(f"- intent: {i}\n  examples: |\n" + f"    - {SAME}\n" * 5
                           for i in ("greet", "bye", "thank")),
        f"intents 'bye', 'greet' and 'thank' share all their examples ('{SAME}'): the classifier "
        "cannot tell them apart; give each examples of its own, or merge them into one intent",
    ),
    "one intent": (
        intents_yaml({"greet": ["hi", "hello", "hey there", "good morning"]}),
        "only one intent, 'greet': every message will be classified as 'greet'; add a second intent "
        "(what the bot should not act on can go under 'out_of_scope')",
    ),
}


@pytest.mark.parametrize("case", list(CANNOT_TELL))
def test_data_that_cannot_tell_intents_apart_trains_and_validate_says_why(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    text, why = CANNOT_TELL[case]
    data = write(tmp_path / "nlu.yml", text)
    assert main(["data", "validate", "--data", str(data)]) == 0
    warnings = reported(capsys.readouterr().out)
    assert warnings[0] == why
    assert sum("tell" in w or "only one intent" in w for w in warnings) == 1  # one warning says why
    assert not any(w.startswith(f"example '{SAME}' appears under") for w in warnings)

    assert main(["train", "--data", str(data), "--out", "models", "--fixed-model-name", "m", *FAST]) == 0
    err = capsys.readouterr().err
    assert lines_of(err, "warning") == [why]
    result = parse(capsys, tmp_path / "models" / "m.tar.gz", SAME)
    names = {r["name"] for r in result["intent_ranking"]}
    assert result["intent"]["name"] in names | {"nlu_fallback"}
    assert names <= {"greet", "bye", "thank"}
