"""The parts of DIET's training loop (``loop.Callback``), each one concern.

``training.fit`` puts them in this order (a later one sees what an earlier one added)::

    TagF1Monitor       tag F1 decoded on a fixed sample of training examples -> metrics
    ReturnFreeMemory   hand freed heap pages back to the OS (``allocator.py``)
    History            one record per epoch: the metrics and the epoch's seconds
    HoldoutEvaluation  scores on held-out examples -> state.scores, history["evaluations"]
    TensorBoardLogger  metrics and hold-out scores as TensorBoard scalars
    ProgressBar        the epochs bar and a line per hold-out evaluation
    EarlyStopping      best hold-out weights kept and restored; stops after ``patience``

None imports TensorFlow: the scores come from a ``score`` function (``training.evaluate``
over compiled prediction), the weights from the network's own methods.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from nlu_engine.classifiers.diet.loop import Callback, LoopState
from nlu_engine.contract.allocator import return_free_memory
from nlu_engine.contract.errors import ConfigError

#: scores of encoded examples: intent accuracy "i_acc" and a token F1 per tag set ("e_f1", ...)
Score = Callable[[Any], dict[str, float]]


def decodes_after(epoch: int, epochs: int) -> bool:
    """Whether the tag F1 is decoded after ``epoch`` (from 0): about 20 times, and at the end."""
    return (epoch + 1) % max(1, epochs // 20) == 0 or epoch == epochs - 1


class TagF1Monitor(Callback):
    """Adds the token F1 of each tag set ("e_f1", "r_f1", "g_f1") to an epoch's metrics.

    It is the parse's own decode (``crf_decode``: Viterbi) of a fixed sample of training
    examples, on about 20 epochs of a training (``decodes_after``). The argmax of the tag
    logits, which each step could afford, says little under a CRF: it reads far below what
    decoding scores.
    """

    def __init__(self, score: Score, sample: Any, kinds: list[str]) -> None:
        self.score, self.sample, self.kinds = score, sample, kinds

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        if self.kinds and decodes_after(state.epoch, state.epochs):
            scores = self.score(self.sample)
            metrics.update({f"{kind[0]}_f1": float(scores[f"{kind[0]}_f1"]) for kind in self.kinds})


class History(Callback):
    """Records each epoch's metrics (rounded) and its seconds in ``state.history["epochs"]``."""

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        seconds = round(time.perf_counter() - state.epoch_start, 3)
        state.history["epochs"].append({**{k: round(v, 4) for k, v in metrics.items()}, "seconds": seconds})


class HoldoutEvaluation(Callback):
    """Scores the held-out examples every ``every`` epochs (0: never) and after the last one."""

    def __init__(self, score: Score, data: Any, every: int) -> None:
        self.score, self.data, self.every = score, data, every

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        epoch, last = state.epoch, state.epoch == state.epochs - 1
        if (self.every > 0 and (epoch + 1) % self.every == 0) or last:
            state.scores = self.score(self.data)
            state.history["evaluations"].append({"epoch": epoch + 1, **state.scores})


def require_tensorboard(component: str) -> None:
    """A ConfigError unless the ``tensorboard`` package (which TensorFlow's summaries need) is
    installed: checked before training rather than failing after its first epoch."""
    if importlib.util.find_spec("tensorboard") is None:
        raise ConfigError(
            f"{component}: tensorboard_log_directory needs the tensorboard package; "
            "install it (pip install tensorboard) or remove tensorboard_log_directory"
        )


class TensorBoardLogger(Callback):
    """Writes TensorBoard scalars: the epoch's metrics (step = epoch), hold-out scores as
    ``val_<name>``, and with ``level`` "batch" or "minibatch" each step's loss (``batch_loss``
    of the step's metrics)."""

    def __init__(self, directory: str, level: str, batch_loss: Callable[[dict[str, Any]], float]) -> None:
        self.directory, self.level, self.batch_loss = directory, level, batch_loss
        self.writer: Any = None

    def on_train_begin(self, state: LoopState) -> None:
        import tensorflow as tf

        self.writer = tf.summary.create_file_writer(self.directory)

    def _write(self, scalars: dict[str, float], step: int) -> None:
        import tensorflow as tf

        with self.writer.as_default():
            for key, value in scalars.items():
                tf.summary.scalar(key, value, step=step)

    def on_batch_end(self, state: LoopState, outputs: list[dict[str, Any]]) -> None:
        if self.level in ("batch", "minibatch"):
            self._write({"t_loss": self.batch_loss(outputs[-1])}, state.global_step)  # the last part's

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        self._write(metrics, state.epoch)
        if state.scores is not None:
            self._write({f"val_{k}": v for k, v in state.scores.items()}, state.epoch)

    def on_train_end(self, state: LoopState) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class ProgressBar(Callback):
    """The epochs bar on stderr (its postfix: the latest metrics, tag F1 first) and one line
    per hold-out evaluation."""

    def __init__(self, description: str, show: bool) -> None:
        self.description, self.show = description, show
        self.bar: Any = None
        self.decoded: dict[str, float] = {}  # the latest tag F1, shown between decodings

    def on_train_begin(self, state: LoopState) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=state.epochs, desc=self.description, file=sys.stderr,
                        disable=not self.show, dynamic_ncols=True)

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        self.decoded.update({k: v for k, v in metrics.items() if k.endswith("_f1")})
        self.bar.set_postfix({k: f"{v:.3f}" for k, v in {**self.decoded, **metrics}.items()},
                             refresh=False)
        self.bar.update(1)
        if state.scores is not None and self.show:
            scores = ", ".join(f"{k} {v:.3f}" for k, v in state.scores.items())
            self.bar.write(f"epoch {state.epoch + 1}: hold-out {scores}", file=sys.stderr)

    def on_train_end(self, state: LoopState) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class EarlyStopping(Callback):
    """Keeps the weights of the best hold-out evaluation (the mean of its scores) and restores
    them at the end; with ``patience`` > 0 also stops after that many evaluations in a row
    without improvement. Records "stopped_early_at" and "restored_epoch" in the history."""

    def __init__(self, network: Any, patience: int = 0) -> None:
        self.network, self.patience = network, patience
        self.best_score, self.best_epoch, self.since_best = -1.0, -1, 0
        self.best_weights: list[np.ndarray] | None = None

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        if state.scores is None:
            return
        score = float(np.mean(list(state.scores.values())))
        if score > self.best_score:
            self.best_score, self.best_epoch, self.since_best = score, state.epoch + 1, 0
            self.best_weights = self.network.get_weights()
            return
        self.since_best += 1
        if self.patience and self.since_best >= self.patience:
            state.history["stopped_early_at"] = state.epoch + 1
            state.stop = True

    def on_train_end(self, state: LoopState) -> None:
        if self.best_weights is not None:
            self.network.set_weights(self.best_weights)
            state.history["restored_epoch"] = self.best_epoch
            self.best_weights = None


class ReturnFreeMemory(Callback):
    """Trims the heap after every epoch (``return_free_memory``)."""

    def on_epoch_end(self, state: LoopState, metrics: dict[str, float]) -> None:
        return_free_memory()
