"""NLUError: one line, whatever user text it quotes; the YAML problem and line of PyYAML's errors."""

from __future__ import annotations

import pickle

import pytest
import yaml

from nlu_engine.contract.errors import DataError, NLUError, yaml_problem
from nlu_engine.training_data.rasa_yaml import parse_rasa_yaml


@pytest.mark.parametrize("brk", ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
def test_a_quoted_line_break_is_escaped(brk: str) -> None:
    error = NLUError(f"data.yml:3: intent 'a{brk}b' has no examples")
    assert len(str(error).splitlines()) == 1 and str(error).startswith("data.yml:3: intent 'a\\")
    assert str(pickle.loads(pickle.dumps(error))) == str(error)  # as Ray and processes pass it


def test_an_intent_name_with_a_line_break_is_one_line() -> None:
    # found by `make fuzz TARGET=yaml_data` (atheris): a double-quoted name holding "\n"
    with pytest.raises(DataError) as error:
        parse_rasa_yaml('nlu:\n- intent: "lists\\n- start"\n  examples: ""\n', "data.yml")
    assert str(error.value).startswith("data.yml:2: intent 'lists\\n- start' has no examples")


def test_yaml_problem_counts_the_line_of_a_refused_character() -> None:
    with pytest.raises(yaml.YAMLError) as error:
        yaml.safe_load("a: 1\nb: 2\x07\n")
    assert yaml_problem(error.value, "a: 1\nb: 2\x07\n") == (
        ":2", "unacceptable character #x0007: special characters are not allowed")
