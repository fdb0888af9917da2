"""yaml_limits: what a YAML document's aliases expand to is counted without expanding them."""

from __future__ import annotations

import pytest
import yaml

from nlu_engine.assembly.config import load_config
from nlu_engine.contract.errors import ConfigError, DataError
from nlu_engine.training_data.rasa_yaml import parse_rasa_yaml
from nlu_engine.training_data.yaml_limits import MAX_EXPANDED_NODES, expanded_size, safe_load


def bomb(levels: int, width: int = 9) -> str:
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_the_count_is_what_the_aliases_expand_to() -> None:
    root = yaml.compose("a: &x [1, 2]\nb: [*x, *x, *x]\n")
    # the mapping, 2 keys, the list of 2 scalars, and three uses of it (3 nodes each) in a list
    assert expanded_size(root) == 1 + 2 + 3 + 1 + 3 * 3
    assert expanded_size(yaml.compose(bomb(10))) == MAX_EXPANDED_NODES + 1  # stops counting


def test_a_recursive_alias_expands_without_end() -> None:
    # PyYAML builds a list inside itself; json.dumps of it, or a walk over it, fails later
    assert expanded_size(yaml.compose("a: &x [1, *x]\n")) == MAX_EXPANDED_NODES + 1
    with pytest.raises(yaml.YAMLError, match="its aliases expand to more than"):
        safe_load("a: &x [1, *x]\n")


def test_ordinary_aliases_still_load() -> None:
    assert safe_load(bomb(3, width=3)) == {"a0": ["lol"] * 3, "a1": [["lol"] * 3] * 3,
                                          "a2": [[["lol"] * 3] * 3] * 3}


def test_the_readers_refuse_a_bomb_in_one_line(tmp_path) -> None:
    with pytest.raises(DataError, match=r"^nlu\.yml:1: invalid YAML \(its aliases expand to more"):
        parse_rasa_yaml(bomb(10) + "responses:\n  utter_x: *a9\n", "nlu.yml")
    path = tmp_path / "config.yml"
    path.write_text(bomb(10) + "pipeline: *a9\n")
    with pytest.raises(ConfigError, match=r":1: invalid YAML \(its aliases expand to more"):
        load_config(path)
