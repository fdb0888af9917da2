"""DIET's optimizer step: the trainer the training loop (``loop.py``) runs.

One compiled (``tf.function``) step per batch. A batch larger than ``max_micro_batch_size`` is
split: each part's gradient (its loss weighted by its share of the batch) is summed and applied
once, so the update is the whole batch's while only one part's activations are alive at a time,
which lowers peak memory for large batches.

The whole-table L2 of the sparse input tables (``sparse_regularization: all_rows``) is
differentiated by the optimizer, once per step (``optimizer.LazyAdam``), and added to the
reported loss once per epoch, since it is a pass over both tables.

With ``sparse_regularization: rasa`` every weight's L2 gradient is added as Rasa's trainer adds
it: only where the loss's own gradient is positive (``rasa_rule``); a table's rows that the
batch does not touch get none.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from nlu_engine.classifiers.diet.batching import EncodedData, make_batch
from nlu_engine.classifiers.diet.model import DIETNetwork
from nlu_engine.classifiers.diet.optimizer import GroupedAdam, LazyAdam


def _add_gradients(a: Any, b: Any) -> Any:
    """Sum of two gradients of one variable: dense tensors add, IndexedSlices concatenate."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, tf.IndexedSlices) and isinstance(b, tf.IndexedSlices):
        return tf.IndexedSlices(
            tf.concat([a.values, b.values], 0), tf.concat([a.indices, b.indices], 0), a.dense_shape
        )
    return tf.convert_to_tensor(a) + tf.convert_to_tensor(b)


def rasa_rule(prediction: Any, penalty: Any, variable: Any, table_l2: float, weight: Any = 1.0) -> Any:
    """The gradient Rasa applies: the loss's, plus the L2's where the loss's is positive
    (``table_l2``: a sparse table's constant, whose L2 gradient ``2 * l2 * W`` is formed here,
    times the batch part's ``weight``).
    A table's gradient is made dense, as Rasa's dense layer over sparse inputs has it, so Adam's
    moments carry every row along every step (not only the rows the batch touched)."""
    if prediction is None:
        return None
    if isinstance(prediction, tf.IndexedSlices):
        prediction = tf.math.unsorted_segment_sum(prediction.values, prediction.indices,
                                                  tf.shape(variable)[0])  # [V, D]
        penalty = (2.0 * table_l2 * weight) * variable if table_l2 > 0 else None
    if penalty is None:
        return prediction
    return prediction + tf.where(prediction > 0, tf.convert_to_tensor(penalty), 0.0)


class DIETTrainer:
    """Trains ``network`` on batches of ``data`` with LazyAdam (``loop.Trainer``).

    ``signature`` is a training batch's input signature (``training.input_signature``);
    ``eager`` runs the steps uncompiled (``run_eagerly``); ``groups`` are (variables, learning
    rate) pairs that train at their own rates (a fine-tuned encoder's layers).
    """

    def __init__(
        self,
        network: DIETNetwork,
        data: EncodedData,
        learning_rate: Any,
        signature: dict[str, tf.TensorSpec],
        micro_batch_size: int | None,
        eager: bool = False,
        groups: list[tuple[list, Any]] | None = None,
    ) -> None:
        self.network, self.data, self.micro_batch_size = network, data, micro_batch_size
        self.variables = network.trainable_variables
        self.optimizer: LazyAdam | GroupedAdam = (
            GroupedAdam(self.variables, learning_rate, groups, l2=network.table_l2()) if groups
            else LazyAdam(self.variables, learning_rate, l2=network.table_l2())
        )
        self._step, self._part_gradients, self._apply = self._whole_step, self._gradients, self._apply_step
        self._table_penalty = network.table_penalty
        if not eager:
            self._step = tf.function(self._whole_step, input_signature=[signature], autograph=False)
            self._part_gradients = tf.function(
                self._gradients, input_signature=[signature, tf.TensorSpec([], tf.float32)],
                autograph=False)
            self._apply = tf.function(self._apply_step, reduce_retracing=True, autograph=False)
            self._table_penalty = tf.function(network.table_penalty, autograph=False)
        #: the whole-table L2 as at the end of the last epoch (before the first: at the start)
        self.table_penalty = float(self._table_penalty())

    def _gradients(self, batch: dict[str, tf.Tensor], weight: tf.Tensor) -> tuple[list, dict]:
        """Gradients of the batch's loss times ``weight``, and the batch's metrics."""
        tables = self.network.masked_tables()
        with tf.GradientTape(persistent=bool(tables)) as tape:
            out = self.network.losses_and_metrics(batch, training=True)
            regularization = tf.add_n(self.network.losses) if self.network.losses else 0.0
            total = out["loss"] + regularization
            weighted = total * weight  # recorded on the tape, so it is differentiated
            if tables:
                prediction_part, penalty_part = out["loss"] * weight, regularization * weight
        out["t_loss"] = total
        if not tables:
            return tape.gradient(weighted, self.variables), out
        prediction = tape.gradient(prediction_part, self.variables)
        penalty = tape.gradient(penalty_part, self.variables) if self.network.losses else [None] * len(
            self.variables)
        del tape
        return [
            rasa_rule(p, r, v, tables.get(id(v), (None, 0.0))[1], weight)
            for p, r, v in zip(prediction, penalty, self.variables, strict=True)
        ], out

    def _whole_step(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        gradients, out = self._gradients(batch, tf.constant(1.0))
        self.optimizer.apply(gradients)
        return out

    def _apply_step(self, gradients: list) -> None:
        self.optimizer.apply(gradients)

    def _batch(self, index: np.ndarray) -> dict[str, tf.Tensor]:
        return {k: tf.constant(v) for k, v in make_batch(self.data, index).items()}

    def train_batch(self, index: np.ndarray) -> list[dict[str, tf.Tensor]]:
        """One optimizer step on the examples ``index``: the metrics of the batch, or of each
        of its parts."""
        micro = self.micro_batch_size
        if not micro or len(index) <= micro:
            return [self._step(self._batch(index))]
        total_gradients: list = []
        outs = []
        for part in np.array_split(index, -(-len(index) // micro)):
            share = tf.constant(len(part) / len(index), tf.float32)
            gradients, out = self._part_gradients(self._batch(part), share)
            outs.append(out)
            total_gradients = list(gradients) if not total_gradients else [
                _add_gradients(a, b) for a, b in zip(total_gradients, gradients, strict=True)
            ]
        self._apply(total_gradients)
        return outs

    def epoch_metrics(self, sums: dict[str, float], steps: int) -> dict[str, float]:
        """The mean total loss (with the whole-table L2 at the epoch's end), intent accuracy
        and mask accuracy of the epoch."""
        self.table_penalty = float(self._table_penalty())
        metrics = {"t_loss": sums.get("t_loss", 0.0) / max(steps, 1) + self.table_penalty}
        for key in ("i_acc", "m_acc"):
            if key in sums:
                metrics[key] = sums[key] / steps
        return metrics

    def batch_loss(self, out: dict[str, Any]) -> float:
        """A step's total loss, with the table penalty as at the end of the previous epoch."""
        return float(out["t_loss"]) + self.table_penalty
