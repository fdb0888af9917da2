"""Reading a Rasa domain: names in both forms, retrieval responses, counts, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.contract.errors import DataError
from nlu_engine.training_data.domain import DEFAULT_INTENTS, parse_domain, read_domain

DOMAIN = """version: "3.1"
intents:
  - greet
  - inform:
      use_entities: [city]
entities:
  - date
  - city:
      roles: [from, to]
      groups: ["1"]
slots:
  a: {type: text, mappings: [{type: from_text}]}
  b: {type: text, mappings: [{type: from_text}]}
forms:
  f: {required_slots: [a]}
actions: [action_x, action_y, action_z]
responses:
  utter_greet:
  - text: hi
  utter_faq/ask_name:
  - text: a bot
"""


def test_names_in_both_forms_and_the_dialogue_counted() -> None:
    domain = parse_domain(DOMAIN, "domain.yml")
    assert domain.intents == ["greet", "inform"]
    assert domain.entities == {"date": {"roles": [], "groups": []},
                               "city": {"roles": ["from", "to"], "groups": ["1"]}}
    assert domain.retrieval_responses() == {"utter_faq/ask_name": [{"text": "a bot"}]}
    assert domain.dialogue == {"slots": 2, "forms": 1, "actions": 3}
    assert set(DEFAULT_INTENTS) <= set(domain.all_intents) and "greet" in domain.all_intents


def test_an_empty_domain_is_empty() -> None:
    domain = parse_domain("", "domain.yml")
    assert domain.intents == [] and domain.entities == {} and domain.responses == {}


@pytest.mark.parametrize(("text", "fragment"), [
    ("intents: greet\n", "'intents' must be a list"),
    ("intents:\n  - {a: 1, b: 2}\n", "an item of 'intents'"),
    ("entities:\n  - city: [from]\n", "entity 'city' must be"),
    ("entities:\n  - city: {roles: from}\n", "'roles' of entity 'city' must be a list"),
    ("responses: [utter_x]\n", "'responses' must map"),
    ("- a list\n", "a domain must be a mapping"),
    # found by the property-based tests: PyYAML's message for it spans two lines
    ("intents:\n  - greet\x07\n", ":2: invalid YAML in the domain (unacceptable character #x0007"),
])
def test_a_malformed_domain_is_one_line_naming_the_file(text: str, fragment: str) -> None:
    with pytest.raises(DataError) as info:
        parse_domain(text, "my/domain.yml")
    assert str(info.value).startswith("my/domain.yml") and fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_a_domain_folder_merges_its_files(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text("intents: [greet]\nslots:\n  s: {type: any}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yml").write_text("intents: [greet, bye]\nslots:\n  t: {type: any}\n")
    domain = read_domain(tmp_path)
    assert domain.intents == ["greet", "bye"] and domain.dialogue == {"slots": 2}
    assert len(domain.sources) == 2
    with pytest.raises(DataError, match="domain not found"):
        read_domain(tmp_path / "nowhere.yml")


def test_an_alias_bomb_is_refused_in_one_line_at_once() -> None:
    # found while fuzzing beside the property tests: 'intents: *a9' (nine levels of nine aliases)
    # hung building the message of a wrong item, str() of 387 million values
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    with pytest.raises(DataError, match=r"^domain\.yml:1: invalid YAML in the domain \(its aliases expand"):
        parse_domain("\n".join(lines) + "\nintents: *a9\n", "domain.yml")
