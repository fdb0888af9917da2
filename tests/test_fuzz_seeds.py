"""Each atheris target of ``fuzz/`` runs its seed corpus once, without the fuzzing loop (no
atheris needed): a target whose seeds no longer pass its own checks, or no longer build, fails
here instead of rotting until the next ``make fuzz``."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzz.__main__ import TARGETS
from fuzz.harness import MAX_LEN

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"


@pytest.fixture
def quiet_readers() -> Iterator[None]:
    """The readers' warnings, one a seed, as ``fuzz.harness.fuzz`` silences them."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def test_every_target_module_is_listed() -> None:
    modules = {path.stem for path in FUZZ.glob("*.py")
               if "def test_one_input(raw: bytes) -> None:" in path.read_text(encoding="utf-8")}
    assert modules == set(TARGETS)


@pytest.mark.parametrize("name", sorted(TARGETS))
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_target_passes_its_seed_corpus(name: str, quiet_readers: None) -> None:
    target = importlib.import_module(f"fuzz.{name}")
    max_len = getattr(target, "MAX_LEN", MAX_LEN)
    seeds = [seed[:max_len] for seed in target.seeds()]  # as write_seeds stores them for libFuzzer
    assert len(seeds) >= 5, f"{name}: {len(seeds)} seeds"
    for seed in seeds:
        target.test_one_input(seed)
