"""Dense building blocks of DIET: RandomlyConnectedDense, Ffnn and Embed.

All weights are created from Keras initialisers without an explicit seed, so they are drawn
from the global seed that ``keras.utils.set_random_seed`` sets; the connection masks take
their seed from Python's ``random`` (also seeded there) unless one is passed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf

_SQRT_HALF = 0.7071067811865476  # 1 / sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)


@tf.custom_gradient
def gelu(x: tf.Tensor) -> tuple[tf.Tensor, Callable]:
    """Exact (erf) gelu, x * Phi(x), the values of ``keras.activations.gelu``'s default.

    Written out with its own gradient, dy * (Phi(x) + x * phi(x)), which reuses the forward
    pass's Phi(x). Keras's and ``tf.nn.gelu``'s (erfc of -x / sqrt 2, differentiated op by
    op) are slower forward and backward (``benchmarks.perf.transformer_step --ops`` compares them;
    figures in BENCHMARKS.md).

    x [...] -> [...]
    """
    cdf = 0.5 + 0.5 * tf.math.erf(x * _SQRT_HALF)  # Phi(x)

    def gradient(dy: tf.Tensor) -> tf.Tensor:
        pdf = _INV_SQRT_2PI * tf.exp(-0.5 * tf.square(x))  # phi(x)
        return dy * (cdf + x * pdf)

    return x * cdf, gradient


def connection_mask(input_dim: int, units: int, density: float, rng: np.random.Generator) -> np.ndarray:
    """Binary float32 mask [input_dim, units]: Bernoulli(density) OR a tiled identity.

    The tiled identity (``mask[i, j] = 1 if i % m == j % m``, m = min(input_dim, units))
    keeps every input and every output connected, as Rasa's "minimal mask".
    """
    short = min(input_dim, units)
    rows = np.arange(input_dim)[:, None] % short  # [I, 1]
    cols = np.arange(units)[None, :] % short  # [1, U]
    minimal = rows == cols  # [I, U]
    random_part = rng.random((input_dim, units)) < density  # [I, U]
    return (minimal | random_part).astype(np.float32)


class RandomlyConnectedDense(keras.layers.Layer):
    """Dense layer whose kernel is multiplied by a fixed random binary mask.

    About ``density`` of the weights are live (more for tiny layers, because of the identity
    part); the rest are zero for ever. The mask is a non-trainable variable named
    "kernel_mask", so it is saved and loaded with the other weights. ``density == 1`` is a
    plain dense layer (no mask variable). Compute stays dense, as in Rasa.

    A plain ``Layer`` rather than a ``keras.layers.Dense`` subclass: Keras 3's Dense saves a
    fixed list of variables (kernel, bias) and would drop the mask from weight files.

    x [..., input_dim] -> [..., units]
    """

    def __init__(
        self,
        units: int,
        density: float = 0.2,
        activation: str | Callable | None = None,
        use_bias: bool = True,
        reg_lambda: float = 0.0,
        mask_seed: int | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= density <= 1.0:
            raise ValueError(f"RandomlyConnectedDense: density must be in [0, 1], got {density}")
        self.units = units
        self.density = density
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        self.reg_lambda = reg_lambda
        # random draws happen now, not in build, so they depend only on construction order
        self.kernel_initializer = keras.initializers.GlorotUniform()
        self.mask_seed = random.randint(0, 2**31 - 1) if mask_seed is None else mask_seed
        self.kernel_mask: keras.Variable | None = None
        self.bias: keras.Variable | None = None

    def build(self, input_shape: Sequence[int | None]) -> None:
        input_dim = int(input_shape[-1])
        self.kernel = self.add_weight(
            name="kernel",
            shape=(input_dim, self.units),
            initializer=self.kernel_initializer,
            regularizer=keras.regularizers.L2(self.reg_lambda) if self.reg_lambda > 0 else None,
        )
        if self.use_bias:
            self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
        if self.density < 1.0:
            mask = connection_mask(input_dim, self.units, self.density, np.random.default_rng(self.mask_seed))
            self.kernel_mask = self.add_weight(
                name="kernel_mask",
                shape=mask.shape,
                initializer=keras.initializers.Constant(mask),
                trainable=False,
            )
            # zero the masked weights once, so the L2 penalty only sees live weights
            self.kernel.assign(self.kernel * self.kernel_mask)

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        kernel = self.kernel
        if self.kernel_mask is not None:
            kernel = kernel * self.kernel_mask  # [I, U]; masked weights get no gradient
        # [..., I] -> [N, I] @ [I, U] -> [..., U]: a broadcast batched matmul would make the
        # kernel gradient a [..., I, U] tensor summed afterwards, several times slower
        flat = tf.reshape(inputs, (-1, tf.shape(inputs)[-1]))
        x = tf.matmul(flat, kernel)
        x = tf.reshape(x, tf.concat([tf.shape(inputs)[:-1], [self.units]], axis=0))
        if self.bias is not None:
            x = x + self.bias
        if self.activation is not None:
            x = self.activation(x)
        return x

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            units=self.units,
            density=self.density,
            activation=keras.activations.serialize(self.activation),
            use_bias=self.use_bias,
            reg_lambda=self.reg_lambda,
            mask_seed=self.mask_seed,
        )
        return config


class Dropout(keras.layers.Layer):
    """Inverted dropout whose keep mask costs half the random numbers of Keras's.

    Keras draws one float per element (a Philox counter yields four 32-bit numbers); here each
    32-bit draw is split into two 16-bit ones, and an element is dropped when its 16-bit number
    is below ``round(rate * 65536)``: the rate is exact to 1/65,536. Drawing the random numbers
    is a noticeable part of a training step's time, so half as many make dropout faster
    (``benchmarks.perf.transformer_step --ops``; figures in BENCHMARKS.md). Seeded from Keras's
    global seed like ``keras.layers.Dropout``, so seeded runs stay reproducible.

    x [..., D] -> [..., D] (kept values scaled by 1 / (1 - rate); identity unless training)
    """

    def __init__(self, rate: float, **kwargs) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.threshold = min(65535, round(self.rate * 65536))
        self.seed_generator = keras.random.SeedGenerator() if rate > 0 else None

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        if not training or self.seed_generator is None:
            return x
        width = int(x.shape[-1])  # static: every DIET activation has a known width
        pairs = -(-width // 2)  # 32-bit draws per row
        rows = tf.reduce_prod(tf.shape(x)[:-1])
        bits = tf.random.stateless_uniform(
            tf.stack([rows, pairs]), seed=self.seed_generator.next(), minval=None, maxval=None,
            dtype=tf.int32,
        )  # [N, ceil(D / 2)]
        halves = tf.reshape(tf.bitcast(bits, tf.uint16), (rows, 2 * pairs))  # [N, 2 ceil(D/2)]
        if 2 * pairs != width:
            halves = halves[:, :width]  # [N, D]
        keep = tf.reshape(halves >= tf.constant(self.threshold, tf.uint16), tf.shape(x))
        scale = tf.constant(1.0 / (1.0 - self.rate), x.dtype)
        return x * (tf.cast(keep, x.dtype) * scale)

    def get_config(self) -> dict:
        return {**super().get_config(), "rate": self.rate}


class Ffnn(keras.layers.Layer):
    """Feed-forward stack: per size, RandomlyConnectedDense(gelu, L2) then Dropout.

    x [..., D] -> [..., layer_sizes[-1]] (identity when ``layer_sizes`` is empty).
    """

    def __init__(
        self,
        layer_sizes: Sequence[int],
        dropout_rate: float,
        reg_lambda: float,
        density: float,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.layer_sizes = list(layer_sizes)
        self.hidden = [
            RandomlyConnectedDense(
                size,
                density=density,
                activation=gelu,
                reg_lambda=reg_lambda,
                name=f"hidden_{i}",
            )
            for i, size in enumerate(self.layer_sizes)
        ]
        self.dropouts = [Dropout(dropout_rate) for _ in self.layer_sizes]

    def call(self, x: tf.Tensor, training: bool | None = None) -> tf.Tensor:
        for dense, dropout in zip(self.hidden, self.dropouts, strict=True):
            x = dropout(dense(x), training=training)
        return x


class Embed(keras.layers.Layer):
    """Linear projection into the embedding space (no activation, L2 on the kernel).

    x [..., D] -> [..., dim]
    """

    def __init__(self, dim: int, reg_lambda: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dim = dim
        self.dense = RandomlyConnectedDense(dim, density=1.0, reg_lambda=reg_lambda, name="dense")

    def call(self, x: tf.Tensor) -> tf.Tensor:
        return self.dense(x)
