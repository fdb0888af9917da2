"""DIET's transformer encoder (pre-LayerNorm, optional Shaw-style relative attention).

Follows Rasa's ``rasa/utils/tensorflow/transformer.py``: a RandomlyConnectedDense input
projection, x sqrt(units), absolute sinusoidal positions (always added), dropout, then
``num_layers`` blocks ``x += Drop(MHA(LN(x)))``, ``x += Drop(Dense(Drop(Dense_gelu(LN(x)))))``
and a final LayerNorm. Only the input projection carries L2, as in Rasa.

Relative positions are gathered directly: an [L, L] matrix of clipped distances j - i indexes
the embedding tables, giving [.., L, L, depth] tensors that are contracted with einsum (instead
of tensor2tensor's pad-and-slide reshapes).

Shapes: B batch, L length, D units, H heads, d = D / H depth, R max_relative_position.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from nlu_engine.classifiers.diet.layers import Dropout, RandomlyConnectedDense, gelu

_NEG_INF = -1e9


class MultiHeadAttention(keras.layers.Layer):
    """Self-attention: Q/K/V without bias, output projection with bias, all randomly connected."""

    def __init__(
        self,
        units: int,
        num_heads: int,
        attention_dropout_rate: float = 0.0,
        density: float = 0.2,
        unidirectional: bool = False,
        use_key_relative_position: bool = False,
        use_value_relative_position: bool = False,
        max_relative_position: int | None = 5,
        heads_share_relative_embedding: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if units % num_heads != 0:
            raise ValueError(f"transformer size {units} must be a multiple of {num_heads} heads")
        self.units, self.num_heads, self.depth = units, num_heads, units // num_heads
        self.attention_dropout_rate = attention_dropout_rate
        self.unidirectional = unidirectional
        self.share_relative = heads_share_relative_embedding
        self.max_relative_position = max_relative_position

        self.query = RandomlyConnectedDense(units, density, use_bias=False, name="query")
        self.key = RandomlyConnectedDense(units, density, use_bias=False, name="key")
        self.value = RandomlyConnectedDense(units, density, use_bias=False, name="value")
        self.output_dense = RandomlyConnectedDense(units, density, name="output")
        self.seed_generator = keras.random.SeedGenerator()  # attention dropout

        self.use_key_relative_position = use_key_relative_position
        self.use_value_relative_position = use_value_relative_position
        # initialisers (and so their seeds) are fixed at construction, like the Dense kernels'
        self._relative_initializers = [keras.initializers.GlorotUniform() for _ in range(2)]
        self.key_relative_embeddings: keras.Variable | None = None
        self.value_relative_embeddings: keras.Variable | None = None
        relative = use_key_relative_position or use_value_relative_position
        if relative and (not max_relative_position or max_relative_position < 1):
            raise ValueError("relative attention needs max_relative_position >= 1")

    def build(self, x_shape: tuple, attention_mask_shape: tuple | None = None) -> None:
        # distances -R..R (bidirectional) or -R..0 (unidirectional: no future keys)
        max_rel = self.max_relative_position or 0
        table = max_rel + 1 if self.unidirectional else 2 * max_rel + 1
        shape = (table, self.depth) if self.share_relative else (self.num_heads, table, self.depth)
        if self.use_key_relative_position:
            self.key_relative_embeddings = self.add_weight(
                name="key_relative_embeddings",
                shape=shape,
                initializer=self._relative_initializers[0],
            )
        if self.use_value_relative_position:
            self.value_relative_embeddings = self.add_weight(
                name="value_relative_embeddings",
                shape=shape,
                initializer=self._relative_initializers[1],
            )

    def _relative_buckets(self, length: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
        """One-hot clipped distance of key j from query i: [L, L, table] (table = 2R+1 or R+1).

        Relative attention then costs [B, H, L, table] per term instead of an [L, L, d] table
        of embeddings per head, so a long message does not need gigabytes.
        """
        positions = tf.range(length)
        distance = positions[None, :] - positions[:, None]  # [L, L] = j - i
        max_right = 0 if self.unidirectional else self.max_relative_position
        index = tf.clip_by_value(distance, -self.max_relative_position, max_right)
        index += self.max_relative_position  # [L, L] in [0, table)
        table = self.max_relative_position + 1 + max_right
        return tf.one_hot(index, table, dtype=dtype)  # [L, L, table]

    def _split_heads(self, x: tf.Tensor) -> tf.Tensor:
        batch, length = tf.shape(x)[0], tf.shape(x)[1]
        x = tf.reshape(x, (batch, length, self.num_heads, self.depth))  # [B, L, H, d]
        return tf.transpose(x, [0, 2, 1, 3])  # [B, H, L, d]

    def call(
        self, x: tf.Tensor, attention_mask: tf.Tensor, training: bool | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """x [B, L, D], attention_mask [B or 1, 1, L or 1, L] (1 = may NOT attend).

        Returns output [B, L, D] and attention weights [B, H, L, L].
        """
        length = tf.shape(x)[1]
        query = self._split_heads(self.query(x))  # [B, H, L, d]
        key = self._split_heads(self.key(x))  # [B, H, L, d]
        value = self._split_heads(self.value(x))  # [B, H, L, d]
        heads = "" if self.share_relative else "h"

        logits = tf.matmul(query, key, transpose_b=True)  # [B, H, L, L]
        buckets = None
        if self.key_relative_embeddings is not None or self.value_relative_embeddings is not None:
            buckets = self._relative_buckets(length, query.dtype)  # [L, L, Kr]
        if self.key_relative_embeddings is not None:
            # query . embedding of every clipped distance, then each key takes its distance's
            by_distance = tf.einsum(f"bhid,{heads}kd->bhik", query, self.key_relative_embeddings)
            logits += tf.einsum("bhik,ijk->bhij", by_distance, buckets)  # [B, H, L, L]
        logits = logits * tf.cast(self.depth**-0.5, logits.dtype) + attention_mask * _NEG_INF

        if training and self.attention_dropout_rate > 0:
            # Rasa drops attention *logits* (so weights still sum to 1); masked keys stay masked.
            # Unlike Rasa, a query never drops itself: with every allowed key dropped, all
            # logits would sit near -1e9 and the softmax would spread over padding / the future
            keep = keras.random.uniform(tf.shape(logits), seed=self.seed_generator, dtype=logits.dtype)
            dropped = tf.cast(keep + attention_mask < self.attention_dropout_rate, logits.dtype)
            not_self = 1.0 - tf.eye(length, dtype=logits.dtype)  # [L, L]
            logits += dropped * not_self * _NEG_INF

        weights = tf.nn.softmax(logits, axis=-1)  # [B, H, L, L]
        attended = tf.matmul(weights, value)  # [B, H, L, d]
        if self.value_relative_embeddings is not None:
            # attention mass per clipped distance, times that distance's value embedding
            per_distance = tf.einsum("bhij,ijk->bhik", weights, buckets)  # [B, H, L, Kr]
            attended += tf.einsum(
                f"bhik,{heads}kd->bhid", per_distance, self.value_relative_embeddings
            )  # [B, H, L, d]

        attended = tf.transpose(attended, [0, 2, 1, 3])  # [B, L, H, d]
        attended = tf.reshape(attended, (tf.shape(x)[0], length, self.units))  # [B, L, D]
        return self.output_dense(attended), weights


class TransformerEncoderLayer(keras.layers.Layer):
    """One pre-LayerNorm block: self-attention then a gelu feed-forward network."""

    def __init__(
        self,
        units: int,
        num_heads: int,
        filter_units: int,
        dropout_rate: float,
        density: float,
        attention_kwargs: dict,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.attention_norm = keras.layers.LayerNormalization(epsilon=1e-6)
        self.attention = MultiHeadAttention(units, num_heads, density=density, **attention_kwargs)
        self.attention_dropout = Dropout(dropout_rate)
        self.ffn_norm = keras.layers.LayerNormalization(epsilon=1e-6)
        self.ffn_in = RandomlyConnectedDense(
            filter_units, density, activation=gelu, name="ffn_in"
        )
        self.ffn_dropout = Dropout(dropout_rate)
        self.ffn_out = RandomlyConnectedDense(units, density, name="ffn_out")
        self.output_dropout = Dropout(dropout_rate)

    def call(
        self, x: tf.Tensor, attention_mask: tf.Tensor, training: bool | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """x [B, L, D] -> ([B, L, D], attention weights [B, H, L, L])."""
        attended, weights = self.attention(self.attention_norm(x), attention_mask, training=training)
        x = x + self.attention_dropout(attended, training=training)  # [B, L, D]

        hidden = self.ffn_in(self.ffn_norm(x))  # [B, L, filter_units]
        hidden = self.ffn_out(self.ffn_dropout(hidden, training=training))  # [B, L, D]
        return x + self.output_dropout(hidden, training=training), weights


class TransformerEncoder(keras.layers.Layer):
    """Stack of pre-LN transformer blocks over [B, L, D_in] inputs -> [B, L, units]."""

    def __init__(
        self,
        num_layers: int,
        units: int,
        num_heads: int,
        filter_units: int | None = None,
        reg_lambda: float = 0.0,
        dropout_rate: float = 0.1,
        density: float = 0.2,
        name: str | None = None,
        **attention_kwargs: Any,
    ) -> None:
        """``attention_kwargs``: :class:`MultiHeadAttention`'s options (dropout, direction,
        relative positions), passed on to every block's attention."""
        super().__init__(name=name)
        self.units = units
        self.unidirectional = bool(attention_kwargs.get("unidirectional", False))
        self.embedding = RandomlyConnectedDense(units, density, reg_lambda=reg_lambda, name="embedding")
        self.embedding_dropout = Dropout(dropout_rate)
        self.blocks = [
            TransformerEncoderLayer(
                units,
                num_heads,
                filter_units or 4 * units,
                dropout_rate,
                density,
                attention_kwargs,
                name=f"layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.output_norm = keras.layers.LayerNormalization(epsilon=1e-6)
        # angle rate per feature: 1 / 10000^(2 * (k // 2) / units)  [D]
        k = np.arange(units)
        self._angle_rates = (1.0 / np.power(10000.0, 2 * (k // 2) / units)).astype(np.float32)
        self._even_feature = k % 2 == 0  # sin on even features, cos on odd ones

    def positional_encoding(self, length: tf.Tensor) -> tf.Tensor:
        """Sinusoidal absolute positions [L, D]."""
        positions = tf.cast(tf.range(length), tf.float32)[:, None]  # [L, 1]
        angles = positions * self._angle_rates[None, :]  # [L, D]
        return tf.where(self._even_feature[None, :], tf.sin(angles), tf.cos(angles))

    def call(
        self,
        x: tf.Tensor,
        pad_mask: tf.Tensor,
        training: bool | None = None,
        return_attention_weights: bool = False,
    ) -> tf.Tensor | tuple[tf.Tensor, tf.Tensor]:
        """x [B, L, D_in], pad_mask [B, L] (1 = real token, 0 = padding) -> [B, L, units].

        With ``return_attention_weights`` also returns weights [B, num_layers, H, L, L].
        """
        length = tf.shape(x)[1]
        x = self.embedding(x)
        x = x * tf.cast(self.units**0.5, x.dtype)  # [B, L, D]
        x = x + tf.cast(self.positional_encoding(length), x.dtype)[None]  # [B, L, D]
        x = self.embedding_dropout(x, training=training)

        # 1 where attention is forbidden: padded keys, plus future keys if unidirectional
        attention_mask = 1.0 - tf.cast(pad_mask, x.dtype)[:, None, None, :]  # [B, 1, 1, L]
        if self.unidirectional:
            future = 1.0 - tf.linalg.band_part(tf.ones((length, length), x.dtype), -1, 0)  # [L, L]
            attention_mask = tf.minimum(1.0, attention_mask + future[None, None])  # [B,1,L,L]

        all_weights = []
        for block in self.blocks:
            x, weights = block(x, attention_mask, training=training)  # [B, L, D], [B,H,L,L]
            all_weights.append(weights)
        x = self.output_norm(x)  # [B, L, D]

        if not return_attention_weights:
            return x
        if not all_weights:  # no layers: an empty [B, 0, 1, L, L] tensor keeps the rank
            batch = tf.shape(x)[0]
            return x, tf.zeros((batch, 0, 1, length, length))
        return x, tf.stack(all_weights, axis=1)  # [B, num_layers, H, L, L]
