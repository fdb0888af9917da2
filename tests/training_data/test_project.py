"""A Rasa project's data folder: NLU in any format read, stories and rules skipped and counted."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from nlu_engine.contract.errors import DataError
from nlu_engine.training_data import load_data
from nlu_engine.training_data.project import read_project

NLU = """version: "3.1"
nlu:
- intent: greet
  examples: |
    - hi
    - hello
- intent: faq/ask_name
  examples: |
    - what is your name?
    - who are you?
"""
STORIES = """version: "3.1"
stories:
- story: happy
  steps:
  - intent: greet
  - action: utter_greet
  - or:
    - intent: affirm
    - intent: thank
  - action: utter_happy
- story: other
  steps:
  - intent: greet
  - action: utter_greet
"""
RULES = """version: "3.1"
rules:
- rule: bye
  steps:
  - intent: goodbye
  - action: utter_goodbye
"""
DOMAIN = """version: "3.1"
intents:
  - greet
  - goodbye
  - faq:
      use_entities: []
entities:
  - city:
      roles: [from, to]
slots:
  name:
    type: text
    mappings:
    - type: from_text
forms:
  name_form:
    required_slots: [name]
responses:
  utter_greet:
  - text: hi!
  utter_faq/ask_name:
  - text: I am a bot.
actions:
  - action_x
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "data" / "nlu.yml", NLU)
    write(tmp_path / "data" / "stories.yml", STORIES)
    write(tmp_path / "data" / "rules" / "rules.yml", RULES)
    write(tmp_path / "domain.yml", DOMAIN)
    return tmp_path


def test_stories_and_rules_are_skipped_and_counted(project: Path) -> None:
    found = read_project(project / "data")
    texts = sorted(m.text for m in found.data.messages)
    assert texts == ["hello", "hi", "what is your name?", "who are you?"]
    assert found.skipped == {"stories": 2, "rules": 1}
    notice = found.notice()
    assert notice is not None and "\n" not in notice
    assert "2 stories" in notice and "1 rule," in notice and "stories.yml" in notice and "rules.yml" in notice
    assert found.story_intents == {
        "greet": [str(project / "data" / "stories.yml")],
        "affirm": [str(project / "data" / "stories.yml")],
        "thank": [str(project / "data" / "stories.yml")],
        "goodbye": [str(project / "data" / "rules" / "rules.yml")],
    }


def test_the_domain_gives_retrieval_responses_and_its_dialogue_is_counted(project: Path) -> None:
    found = read_project(project / "data", project / "domain.yml")
    assert found.data.responses == {"utter_faq/ask_name": [{"text": "I am a bot."}]}
    assert found.domain is not None and found.domain.intents == ["greet", "goodbye", "faq"]
    assert found.domain.entities == {"city": {"roles": ["from", "to"], "groups": []}}
    assert found.skipped == {"stories": 2, "rules": 1, "slots": 1, "forms": 1, "actions": 1,
                             "responses": 1}
    assert "domain.yml" in (found.notice() or "")


def test_responses_in_the_data_win_over_the_domains(project: Path) -> None:
    write(project / "data" / "responses.yml",
          'responses:\n  utter_faq/ask_name:\n  - text: "From the data."\n')
    found = read_project(project / "data", project / "domain.yml")
    assert found.data.responses["utter_faq/ask_name"] == [{"text": "From the data."}]


def test_a_domain_folder_is_merged(tmp_path: Path) -> None:
    write(tmp_path / "data" / "nlu.yml", NLU)
    write(tmp_path / "domain" / "a.yml", "intents: [greet]\nentities:\n- city:\n    roles: [from]\n")
    write(tmp_path / "domain" / "b.yml", "intents: [faq]\nentities:\n- city:\n    roles: [to]\n"
          "responses:\n  utter_faq/ask_name:\n  - text: bot\n")
    found = read_project(tmp_path / "data", tmp_path / "domain")
    assert found.domain is not None and found.domain.intents == ["greet", "faq"]
    assert found.domain.entities["city"]["roles"] == ["from", "to"]
    assert "utter_faq/ask_name" in found.data.responses


