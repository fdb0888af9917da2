"""glibc allocator tuning (contract/allocator.py): set for training, reset after it, trim per epoch."""

from __future__ import annotations

from typing import Any

import pytest

from nlu_engine.classifiers.diet.callbacks import ReturnFreeMemory
from nlu_engine.classifiers.diet.loop import LoopState
from nlu_engine.contract import allocator


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    made: list[tuple[Any, ...]] = []
    monkeypatch.setattr(allocator, "_glibc", lambda function, *args: made.append((function, *args)))
    return made


def test_thresholds_are_raised_for_training_and_reset_even_when_it_fails(calls: list) -> None:
    with pytest.raises(RuntimeError), allocator.large_blocks_on_heap():
        assert calls == [("mallopt", -3, 512 << 20), ("mallopt", -1, 1 << 30)]
        raise RuntimeError("training failed")
    assert calls[2:] == [("mallopt", -3, 32 << 20), ("mallopt", -1, 64 << 20), ("malloc_trim", 0)]


def test_free_memory_is_returned_after_every_epoch(calls: list) -> None:
    state = LoopState(trainer=None, epochs=2)  # type: ignore[arg-type]
    ReturnFreeMemory().on_epoch_end(state, {})
    assert calls == [("malloc_trim", 0)]


def test_without_glibc_the_calls_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes

    tried: list[str] = []

    def missing(name: str) -> None:
        tried.append(name)
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    allocator.return_free_memory()
    with allocator.large_blocks_on_heap():
        pass
    assert tried == ["libc.so.6"] * 6  # every call tried glibc, none raised
