"""Adam for DIET: fused dense updates, and lazy (row-wise) updates for embedding tables.

The sparse input layers hold vocabulary-sized tables (60k+ char n-grams x 128). Their loss
gradients arrive as ``IndexedSlices`` (only the rows a batch touched). Without a whole-table
penalty (``sparse_regularization: touched_rows``) only those rows' moments and weights are
updated ("lazy Adam"); every other variable goes through TensorFlow's fused
``ResourceApplyAdam`` kernel.

``l2`` names tables whose every row is decayed each step (DIET's default ``sparse_regularization:
all_rows``, Rasa's dense-layer L2): their gradient is ``2 * l2 * W`` plus the loss's rows, formed
here once per step rather than differentiated on the tape for every micro-batch (which would
materialise several table-sized gradients at once), then a fused dense Adam step, which is no
slower per epoch than the lazy one.

``linear_decay`` is the default learning-rate schedule (``learning_rate_schedule``). A
fine-tuned encoder's weights train with their own rates (``warmup_linear_decay``, one per layer
for layer-wise decay): ``grouped`` gives each group of variables its own LazyAdam.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf


def linear_decay(start: float, total_steps: int) -> Callable[[tf.Tensor], tf.Tensor]:
    """A learning rate falling linearly from ``start`` to ``start / 10`` over ``total_steps``
    optimizer steps, then staying there (a function of the step)."""
    total = float(max(1, total_steps))

    @tf.autograph.experimental.do_not_convert
    def learning_rate(step: tf.Tensor) -> tf.Tensor:
        progress = tf.minimum(tf.cast(step, tf.float32) / total, 1.0)
        return start * (1.0 - 0.9 * progress)

    return learning_rate


def warmup_linear_decay(peak: float, warmup_steps: int, total_steps: int) -> Callable[[tf.Tensor], tf.Tensor]:
    """A learning rate rising linearly from 0 to ``peak`` over ``warmup_steps``, then falling
    linearly to 0 at ``total_steps`` (BERT's fine-tuning schedule; a function of the step)."""
    warmup, total = float(max(1, warmup_steps)), float(max(1, total_steps))

    @tf.autograph.experimental.do_not_convert
    def learning_rate(step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        rising = step / warmup
        falling = (total - step) / tf.maximum(total - warmup, 1.0)
        return peak * tf.clip_by_value(tf.minimum(rising, falling), 0.0, 1.0)

    return learning_rate


class LazyAdam:
    """Adam with a learning rate that may depend on the step (a callable of the step)."""

    def __init__(
        self,
        variables: list,
        learning_rate: float | Callable[[tf.Tensor], tf.Tensor],
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        l2: list[tuple[Any, float]] | None = None,
    ) -> None:
        self.learning_rate = learning_rate
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="adam_step")
        # keras Variables wrap a tf.Variable in `.value`; the raw ops need that one
        self.variables = [getattr(v, "value", v) for v in variables]
        self.m = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables]
        self.v = [tf.Variable(tf.zeros_like(v), trainable=False) for v in self.variables]
        # per variable: the L2 constant of a table decayed whole every step (0: none)
        constants = {id(getattr(v, "value", v)): float(c) for v, c in (l2 or [])}
        self.l2 = [constants.get(id(v), 0.0) for v in self.variables]

    def current_learning_rate(self) -> tf.Tensor:
        if callable(self.learning_rate):
            return tf.cast(self.learning_rate(self.step), tf.float32)
        return tf.constant(self.learning_rate, tf.float32)

    def apply(self, gradients: list) -> None:
        """Apply one step; ``gradients`` align with ``variables`` (None = unused)."""
        self.step.assign_add(1)
        t = tf.cast(self.step, tf.float32)
        lr = self.current_learning_rate()
        beta_1_power = tf.pow(self.beta_1, t)
        beta_2_power = tf.pow(self.beta_2, t)
        after: list = []  # whole-table steps run one after another: one table's temporaries alive
        for var, m, v, grad, l2 in zip(
            self.variables, self.m, self.v, gradients, self.l2, strict=True
        ):
            if l2 > 0:
                with tf.control_dependencies(after):
                    step = self._dense(var, m, v, self._decayed(var, grad, l2), lr,
                                       beta_1_power, beta_2_power)
                after = [step] if step is not None else []  # None when eager
            elif isinstance(grad, tf.IndexedSlices):
                self._sparse(var, m, v, grad, lr, beta_1_power, beta_2_power)
            elif grad is not None:
                self._dense(var, m, v, grad, lr, beta_1_power, beta_2_power)

    @staticmethod
    def _decayed(var, grad, l2: float) -> tf.Tensor:
        """d/dW of l2 * sum(W^2), plus the loss's gradient (rows or dense): dense [V, D]."""
        decay = (2.0 * l2) * var.read_value()
        if isinstance(grad, tf.IndexedSlices):
            return tf.tensor_scatter_nd_add(decay, grad.indices[:, None], grad.values)
        return decay if grad is None else decay + grad

    def _dense(self, var, m, v, grad, lr, beta_1_power, beta_2_power):
        return tf.raw_ops.ResourceApplyAdam(
            var=var.handle, m=m.handle, v=v.handle,
            beta1_power=beta_1_power, beta2_power=beta_2_power, lr=lr,
            beta1=self.beta_1, beta2=self.beta_2, epsilon=self.epsilon,
            grad=grad, use_locking=False,
        )

    def _sparse(self, var, m, v, grad, lr, beta_1_power, beta_2_power) -> None:
        rows, position = tf.unique(grad.indices)  # [R], [nnz]
        g = tf.math.unsorted_segment_sum(grad.values, position, tf.shape(rows)[0])  # [R, D]
        m_rows = self.beta_1 * tf.gather(m, rows) + (1.0 - self.beta_1) * g
        v_rows = self.beta_2 * tf.gather(v, rows) + (1.0 - self.beta_2) * tf.square(g)
        step = lr * tf.sqrt(1.0 - beta_2_power) / (1.0 - beta_1_power)
        update = step * m_rows / (tf.sqrt(v_rows) + self.epsilon)
        m.scatter_update(tf.IndexedSlices(m_rows, rows))
        v.scatter_update(tf.IndexedSlices(v_rows, rows))
        var.scatter_sub(tf.IndexedSlices(update, rows))


class GroupedAdam:
    """One LazyAdam per group of variables, each with its own learning rate.

    ``groups`` are (variables, learning rate) pairs; every other variable of ``variables``
    trains at ``learning_rate`` (with the whole-table ``l2``). ``apply`` takes the gradients
    aligned with ``variables``, as LazyAdam's does.
    """

    def __init__(
        self,
        variables: list,
        learning_rate: float | Callable[[tf.Tensor], tf.Tensor],
        groups: list[tuple[list, float | Callable[[tf.Tensor], tf.Tensor]]],
        l2: list[tuple[Any, float]] | None = None,
    ) -> None:
        group_of = {id(v): g for g, (members, _) in enumerate(groups, 1) for v in members}
        assigned = [group_of.get(id(v), 0) for v in variables]
        rates = [learning_rate, *(rate for _, rate in groups)]
        self.members = [[i for i, g in enumerate(assigned) if g == group] for group in range(len(rates))]
        self.optimizers = [
            LazyAdam([variables[i] for i in members], rates[group], l2=l2 if group == 0 else None)
            for group, members in enumerate(self.members)
        ]

    def apply(self, gradients: list) -> None:
        for optimizer, members in zip(self.optimizers, self.members, strict=True):
            if members:
                optimizer.apply([gradients[i] for i in members])
