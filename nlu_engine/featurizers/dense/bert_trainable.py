"""The top of a BERT encoder as a trainable Keras layer, for fine-tuning inside another network.

``LanguageModelFeaturizer.build()`` hands this layer to the component that fine-tunes the
encoder (DIET). It holds the pretrained weights of the layers that train and computes, from
what lies below them, the featurizer's token and sentence features::

    inputs (one row per sub-token, padded to S; B examples, T words, H hidden size):
      states  (B, S, H)  hidden states below the trainable layers, computed once (frozen), or
      ids     (B, S)     sub-token ids, when every layer and the embeddings train
      mask    (B, S)     1 for a real sub-token ([CLS] and [SEP] included)
      word    (B, S)     the word (token) a sub-token belongs to (0 where weight is 0)
      weight  (B, S)     its share in that word's vector: 1/count (mean) or 1 on the first
    x = LN(word[ids] + position + token_type[0]), dropout    (only when the embeddings train)
    for each trainable layer (post-LN, as BertEncoder):
        x = LN(x + dropout(attention(x) W_o + b_o))
        x = LN(x + dropout(act(x W_i + b_i) W_out + b_out))  (dropout on the attention too)
    sequence (B, T, H) = per word, the weighted sum of its sub-tokens' states
    sentence (B, H)    = [CLS], mean or max over the real sub-tokens (+ L2 normalisation)

``compute_dtype="bfloat16"`` runs the matrix products (the dense layers' and attention's) on
bfloat16 inputs: the weights stay float32 (the optimizer's master copy), each product rounds its
operands and the result returns to float32, so LayerNorm, softmax, gelu, the residual sums and
the gradients' accumulation stay float32. It is fast only where oneDNN runs the products on the
CPU's bfloat16 instructions (``nn/tensorflow_runtime.py``).

With the pretrained weights and ``training=False`` the outputs are the frozen featurizer's
features. ``tuned_weights`` gives the trained weights back by their ``BertModel`` names (PyTorch
layout), the names ``bert.load_weights`` reads, so the NumPy encoder runs them at parse time.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from nlu_engine.featurizers.dense.bert import BertConfig

_QKV = ("query", "key", "value")


class TrainableBert(keras.layers.Layer):
    """Layers ``first..L-1`` of a BERT encoder (and its embeddings when ``first`` is None)."""

    def __init__(
        self,
        config: BertConfig,
        weights: dict[str, np.ndarray],
        first: int | None,
        dropout: float,
        sentence_pooling: str,
        normalize: bool,
        compute_dtype: str = "float32",
        **kwargs: Any,
    ) -> None:
        super().__init__(dtype="float32", **kwargs)
        if compute_dtype not in ("float32", "bfloat16"):
            raise ValueError(f"compute_dtype must be float32 or bfloat16, not {compute_dtype!r}")
        self.compute = tf.bfloat16 if compute_dtype == "bfloat16" else tf.float32
        self.cfg, self.dropout = config, float(dropout)
        self.sentence_pooling, self.normalize = sentence_pooling, normalize
        self.embeddings = first is None
        self.first = 0 if first is None else first
        self.heads = config.num_attention_heads
        self.head_dim = config.hidden_size // self.heads
        if self.embeddings:
            e = "embeddings."
            self.word = self._weight("word", weights[e + "word_embeddings.weight"])  # (V, H)
            self.position = self._weight("position", weights[e + "position_embeddings.weight"])
            self.token_type = self._weight("token_type", weights[e + "token_type_embeddings.weight"])
            self.emb_ln = (self._weight("emb_ln_gamma", weights[e + "LayerNorm.weight"]),
                           self._weight("emb_ln_beta", weights[e + "LayerNorm.bias"]))
        self.blocks = [self._block(i, weights) for i in range(self.first, config.num_hidden_layers)]
        self.built = True

    def _weight(self, name: str, value: np.ndarray) -> Any:
        variable = self.add_weight(name=name, shape=value.shape, initializer="zeros", dtype="float32")
        variable.assign(np.asarray(value, np.float32))
        return variable

    def _block(self, index: int, w: dict[str, np.ndarray]) -> dict[str, Any]:
        p, n = f"encoder.layer.{index}.", f"layer{index}_"
        a = p + "attention.self."
        return {
            "qkv_w": self._weight(n + "qkv_w", np.concatenate([w[f"{a}{q}.weight"].T for q in _QKV], 1)),
            "qkv_b": self._weight(n + "qkv_b", np.concatenate([w[f"{a}{q}.bias"] for q in _QKV])),
            "o_w": self._weight(n + "o_w", w[p + "attention.output.dense.weight"].T),  # (H, H)
            "o_b": self._weight(n + "o_b", w[p + "attention.output.dense.bias"]),
            "ln1_g": self._weight(n + "ln1_g", w[p + "attention.output.LayerNorm.weight"]),
            "ln1_b": self._weight(n + "ln1_b", w[p + "attention.output.LayerNorm.bias"]),
            "i_w": self._weight(n + "i_w", w[p + "intermediate.dense.weight"].T),  # (H, I)
            "i_b": self._weight(n + "i_b", w[p + "intermediate.dense.bias"]),
            "out_w": self._weight(n + "out_w", w[p + "output.dense.weight"].T),  # (I, H)
            "out_b": self._weight(n + "out_b", w[p + "output.dense.bias"]),
            "ln2_g": self._weight(n + "ln2_g", w[p + "output.LayerNorm.weight"]),
            "ln2_b": self._weight(n + "ln2_b", w[p + "output.LayerNorm.bias"]),
        }

    # --- the forward pass -----------------------------------------------------------------------
    def _matmul(self, a: Any, b: Any, transpose_b: bool = False) -> Any:
        """a @ b (or a @ b^T) in the compute dtype, returned in float32."""
        if self.compute == tf.float32:
            return tf.matmul(a, b, transpose_b=transpose_b)
        product = tf.matmul(tf.cast(a, self.compute), tf.cast(b, self.compute), transpose_b=transpose_b)
        return tf.cast(product, tf.float32)

    def _norm(self, x: Any, gamma: Any, beta: Any) -> Any:
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + self.cfg.layer_norm_eps) * gamma + beta

    def _drop(self, x: Any, training: bool) -> Any:
        return tf.nn.dropout(x, rate=self.dropout) if training and self.dropout > 0 else x

    def _act(self, x: Any) -> Any:
        if self.cfg.hidden_act == "relu":
            return tf.nn.relu(x)
        return tf.nn.gelu(x, approximate=self.cfg.hidden_act != "gelu")

    def _layer(self, b: dict[str, Any], x: Any, bias: Any, shape: tuple[Any, Any], training: bool) -> Any:
        """One post-LN BERT layer on x (B*S, H) -> (B*S, H). Dense layers multiply 2-D
        matrices: a 3-D input would make TensorFlow's kernel gradient a batch of products."""
        size, length = shape
        hidden = self.cfg.hidden_size

        def heads(t: Any) -> Any:  # (B*S, H) -> (B, h, S, d)
            return tf.transpose(tf.reshape(t, [size, length, self.heads, self.head_dim]), [0, 2, 1, 3])

        mm = self._matmul
        q, k, v = tf.split(mm(x, b["qkv_w"]) + b["qkv_b"], 3, axis=-1)  # 3 x (B*S, H)
        scores = mm(heads(q), heads(k), transpose_b=True) / np.sqrt(self.head_dim)  # (B, h, S, S)
        probs = self._drop(tf.nn.softmax(scores + bias, axis=-1), training)  # (B, h, S, S)
        context = tf.reshape(tf.transpose(mm(probs, heads(v)), [0, 2, 1, 3]), [-1, hidden])
        attended = self._drop(mm(context, b["o_w"]) + b["o_b"], training)
        x = self._norm(x + attended, b["ln1_g"], b["ln1_b"])
        inner = self._act(mm(x, b["i_w"]) + b["i_b"])  # (B*S, I)
        out = self._drop(mm(inner, b["out_w"]) + b["out_b"], training)
        return self._norm(x + out, b["ln2_g"], b["ln2_b"])

    def call(self, inputs: dict[str, Any], num_words: Any, training: bool = False) -> tuple[Any, Any]:
        """-> (sequence (B, T, H) with T = ``num_words``, sentence (B, H)); see the module doc."""
        mask = tf.cast(inputs["mask"], tf.float32)  # (B, S)
        if self.embeddings:
            ids = tf.cast(inputs["ids"], tf.int32)
            x = tf.gather(self.word, ids) + self.position[tf.newaxis, : tf.shape(ids)[1]] + self.token_type[0]
            x = self._drop(self._norm(x, *self.emb_ln), training)
        else:
            x = tf.cast(inputs["states"], tf.float32)  # (B, S, H)
        bias = (1.0 - mask)[:, tf.newaxis, tf.newaxis, :] * -1e9  # (B, 1, 1, S)
        shape = (tf.shape(x)[0], tf.shape(x)[1])
        hidden = self.cfg.hidden_size
        x = tf.reshape(x, [-1, hidden])  # (B*S, H)
        for block in self.blocks:
            x = self._layer(block, x, bias, shape, training)
        x = tf.reshape(x, [shape[0], shape[1], hidden])  # (B, S, H)
        return self._words(x, inputs, num_words), self._sentence(x, mask)

    def _words(self, x: Any, inputs: dict[str, Any], num_words: Any) -> Any:
        size, hidden = tf.shape(x)[0], self.cfg.hidden_size
        weight = tf.cast(inputs["weight"], tf.float32)[..., tf.newaxis]  # (B, S, 1)
        target = tf.range(size)[:, tf.newaxis] * num_words + tf.cast(inputs["word"], tf.int32)  # (B, S)
        summed = tf.math.unsorted_segment_sum(
            tf.reshape(x * weight, [-1, hidden]), tf.reshape(target, [-1]), size * num_words
        )  # (B*T, H)
        return tf.reshape(summed, [size, num_words, hidden])

    def _sentence(self, x: Any, mask: Any) -> Any:
        if self.sentence_pooling == "cls":
            sentence = x[:, 0]
        elif self.sentence_pooling == "max":
            sentence = tf.reduce_max(x + (1.0 - mask)[..., tf.newaxis] * -1e9, axis=1)
        else:
            sentence = tf.reduce_sum(x * mask[..., tf.newaxis], 1) / tf.reduce_sum(mask, 1, keepdims=True)
        if self.normalize:  # as x / max(|x|, 1e-12)
            sentence = tf.math.l2_normalize(sentence, axis=-1, epsilon=1e-24)
        return sentence

    # --- what the trainer and the featurizer read -----------------------------------------------
    def variable_groups(self) -> list[list[Any]]:
        """The trainable variables by depth, top layer first (the embeddings last), for
        layer-wise learning rates."""
        groups = [list(block.values()) for block in reversed(self.blocks)]
        if self.embeddings:
            groups.append([self.word, self.position, self.token_type, *self.emb_ln])
        return groups

    def tuned_weights(self) -> dict[str, np.ndarray]:
        """The trainable weights by their ``BertModel`` names, float32, PyTorch layout."""
        out: dict[str, np.ndarray] = {}
        hidden = self.cfg.hidden_size
        if self.embeddings:
            e = "embeddings."
            out[e + "word_embeddings.weight"] = np.asarray(self.word)
            out[e + "position_embeddings.weight"] = np.asarray(self.position)
            out[e + "token_type_embeddings.weight"] = np.asarray(self.token_type)
            out[e + "LayerNorm.weight"], out[e + "LayerNorm.bias"] = (np.asarray(v) for v in self.emb_ln)
        for index, b in zip(range(self.first, self.cfg.num_hidden_layers), self.blocks, strict=True):
            p = f"encoder.layer.{index}."
            qkv_w, qkv_b = np.asarray(b["qkv_w"]), np.asarray(b["qkv_b"])
            for j, name in enumerate(_QKV):
                out[f"{p}attention.self.{name}.weight"] = qkv_w[:, j * hidden : (j + 1) * hidden].T
                out[f"{p}attention.self.{name}.bias"] = qkv_b[j * hidden : (j + 1) * hidden]
            for key, name, transpose in (
                ("o_w", "attention.output.dense.weight", True), ("o_b", "attention.output.dense.bias", False),
                ("ln1_g", "attention.output.LayerNorm.weight", False),
                ("ln1_b", "attention.output.LayerNorm.bias", False),
                ("i_w", "intermediate.dense.weight", True), ("i_b", "intermediate.dense.bias", False),
                ("out_w", "output.dense.weight", True), ("out_b", "output.dense.bias", False),
                ("ln2_g", "output.LayerNorm.weight", False), ("ln2_b", "output.LayerNorm.bias", False),
            ):
                value = np.asarray(b[key])
                out[p + name] = value.T if transpose else value
        return {name: np.ascontiguousarray(value, np.float32) for name, value in out.items()}