def test_a_malformed_stories_file_is_skipped_with_a_warning(
    project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(project / "data" / "broken_stories.yml", "stories:\n- story: x\n  steps: [\n")
    found = read_project(project / "data")
    assert len(found.data.messages) == 4
    [entry] = found.skipped_files
    assert "broken_stories.yml" in entry and "not valid YAML" in entry and "broken_stories.yml:4:" in entry
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        load_data(project / "data")
    assert any("broken_stories.yml" in r.getMessage() for r in caplog.records)


def test_a_stories_file_whose_aliases_explode_is_skipped_at_once(project: Path) -> None:
    lines = ["a0: &a0 [{story: s, steps: []}, {story: t, steps: []}]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    write(project / "data" / "bomb.yml", "\n".join(lines) + "\nstories: *a9\n")
    found = read_project(project / "data")
    assert len(found.data.messages) == 4
    [entry] = found.skipped_files
    assert entry.startswith(str(project / "data" / "bomb.yml:1: not valid YAML (its aliases expand"))


@pytest.mark.parametrize("broken", [
    "nlu:\n- intent: a\n  examples: [\n",                          # the nlu: key
    "version: '3.1'\nnlu:\n- intent: a\n  examples: |\n    - x\n  - y: [\n",  # later on
    "- intent: a\n  examples: |\n    - x\n  bad: [\n",              # an examples: key
])
def test_a_malformed_nlu_file_is_an_error_naming_file_and_line(project: Path, broken: str) -> None:
    write(project / "data" / "more_nlu.yml", broken)
    with pytest.raises(DataError, match=r"more_nlu\.yml:\d+: invalid YAML"):
        read_project(project / "data")


def test_a_malformed_domain_is_an_error_naming_file_and_line(project: Path) -> None:
    write(project / "domain.yml", "intents:\n  - greet\n responses: [\n")
    with pytest.raises(DataError, match=r"domain\.yml:\d+: invalid YAML in the domain"):
        read_project(project / "data", project / "domain.yml")


def test_all_three_formats_and_lookup_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # Rasa reads lookup files relative to the working folder
    write(tmp_path / "data" / "lookups" / "cities.txt", "Berlin\nParis\n\nRome\n")
    write(tmp_path / "data" / "lookups" / "banks.txt", "JPMC\nING\n")
    write(tmp_path / "data" / "a.yml", NLU + "- lookup: city\n  examples: |\n"
          "    - data/lookups/cities.txt\n- lookup: bank\n  examples: data/lookups/banks.txt\n")
    write(tmp_path / "data" / "b.md", "## intent:bye\n- bye\n- ciao\n## lookup:city\n"
          "data/lookups/cities.txt\n## synonym:goodbye\n- ciao\n")
    write(tmp_path / "data" / "c.json", json.dumps({"rasa_nlu_data": {
        "common_examples": [{"text": "thanks", "intent": "thank"}],
        "lookup_tables": [{"name": "bank", "elements": ["data/lookups/banks.txt", "Barclays"]}],
        "entity_synonyms": [{"value": "thanks", "synonyms": ["thx"]}]}}))
    data = read_project("data").data
    assert data.intents == ["bye", "faq", "greet", "thank"]
    lookups = {t["name"]: t["elements"] for t in data.lookup_tables}
    assert lookups == {"city": ["Berlin", "Paris", "Rome"], "bank": ["JPMC", "ING", "Barclays"]}
    assert data.synonyms == {"ciao": "goodbye", "thx": "thanks"}


def test_a_lookup_file_relative_to_the_data_file(tmp_path: Path) -> None:
    write(tmp_path / "data" / "lookups" / "cities.txt", "Berlin\nParis\n")
    write(tmp_path / "data" / "nlu.yml", NLU + "- lookup: city\n  examples: |\n    - lookups/cities.txt\n")
    lookups = read_project(tmp_path / "data").data.lookup_tables
    assert lookups == [{"name": "city", "elements": ["Berlin", "Paris"]}]


def test_a_missing_lookup_file_names_the_file_and_line(tmp_path: Path) -> None:
    write(tmp_path / "nlu.yml", NLU + "- lookup: city\n  examples: data/nowhere.txt\n")
    with pytest.raises(DataError, match=r"nlu\.yml:12: lookup table file 'data/nowhere\.txt' not found"):
        read_project(tmp_path / "nlu.yml")


def test_an_explicit_stories_file_is_skipped_but_data_is_needed(project: Path) -> None:
    found = read_project([project / "data" / "nlu.yml", project / "data" / "stories.yml"])
    assert found.skipped == {"stories": 2} and len(found.data.messages) == 4
    with pytest.raises(DataError, match="no NLU training data"):
        read_project(project / "data" / "stories.yml")


def test_a_folder_with_only_stories_has_no_nlu(tmp_path: Path) -> None:
    write(tmp_path / "stories.yml", STORIES)
    with pytest.raises(DataError, match="no NLU training data"):
        read_project(tmp_path)


def test_nlu_and_stories_in_one_file(tmp_path: Path) -> None:
    write(tmp_path / "all.yml", NLU + STORIES.removeprefix('version: "3.1"\n'))
    found = read_project(tmp_path)
    assert len(found.data.messages) == 4 and found.skipped == {"stories": 2}
