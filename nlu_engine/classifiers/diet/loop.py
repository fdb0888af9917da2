"""The training loop: an epoch runner and the hooks its parts plug into.

Modelled on spaCy's training loop and Keras's callbacks. The runner knows nothing of DIET: a
trainer runs one batch (an optimizer step) and sums an epoch up, ``batches(epoch)`` says what
an epoch trains on, and everything else (progress bar, history, hold-out evaluation, early
stopping, logging, memory housekeeping) is a ``Callback``::

    on_train_begin(state)
    for epoch in range(epochs):
        for index in batches(epoch):
            outputs = trainer.train_batch(index);   on_batch_end(state, outputs)
        metrics = trainer.epoch_metrics(sums, steps);   on_epoch_end(state, metrics)
        stop if a callback set state.stop
    on_train_end(state)                       (also when training fails)

Callbacks run in list order, so a later one sees what an earlier one added: ``metrics`` is the
one dict of the epoch, and ``state`` carries the history and this epoch's hold-out scores.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


class Trainer(Protocol):
    """What the runner trains with (DIET's is ``steps.DIETTrainer``)."""

    def train_batch(self, index: np.ndarray) -> list[dict[str, Any]]:
        """One optimizer step on the examples ``index``; the metrics of each part it ran
        (scalars), which the runner sums over the epoch."""
        ...

    def epoch_metrics(self, sums: dict[str, float], steps: int) -> dict[str, float]:
        """The epoch's reported metrics from the sums of ``steps`` parts' metrics."""
        ...


@dataclass
class LoopState:
    """What the hooks see and share."""

    trainer: Trainer
    epochs: int
    epoch: int = 0  # the current epoch, from 0
    global_step: int = 0  # batches trained so far
    epoch_start: float = 0.0  # time.perf_counter() when the current epoch began
    #: "epochs": one record per epoch; "evaluations": one per hold-out evaluation; callbacks may
    #: add keys (e.g. "stopped_early_at")
    history: dict[str, Any] = field(default_factory=lambda: {"epochs": [], "evaluations": []})
    scores: dict[str, float] | None = None  # this epoch's hold-out scores, if it was evaluated
    stop: bool = False  # set by a callback to end training after this epoch


class Callback:
    """A part of the training loop; every hook does nothing unless overridden."""

    def on_train_begin(self, state: LoopState) -> None:
        """Before the first epoch."""

    def on_batch_end(self, state: LoopState, outputs: list[dict[str, Any]]) -> None:
        """After each optimizer step, with the metrics of the parts it ran."""

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        """After each epoch; may add to ``metrics`` or set ``state.stop``."""

    def on_train_end(self, state: LoopState) -> None:
        """After the last epoch, or when training fails (release what the callback holds)."""


def train_epochs(
    trainer: Trainer,
    batches: Callable[[int], Sequence[np.ndarray]],
    epochs: int,
    callbacks: Sequence[Callback] = (),
) -> LoopState:
    """Train for ``epochs`` epochs (fewer if a callback stops it); returns the final state."""
    state = LoopState(trainer=trainer, epochs=epochs)
    try:
        for callback in callbacks:
            callback.on_train_begin(state)
        for epoch in range(epochs):
            state.epoch, state.scores, state.epoch_start = epoch, None, time.perf_counter()
            sums: dict[str, float] = {}
            steps = 0
            for index in batches(epoch):
                outputs = trainer.train_batch(index)  # the batch, or its parts
                for out in outputs:
                    for key, value in out.items():
                        sums[key] = sums.get(key, 0.0) + float(value)
                    steps += 1
                state.global_step += 1
                for callback in callbacks:
                    callback.on_batch_end(state, outputs)
            metrics = trainer.epoch_metrics(sums, steps)
            for callback in callbacks:
                callback.on_epoch_end(state, metrics)
            if state.stop:
                break
    finally:
        for callback in callbacks:
            callback.on_train_end(state)
    return state
