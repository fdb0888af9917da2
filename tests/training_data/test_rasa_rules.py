"""Rasa's loading rules a migrating project relies on: exact duplicates dropped, a bad entity
offset dropped with a warning, Rasa 1.x Markdown (a table of contents, response files)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from nlu_engine.contract.errors import DataError
from nlu_engine.training_data import load_data
from nlu_engine.training_data.loading import load_file
from nlu_engine.training_data.project import read_project
from nlu_engine.training_data.validation import validate

NLU = """nlu:
- intent: greet
  examples: |
    - hi
    - hello
    - hi
    - hey [Ann](name)
- intent: bye
  examples: |
    - bye
    - hi
    - hey [Ann](name)
"""
MORE = """nlu:
- intent: greet
  examples: |
    - hello
    - hey [Ann](name)
    - hey Ann
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_exact_duplicates_are_dropped_keeping_the_first(tmp_path: Path) -> None:
    write(tmp_path / "a.yml", NLU)
    write(tmp_path / "b.yml", MORE)
    project = read_project(tmp_path)
    assert [(m.text, m.intent) for m in project.data.messages] == [
        ("hi", "greet"), ("hello", "greet"), ("hey Ann", "greet"),
        ("bye", "bye"), ("hi", "bye"), ("hey Ann", "bye"),
        ("hey Ann", "greet"),  # the same text without the annotation is another example
    ]
    assert project.data.messages[2].entities == [
        {"entity": "name", "start": 4, "end": 7, "value": "Ann"}]
    assert project.data.messages[6].entities == []
    assert project.duplicates == {("hi", "greet"): 1, ("hello", "greet"): 1, ("hey Ann", "greet"): 1}
    assert project.notice() == (
        "dropped 3 exact duplicate examples (same text, intent and annotations), keeping the "
        "first of each, as Rasa does; 'nlu-engine data validate' lists them")


def test_load_data_gives_one_notice_for_the_duplicates(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path / "a.yml", NLU)
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        data = load_data(tmp_path / "a.yml")
    assert len(data.messages) == 6
    notices = [r.getMessage() for r in caplog.records if "duplicate" in r.getMessage()]
    assert notices == [notices[0]] and notices[0].startswith("dropped 1 exact duplicate example ")


def test_validate_still_warns_about_the_dropped_duplicates(tmp_path: Path) -> None:
    write(tmp_path / "a.yml", NLU)
    write(tmp_path / "b.yml", MORE)
    project = read_project(tmp_path)
    warnings = validate(project.data, duplicates=project.duplicates).warnings
    assert "example 'hi' appears 2 times under intent 'greet'; remove the duplicates" in warnings
    assert "example 'hello' appears 2 times under intent 'greet'; remove the duplicates" in warnings
    assert ("example 'hey Ann' appears 3 times under intent 'greet'; remove the duplicates"
            in warnings)
    assert "example 'hi' appears under intents 'bye' and 'greet'; keep it under one intent" in warnings
    assert not any("'bye' appears" in w for w in warnings)


def test_a_retrieval_intent_keeps_its_response_key_apart(tmp_path: Path) -> None:
    write(tmp_path / "a.yml", "nlu:\n- intent: faq/a\n  examples: |\n    - what\n    - what\n"
                              "- intent: faq/b\n  examples: |\n    - what\n")
    project = read_project(tmp_path / "a.yml")
    assert [m.intent_response_key for m in project.data.messages] == ["faq/a", "faq/b"]
    assert project.duplicates == {("what", "faq/a"): 1}


BAD_OFFSETS = {"rasa_nlu_data": {"common_examples": [
    {"text": "quiero un taxi", "intent": "taxi",
     "entities": [{"start": 10, "end": 20, "value": "taxi", "entity": "vehicle"}]},
    {"text": "pide un taxi", "intent": "taxi"},
    {"text": "hola", "intent": "greet"},
    {"text": "buenas", "intent": "greet"},
]}}


def test_a_bad_offset_drops_the_annotation_and_the_rest_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path / "es.json", json.dumps(BAD_OFFSETS))
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        data = load_data(path)
    assert [(m.text, m.entities) for m in data.messages] == [
        ("quiero un taxi", []), ("pide un taxi", []), ("hola", []), ("buenas", [])]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert messages[0].startswith(f"{path}: common_examples[0].entities[0]: entity 'vehicle'")
    assert "'quiero un taxi'" in messages[0]
    report = validate(data)
    assert report.warnings == [messages[0]] and not report.ok


