"""The epoch runner (loop.py): hooks in order, metrics summed, stopping, clean-up on failure."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nlu_engine.classifiers.diet.loop import Callback, LoopState, train_epochs


class FakeTrainer:
    """Splits every batch into parts of 2 and reports, per part, its size as "n"."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.trained: list[list[int]] = []
        self.fail_at = fail_at

    def train_batch(self, index: np.ndarray) -> list[dict[str, Any]]:
        if self.fail_at is not None and len(self.trained) == self.fail_at:
            raise RuntimeError("step failed")
        self.trained.append(index.tolist())
        return [{"n": float(len(part))} for part in np.array_split(index, -(-len(index) // 2))]

    def epoch_metrics(self, sums: dict[str, float], steps: int) -> dict[str, float]:
        return {"examples": sums["n"], "parts": float(steps)}


class Recorder(Callback):
    """Logs every hook; stops training after ``stop_after`` epochs."""

    def __init__(self, log: list[Any], name: str, stop_after: int | None = None) -> None:
        self.log, self.name, self.stop_after = log, name, stop_after

    def on_train_begin(self, state: LoopState) -> None:
        self.log.append((self.name, "begin", state.epochs))

    def on_batch_end(self, state: LoopState, outputs: list[dict[str, Any]]) -> None:
        self.log.append((self.name, "batch", state.global_step, len(outputs)))

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        self.log.append((self.name, "epoch", state.epoch, dict(metrics)))
        metrics[self.name] = 1.0  # a later callback sees it
        if self.stop_after is not None and state.epoch + 1 >= self.stop_after:
            state.stop = True

    def on_train_end(self, state: LoopState) -> None:
        self.log.append((self.name, "end", state.epoch))


def batches(epoch: int) -> list[np.ndarray]:
    return [np.arange(3) + 10 * epoch, np.arange(1) + 10 * epoch]


def test_hooks_run_in_order_and_epoch_metrics_come_from_the_summed_parts() -> None:
    log: list[Any] = []
    trainer = FakeTrainer()
    state = train_epochs(trainer, batches, 2, [Recorder(log, "a"), Recorder(log, "b")])
    assert trainer.trained == [[0, 1, 2], [0], [10, 11, 12], [10]]
    assert state.global_step == 4 and state.epoch == 1
    assert log[:2] == [("a", "begin", 2), ("b", "begin", 2)]
    # per batch: the step count so far and how many parts the batch ran as
    assert log[2:6] == [("a", "batch", 1, 2), ("b", "batch", 1, 2),
                        ("a", "batch", 2, 1), ("b", "batch", 2, 1)]
    # 4 examples in 3 parts; "b" sees what "a" added to the epoch's metrics
    assert log[6] == ("a", "epoch", 0, {"examples": 4.0, "parts": 3.0})
    assert log[7] == ("b", "epoch", 0, {"examples": 4.0, "parts": 3.0, "a": 1.0})
    assert log[-2:] == [("a", "end", 1), ("b", "end", 1)]


def test_a_callback_stops_training_after_the_epoch() -> None:
    log: list[Any] = []
    trainer = FakeTrainer()
    state = train_epochs(trainer, batches, 5, [Recorder(log, "stopper", stop_after=2), Recorder(log, "b")])
    assert len(trainer.trained) == 4  # two epochs of two batches
    assert ("b", "epoch", 1, {"examples": 4.0, "parts": 3.0, "stopper": 1.0}) in log  # the epoch completes
    assert log[-1] == ("b", "end", 1) and state.stop


def test_train_end_runs_when_a_step_fails() -> None:
    log: list[Any] = []
    with pytest.raises(RuntimeError, match="step failed"):
        train_epochs(FakeTrainer(fail_at=3), batches, 3, [Recorder(log, "a")])
    assert log[-1] == ("a", "end", 1)


def test_no_epochs_still_begins_and_ends() -> None:
    log: list[Any] = []
    state = train_epochs(FakeTrainer(), batches, 0, [Recorder(log, "a")])
    assert log == [("a", "begin", 0), ("a", "end", 0)] and state.history == {"epochs": [], "evaluations": []}
