"""RandomlyConnectedDense masks, Ffnn and Embed; DIET's gelu and dropout."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from nlu_engine.classifiers.diet.layers import (
    Dropout,
    Embed,
    Ffnn,
    RandomlyConnectedDense,
    connection_mask,
    gelu,
)


def _built(layer: keras.layers.Layer, input_dim: int) -> keras.layers.Layer:
    layer(np.zeros((2, 3, input_dim), np.float32))
    return layer


def test_mask_density_and_connectivity() -> None:
    for input_dim, units in [(300, 200), (64, 256), (128, 128), (1000, 20)]:
        layer = _built(RandomlyConnectedDense(units, density=0.2), input_dim)
        mask = layer.kernel_mask.numpy()
        assert mask.shape == (input_dim, units)
        assert set(np.unique(mask)) <= {0.0, 1.0}
        assert (mask.sum(axis=1) >= 1).all() and (mask.sum(axis=0) >= 1).all()
        # Bernoulli(0.2) OR one identity entry per row/column of the longer side
        expected = 0.2 + 0.8 / min(input_dim, units)
        assert abs(mask.mean() - expected) < 0.02
        kernel = layer.kernel.numpy()
        assert (kernel[mask == 0] == 0).all()  # masked weights start (and stay) at zero


def test_density_zero_is_tiled_identity() -> None:
    mask = connection_mask(5, 2, 0.0, np.random.default_rng(0))
    np.testing.assert_array_equal(mask, [[1, 0], [0, 1], [1, 0], [0, 1], [1, 0]])
    np.testing.assert_array_equal(connection_mask(3, 3, 0.0, np.random.default_rng(0)), np.eye(3))


def test_density_one_is_plain_dense() -> None:
    layer = _built(RandomlyConnectedDense(8, density=1.0, activation="relu"), 5)
    assert layer.kernel_mask is None
    assert [w.name for w in layer.weights] == ["kernel", "bias"]
    x = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    expected = np.maximum(x @ layer.kernel.numpy() + layer.bias.numpy(), 0)
    np.testing.assert_allclose(layer(x).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_masked_output_and_no_gradient_to_masked_weights() -> None:
    layer = _built(RandomlyConnectedDense(16, density=0.3, use_bias=False), 12)
    layer.kernel.assign(tf.ones_like(layer.kernel))  # as if loaded without the mask applied
    x = np.random.default_rng(1).normal(size=(3, 12)).astype(np.float32)
    mask = layer.kernel_mask.numpy()
    np.testing.assert_allclose(layer(x).numpy(), x @ mask, rtol=1e-5, atol=1e-5)
    with tf.GradientTape() as tape:
        out = tf.reduce_sum(layer(x))
    grad = tape.gradient(out, layer.kernel).numpy()
    assert (grad[mask == 0] == 0).all() and (grad[mask == 1] != 0).any()


def test_seeded_reproducibility_and_weight_round_trip() -> None:
    def make() -> RandomlyConnectedDense:
        keras.utils.set_random_seed(42)
        return _built(RandomlyConnectedDense(32, density=0.2, reg_lambda=0.01), 20)

    first, second = make(), make()
    for a, b in zip(first.weights, second.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert len(first.losses) == 1  # L2 on the kernel

    keras.utils.set_random_seed(7)
    other = _built(RandomlyConnectedDense(32, density=0.2, reg_lambda=0.01), 20)
    assert not np.array_equal(other.kernel_mask.numpy(), first.kernel_mask.numpy())
    other.set_weights(first.get_weights())  # the mask is a weight, so it travels with them
    np.testing.assert_array_equal(other.kernel_mask.numpy(), first.kernel_mask.numpy())
    assert "kernel_mask" in [w.name for w in first.non_trainable_weights]


def test_ffnn_and_embed_shapes() -> None:
    keras.utils.set_random_seed(0)
    ffnn = Ffnn([64, 32], dropout_rate=0.5, reg_lambda=0.002, density=0.2)
    x = np.ones((2, 5, 10), np.float32)
    assert ffnn(x, training=False).shape == (2, 5, 32)
    assert len(ffnn.losses) == 2
    np.testing.assert_allclose(ffnn(x, training=False), ffnn(x, training=False))
    assert not np.allclose(ffnn(x, training=True), ffnn(x, training=False))
    assert Ffnn([], 0.1, 0.0, 0.2)(x).shape == x.shape

    embed = Embed(20, reg_lambda=0.002)
    assert embed(np.ones((4, 7), np.float32)).shape == (4, 20)
    assert len(embed.losses) == 1 and len(embed.trainable_weights) == 2


def test_gelu_values_and_gradient_match_keras() -> None:
    x = tf.constant(np.linspace(-12.0, 12.0, 4001, dtype=np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours, theirs = gelu(x), keras.activations.gelu(x)  # Keras's default: exact (erf)
        ours_loss, theirs_loss = tf.reduce_sum(ours * x), tf.reduce_sum(theirs * x)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=2e-6)
    np.testing.assert_allclose(
        tape.gradient(ours_loss, x).numpy(), tape.gradient(theirs_loss, x).numpy(), atol=2e-5
    )
    assert abs(float(gelu(tf.constant(1.0))) - 0.8413447) < 1e-6  # 1 * Phi(1)


@pytest.mark.parametrize("width", [256, 7])
def test_dropout_rate_scale_and_gradient(width: int) -> None:
    keras.utils.set_random_seed(3)
    layer = Dropout(0.2)
    x = tf.ones((4000, width))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        total = tf.reduce_sum(y)
    values = y.numpy()
    assert set(np.unique(values)) == {0.0, np.float32(1.25)}  # kept values scaled by 1 / 0.8
    assert abs((values == 0).mean() - 0.2) < 0.01
    np.testing.assert_array_equal(tape.gradient(total, x).numpy(), values)  # mask * scale
    assert layer(x, training=False) is x and Dropout(0.0)(x, training=True) is x
    # each call draws a new mask; the same seed draws the same masks again
    second = layer(x, training=True).numpy()
    assert (second != values).any()
    keras.utils.set_random_seed(3)
    again = Dropout(0.2)
    np.testing.assert_array_equal(again(x, training=True).numpy(), values)
    with pytest.raises(ValueError, match="rate"):
        Dropout(1.0)