def test_a_missing_lookup_file_keeps_the_table_empty_and_the_rest_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Rasa's own fixture names its lookup file from the repository's root: Rasa reads the JSON
    (the file is read when a featurizer needs it), so it must not refuse the whole file here."""
    document = {"rasa_nlu_data": {
        "common_examples": [{"text": "plate ABC 123", "intent": "plate", "entities": []}],
        "lookup_tables": [{"name": "plates", "elements": "data/test/lookup_tables/plates.txt"}],
    }}
    path = write(tmp_path / "lookup.json", json.dumps(document))
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        data = load_data(path)
    assert [m.text for m in data.messages] == ["plate ABC 123"]
    assert data.lookup_tables == [{"name": "plates", "elements": []}]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and messages[0].startswith(f"{path}: lookup_tables[0]: lookup table file")
    assert messages[0].endswith("the table 'plates' is kept empty")
    assert not validate(data).ok


def test_json_annotation_values_are_not_listed_as_synonyms(tmp_path: Path) -> None:
    """As Rasa's JSON reader: an annotation's value is learnt by EntitySynonymMapper from the
    example, not listed under the data's synonyms (Rasa's YAML reader does list them)."""
    document = {"rasa_nlu_data": {"common_examples": [
        {"text": "to NYC", "intent": "fly", "entities": [
            {"start": 3, "end": 6, "value": "New York", "entity": "city"}]}]}}
    data = load_data(write(tmp_path / "nyc.json", json.dumps(document)))
    assert data.synonyms == {} and data.messages[0].entities[0]["value"] == "New York"


def test_a_table_of_contents_before_the_first_section(tmp_path: Path) -> None:
    path = write(tmp_path / "nlu.md", "# Bot data\n\n- [greet](#intent-greet)\n- [bye](#bye)\n"
                                      "Some prose.\n\n## intent:greet\n- hi\n- hello\n"
                                      "## intent:bye\n- bye\n")
    data = load_data(path)
    assert [(m.text, m.intent, m.entities) for m in data.messages] == [
        ("hi", "greet", []), ("hello", "greet", []), ("bye", "bye", [])]


RESPONSES_MD = """## ask channels
* faq/ask_channels
  - We have a list of [connectors](https://rasa.com/docs/core/connectors/), but if
    you don't see yours, build one.

## ask languages
* faq/ask_languages
  - You can use Rasa in any language!
  - Any language.\\nReally.

## ask rasa x
* faq/ask_rasax
 - Rasa X is a tool to learn from real conversations.
"""
RESPONSES_NLU = """## intent: faq/ask_channels
- what channels do you support?
- channels supported by Rasa
## intent: faq/ask_languages
- which languages do you support?
- languages supported
"""


def test_rasa_1_response_markdown(tmp_path: Path) -> None:
    path = write(tmp_path / "responses.md", RESPONSES_MD)
    data = load_file(path)
    assert data is not None and data.messages == []
    assert data.responses == {
        "utter_faq/ask_channels": [
            {"text": "We have a list of [connectors](https://rasa.com/docs/core/connectors/), but if"}],
        "utter_faq/ask_languages": [
            {"text": "You can use Rasa in any language!"}, {"text": "Any language.\nReally."}],
        "utter_faq/ask_rasax": [{"text": "Rasa X is a tool to learn from real conversations."}],
    }
    # the continuation line is skipped as Rasa 1.x skipped it, and named
    assert data.load_warnings == [
        f"{path}:4: skipped \"you don't see yours, build one.\": a response is one '- text' "
        "line under a '* intent/key' line (write a line break as \\n)"]


def test_a_folder_of_rasa_1_nlu_and_responses(tmp_path: Path) -> None:
    write(tmp_path / "nlu.md", RESPONSES_NLU)
    write(tmp_path / "responses.md", RESPONSES_MD)
    data = load_data(tmp_path)
    assert [m.intent_response_key for m in data.messages] == ["faq/ask_channels"] * 2 + [
        "faq/ask_languages"] * 2
    assert sorted(data.responses) == [
        "utter_faq/ask_channels", "utter_faq/ask_languages", "utter_faq/ask_rasax"]


def test_rasa_1_markdown_stories_are_not_responses(tmp_path: Path) -> None:
    write(tmp_path / "nlu.md", RESPONSES_NLU)
    write(tmp_path / "stories.md", "## faq\n* faq/ask_channels\n  - respond_faq\n")
    data = load_data(tmp_path)
    assert data.responses == {}
    with pytest.raises(DataError, match=r"stories\.md: holds no NLU training data"):
        load_file(tmp_path / "stories.md")
