"""A BERT encoder's forward pass in TensorFlow: the reference its parse graph (``bert_onnx``) is
checked against, in float32 and with bfloat16 dense layers (what ``precision: bfloat16`` ran)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from nlu_engine.featurizers.dense.bert import BertEncoder


def tensorflow_bert(encoder: BertEncoder, ids: np.ndarray, mask: np.ndarray, bfloat16: bool = False,
                    layers: int | None = None) -> np.ndarray:
    """(B, T) ids and mask -> (B, T, H) hidden states after ``layers`` layers (all by default)."""
    cfg = encoder.config
    eps, heads, hidden = cfg.layer_norm_eps, cfg.num_attention_heads, cfg.hidden_size
    head_dim, batch, length = hidden // heads, ids.shape[0], ids.shape[1]
    dtype = tf.bfloat16 if bfloat16 else tf.float32

    def layer_norm(x: tf.Tensor, params: tuple[np.ndarray, np.ndarray]) -> tf.Tensor:
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + eps) * params[0] + params[1]

    def dense(x: tf.Tensor, w: np.ndarray, b: np.ndarray) -> tf.Tensor:  # w (out, in) as stored
        product = tf.matmul(tf.cast(x, dtype), tf.cast(w, dtype), transpose_b=True)
        return tf.cast(product, tf.float32) + b

    def act(x: tf.Tensor) -> tf.Tensor:
        if cfg.hidden_act == "relu":
            return tf.nn.relu(x)
        return tf.nn.gelu(x, approximate=cfg.hidden_act != "gelu")

    def split_heads(t: tf.Tensor) -> tf.Tensor:  # (B*T, H) -> (B, h, T, d)
        return tf.transpose(tf.reshape(t, [batch, length, heads, head_dim]), [0, 2, 1, 3])

    x = tf.gather(encoder.word, ids) + encoder.position[None, :length] + encoder.token_type[0]
    x = tf.reshape(layer_norm(x, encoder.emb_ln), [-1, hidden])
    bias = (1.0 - tf.cast(mask, tf.float32))[:, None, None, :] * -1e9
    for layer in encoder.layers[: len(encoder.layers) if layers is None else layers]:
        q, k, v = tf.split(dense(x, layer["qkv_w"], layer["qkv_b"]), 3, axis=-1)
        scores = tf.matmul(split_heads(q), split_heads(k), transpose_b=True) / np.sqrt(head_dim)
        context = tf.matmul(tf.nn.softmax(scores + bias, axis=-1), split_heads(v))
        context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, hidden])
        x = layer_norm(x + dense(context, layer["o_w"], layer["o_b"]), layer["ln1"])
        inner = act(dense(x, layer["i_w"], layer["i_b"]))
        x = layer_norm(x + dense(inner, layer["out_w"], layer["out_b"]), layer["ln2"])
    return tf.reshape(x, [batch, length, hidden]).numpy()  # type: ignore[no-any-return]
