"""Property-based tests of the training-data readers (hypothesis; profiles in tests/conftest.py).

Whatever the input, a reader gives data or a one-line ``NLUError`` naming the file: never another
exception. Data the writers accept goes YAML -> JSON -> Markdown -> YAML with the same examples,
entities, synonyms, regexes and lookup tables, and responses survive YAML -> YAML.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from nlu_engine.contract.errors import NLUError
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.annotations import synonyms_from_entities, to_annotated
from nlu_engine.training_data.domain import parse_domain
from nlu_engine.training_data.rasa_json import dump_rasa_json, parse_rasa_json
from nlu_engine.training_data.rasa_markdown import parse_markdown_responses, parse_rasa_markdown
from nlu_engine.training_data.rasa_yaml import dump_rasa_yaml, parse_rasa_yaml
from tests.conftest import TINY_NLU
from tests.reader_inputs import ALPHABET, assert_one_line, mutated, summary, training_data

TINY_JSON = dump_rasa_json(parse_rasa_yaml(TINY_NLU))
TINY_MARKDOWN = """## intent:greet
- hi [Berlin](city) and [NYC](city:New York)
- fly to [Rome]{"entity": "city", "role": "to"}
## intent:faq/ask_name
* what is your name
## synonym:New York
- new york city
<!-- a comment -->
## regex:zip
- [0-9]{5}
## lookup:city
- Paris
"""
TINY_DOMAIN = """version: "3.1"
intents:
- greet
- book: {use_entities: [city]}
entities:
- city:
    roles: [from, to]
responses:
  utter_greet:
  - text: hi
"""
text_inputs = st.text(alphabet=ALPHABET + "\n ", max_size=200) | st.text(max_size=200)


def read_or_refuse(reader: Callable[[str, str], Any], content: str, source: str) -> Any:
    try:
        return reader(content, source)
    except NLUError as error:
        assert_one_line(error, source)
        return None


def to_markdown(data: TrainingData) -> str:
    """Rasa 1 Markdown for ``data`` (the package reads this format but does not write it)."""
    lines: list[str] = []
    intents: dict[str, list[str]] = {}
    for message in data.messages:
        name = message.intent_response_key or message.intent or ""
        intents.setdefault(name, []).append(to_annotated(message.text, message.entities))
    for name, texts in intents.items():
        lines += [f"## intent:{name}", *(f"- {text}" for text in texts)]
    carried = {s: v for m in data.messages for s, v in synonyms_from_entities(m.text, m.entities).items()}
    for surface, value in data.synonyms.items():
        if surface.strip() != surface and carried.get(surface) == value:
            continue  # an item is stripped: the annotated example carries it (as in the YAML writer)
        lines += [f"## synonym:{value}", f"- {surface}"]
    for regex in data.regex_features:
        lines += [f"## regex:{regex['name']}", f"- {regex['pattern']}"]
    for table in data.lookup_tables:
        lines += [f"## lookup:{table['name']}", *(f"- {e}" for e in table["elements"])]
    return "\n".join(lines) + "\n"


@given(st.one_of(text_inputs, mutated(TINY_NLU)))
def test_yaml_reader_gives_data_or_one_line(content: str) -> None:
    read_or_refuse(parse_rasa_yaml, content, "fuzz.yml")


@given(st.one_of(text_inputs, mutated(TINY_JSON)))
def test_json_reader_gives_data_or_one_line(content: str) -> None:
    read_or_refuse(parse_rasa_json, content, "fuzz.json")


@given(st.one_of(text_inputs, mutated(TINY_MARKDOWN)))
def test_markdown_reader_gives_data_or_one_line(content: str) -> None:
    read_or_refuse(parse_rasa_markdown, content, "fuzz.md")
    read_or_refuse(parse_markdown_responses, content, "fuzz.md")


@given(st.one_of(text_inputs, mutated(TINY_DOMAIN)))
def test_domain_reader_gives_a_domain_or_one_line(content: str) -> None:
    read_or_refuse(parse_domain, content, "domain.yml")


@given(training_data())
def test_yaml_json_markdown_yaml_round_trip(data: TrainingData) -> None:
    try:
        yaml_text = dump_rasa_yaml(data)
    except NLUError as error:  # data the inline annotations cannot carry: refused, not garbled
        assert "\n" not in str(error)
        return
    try:
        first = parse_rasa_yaml(yaml_text, "first.yml")
    except NLUError as error:  # an invalid regex is refused when read, in one line
        assert_one_line(error, "first.yml")
        assert "invalid regular expression" in str(error)
        assert any(_invalid_regex(r["pattern"]) for r in data.regex_features)
        return
    assert first is not None
    assert summary(first, responses=True) == summary(data, responses=True)
    second = parse_rasa_json(dump_rasa_json(first), "second.json")
    assert summary(second) == summary(first)
    markdown = to_markdown(second)
    # a Markdown line is a Python line (as in Rasa 1's reader) and <!-- --> a comment: such a
    # text cannot be written in Markdown
    assume("<!--" not in markdown and len(markdown.splitlines()) == markdown.count("\n"))
    third = parse_rasa_markdown(markdown, "third.md")
    assert summary(third) == summary(second)
    fourth = parse_rasa_yaml(dump_rasa_yaml(third), "fourth.yml")
    assert fourth is not None and summary(fourth) == summary(first)


def _invalid_regex(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return True
    return False


@pytest.mark.parametrize("content", ["{\"rasa_nlu_data\": {\"common_examples\": [[]]}}",
                                     json.dumps({"rasa_nlu_data": {"lookup_tables": [{"name": 1}]}})])
def test_json_reader_names_the_example(content: str) -> None:
    with pytest.raises(NLUError, match=r"^x\.json: "):
        parse_rasa_json(content, "x.json")
