"""Fuzz target ``yaml_data``: Rasa 3 YAML training data (see :mod:`fuzz.training_data`)."""

from __future__ import annotations

from collections.abc import Iterable

from fuzz import training_data


def seeds() -> Iterable[bytes]:
    return training_data.seeds(".yml")


def test_one_input(raw: bytes) -> None:
    training_data.test_one_input(raw, ".yml")
