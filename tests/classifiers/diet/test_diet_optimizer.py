"""The encoder's learning-rate schedule and the per-group Adam (optimizer.py)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from nlu_engine.classifiers.diet.optimizer import GroupedAdam, LazyAdam, warmup_linear_decay


def test_warmup_then_linear_decay_to_zero() -> None:
    schedule = warmup_linear_decay(1e-3, warmup_steps=10, total_steps=110)
    rates = [float(schedule(tf.constant(step, tf.int64))) for step in (0, 5, 10, 60, 110, 200)]
    np.testing.assert_allclose(rates, [0.0, 5e-4, 1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
    no_warmup = warmup_linear_decay(1e-3, warmup_steps=0, total_steps=100)
    assert float(no_warmup(tf.constant(1, tf.int64))) == pytest.approx(1e-3 * 99 / 99, rel=1e-6)


def test_each_group_trains_at_its_own_rate() -> None:
    """A group is the same Adam step as a LazyAdam of its own variables at its own rate."""
    rng = np.random.default_rng(0)
    start = [rng.normal(size=(3, 2)).astype(np.float32) for _ in range(3)]
    gradients = [tf.constant(rng.normal(size=(3, 2)).astype(np.float32)) for _ in range(3)]
    grouped = [keras.Variable(v) for v in start]
    alone = [keras.Variable(v) for v in start]
    optimizer = GroupedAdam(grouped, 0.1, [([grouped[1]], 0.0), ([grouped[2]], 0.01)])
    for _ in range(3):
        optimizer.apply(gradients)
    np.testing.assert_array_equal(np.asarray(grouped[1]), start[1])  # rate 0: unchanged
    for variable, rate, gradient in zip(alone, (0.1, 0.0, 0.01), gradients, strict=True):
        single = LazyAdam([variable], rate)
        for _ in range(3):
            single.apply([gradient])
    for got, expected in zip(grouped, alone, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-6)
    assert not np.allclose(np.asarray(grouped[0]), start[0])
    assert not np.allclose(np.asarray(grouped[2]), start[2])
