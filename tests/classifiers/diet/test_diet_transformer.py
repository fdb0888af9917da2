"""Transformer encoder: shapes, masking, causality, relative attention, determinism."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from nlu_engine.classifiers.diet.transformer import TransformerEncoder

B, L, D_IN, UNITS, HEADS = 3, 7, 10, 16, 2
LENGTHS = np.array([7, 4, 1])
PAD_MASK = (np.arange(L)[None, :] < LENGTHS[:, None]).astype(np.float32)  # [B, L]


def _encoder(seed: int = 0, **kwargs) -> TransformerEncoder:
    keras.utils.set_random_seed(seed)
    config = dict(num_layers=2, units=UNITS, num_heads=HEADS, reg_lambda=0.01, dropout_rate=0.1)
    config.update(kwargs)
    return TransformerEncoder(**config)


def _inputs(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(B, L, D_IN)).astype(np.float32)


@pytest.mark.parametrize(
    "relative",
    [
        {},
        {"use_key_relative_position": True, "use_value_relative_position": True},
        {"use_key_relative_position": True, "heads_share_relative_embedding": True},
        {"use_value_relative_position": True, "unidirectional": True, "max_relative_position": 2},
    ],
)
def test_shapes_and_relative_attention(relative: dict) -> None:
    encoder = _encoder(**relative, attention_dropout_rate=0.1)
    out, weights = encoder(_inputs(), PAD_MASK, training=True, return_attention_weights=True)
    assert out.shape == (B, L, UNITS)
    assert weights.shape == (B, 2, HEADS, L, L)
    np.testing.assert_allclose(weights.numpy().sum(-1), 1.0, rtol=1e-5)
    assert len(encoder.losses) == 1  # only the input projection carries L2
    names = [w.name for w in encoder.trainable_weights]
    for kind in ("key", "value"):
        if relative.get(f"use_{kind}_relative_position"):
            table = [w for w in encoder.trainable_weights if w.name == f"{kind}_relative_embeddings"]
            r = relative.get("max_relative_position", 5)
            size = r + 1 if relative.get("unidirectional") else 2 * r + 1
            shared = relative.get("heads_share_relative_embedding")
            assert table[0].shape == ((size, UNITS // HEADS) if shared else (HEADS, size, 8))
        else:
            assert f"{kind}_relative_embeddings" not in names


@pytest.mark.parametrize("relative", [False, True])
def test_padding_does_not_leak_into_real_positions(relative: bool) -> None:
    encoder = _encoder(use_key_relative_position=relative, use_value_relative_position=relative)
    x = _inputs()
    noise = np.random.default_rng(1).normal(scale=10.0, size=x.shape).astype(np.float32)
    x_noisy = np.where(PAD_MASK[..., None] > 0, x, noise)
    out = encoder(x, PAD_MASK).numpy()
    out_noisy = encoder(x_noisy, PAD_MASK).numpy()
    real = PAD_MASK > 0
    np.testing.assert_allclose(out[real], out_noisy[real], atol=1e-5)
    _, weights = encoder(x, PAD_MASK, return_attention_weights=True)
    assert np.abs(weights.numpy() * (1 - PAD_MASK)[:, None, None, None, :]).max() < 1e-6


def test_unidirectional_output_ignores_the_future() -> None:
    encoder = _encoder(unidirectional=True, use_key_relative_position=True, use_value_relative_position=True)
    x = _inputs()
    full = np.ones((B, L), np.float32)
    out = encoder(x, full).numpy()
    for t in (0, 3, L - 2):
        changed = x.copy()
        changed[:, t + 1 :] += 5.0
        out_changed = encoder(changed, full).numpy()
        np.testing.assert_allclose(out[:, : t + 1], out_changed[:, : t + 1], atol=1e-5)
        assert not np.allclose(out[:, t + 1 :], out_changed[:, t + 1 :])

    bidirectional = _encoder()
    changed = x.copy()
    changed[:, -1] += 5.0
    assert not np.allclose(bidirectional(x, full).numpy()[:, 0], bidirectional(changed, full)[:, 0])


def test_seeded_determinism_and_dropout() -> None:
    x = _inputs()
    kwargs = dict(use_key_relative_position=True, attention_dropout_rate=0.2)
    first = _encoder(seed=5, **kwargs)
    second = _encoder(seed=5, **kwargs)  # random draws happen at construction, not build
    np.testing.assert_array_equal(first(x, PAD_MASK).numpy(), second(x, PAD_MASK).numpy())
    assert len(first.weights) == len(second.weights) > 0
    for a, b in zip(first.weights, second.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(
        first(x, PAD_MASK, training=True).numpy(), second(x, PAD_MASK, training=True).numpy()
    )
    # inference is deterministic, training applies dropout
    np.testing.assert_array_equal(first(x, PAD_MASK).numpy(), first(x, PAD_MASK).numpy())
    assert not np.allclose(first(x, PAD_MASK, training=True), first(x, PAD_MASK))
    other = _encoder(seed=6, **kwargs)
    assert not np.allclose(other(x, PAD_MASK), first(x, PAD_MASK))


def test_graph_mode_gradients_and_zero_layers() -> None:
    encoder = _encoder(use_key_relative_position=True, use_value_relative_position=True)
    spec = [tf.TensorSpec([None, None, D_IN]), tf.TensorSpec([None, None])]

    @tf.function(input_signature=spec)
    def step(x, mask):
        with tf.GradientTape() as tape:
            out = encoder(x, mask, training=True)
            loss = tf.reduce_sum(out**2 * mask[..., None])
        return tape.gradient(loss, encoder.trainable_variables)

    grads = step(_inputs(), PAD_MASK)
    assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
    short = step(_inputs()[:2, :3], PAD_MASK[:2, :3])  # other B and L, same graph
    assert len(short) == len(grads)

    empty = _encoder(num_layers=0)
    out, weights = empty(_inputs(), PAD_MASK, return_attention_weights=True)
    assert out.shape == (B, L, UNITS) and weights.shape[1] == 0


class _Wrapper(keras.Model):
    def __init__(self, seed: int) -> None:
        super().__init__()
        self.encoder = _encoder(seed=seed, use_key_relative_position=True)

    def call(self, x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        return self.encoder(x, mask)


def test_weights_file_round_trip_restores_masks(tmp_path) -> None:
    x = _inputs()
    saved = _Wrapper(seed=0)
    expected = saved(x, PAD_MASK).numpy()
    saved.save_weights(tmp_path / "encoder.weights.h5")

    loaded = _Wrapper(seed=1)  # different masks and weights until loaded
    loaded(x, PAD_MASK)
    assert not np.allclose(loaded(x, PAD_MASK).numpy(), expected)
    loaded.load_weights(tmp_path / "encoder.weights.h5")
    np.testing.assert_allclose(loaded(x, PAD_MASK).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_attention_dropout_keeps_masking_in_training() -> None:
    encoder = _encoder(unidirectional=True, attention_dropout_rate=0.9, dropout_rate=0.0)
    _, weights = encoder(_inputs(), PAD_MASK, training=True, return_attention_weights=True)
    weights = weights.numpy()  # [B, layers, H, L, L]
    real_queries = PAD_MASK[:, None, None, :, None] > 0
    future = np.triu(np.ones((L, L)), k=1)[None, None, None]
    padded_keys = (1 - PAD_MASK)[:, None, None, None, :]
    forbidden = np.maximum(future, padded_keys) * real_queries
    assert np.abs(weights * forbidden).max() < 1e-6


@pytest.mark.parametrize("unidirectional", [False, True])
def test_relative_attention_equals_the_textbook_formula(unidirectional: bool) -> None:
    """Shaw et al.: logits_ij = q_i.k_j + q_i.a^K_ij, out_i = sum_j w_ij (v_j + a^V_ij), with
    a_ij the embedding of clip(j - i, -R, R), computed here naively with an [L, L, d] table."""
    from nlu_engine.classifiers.diet.transformer import MultiHeadAttention

    keras.utils.set_random_seed(3)
    units, heads, radius, length = 8, 2, 2, 6
    layer = MultiHeadAttention(
        units, heads, density=1.0, unidirectional=unidirectional, use_key_relative_position=True,
        use_value_relative_position=True, max_relative_position=radius,
    )
    x = tf.random.normal((2, length, units))
    mask = tf.zeros((1, 1, 1, length))
    if unidirectional:
        mask = 1.0 - tf.linalg.band_part(tf.ones((length, length)), -1, 0)[None, None]
    out, _ = layer(x, mask)

    def split(t: np.ndarray) -> np.ndarray:  # [B, L, D] -> [B, H, L, d]
        return t.reshape(2, length, heads, units // heads).transpose(0, 2, 1, 3)

    q = split(layer.query(x).numpy())
    k = split(layer.key(x).numpy())
    v = split(layer.value(x).numpy())
    distance = np.arange(length)[None, :] - np.arange(length)[:, None]
    index = np.clip(distance, -radius, 0 if unidirectional else radius) + radius
    rel_k = layer.key_relative_embeddings.numpy()[:, index]  # [H, L, L, d]
    rel_v = layer.value_relative_embeddings.numpy()[:, index]
    logits = np.einsum("bhid,bhjd->bhij", q, k) + np.einsum("bhid,hijd->bhij", q, rel_k)
    logits = logits / np.sqrt(units // heads) + mask.numpy() * -1e9
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    attended = np.einsum("bhij,bhjd->bhid", weights, v) + np.einsum("bhij,hijd->bhid", weights, rel_v)
    expected = layer.output_dense(attended.transpose(0, 2, 1, 3).reshape(2, length, units)).numpy()
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-5)
