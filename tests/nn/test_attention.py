"""The NumPy attention shared by DIET's and BERT's inference, against a loop over every query."""

from __future__ import annotations

import numpy as np
import pytest

from nlu_engine.nn.attention import (
    NEG_INF,
    attention,
    mask_bias,
    merge_heads,
    relative_positions,
    split_qkv,
)


def reference(q, k, v, allowed, key_rel=None, value_rel=None, max_rel=0, unidirectional=False):
    """One head, one query at a time: softmax over the allowed keys of
    (q_i . (k_j + a^K_ij)) / sqrt(d), summed over v_j + a^V_ij (Shaw et al.)."""
    batch, heads, length, depth = q.shape
    out = np.zeros_like(q, dtype=np.float64)
    for b in range(batch):
        for h in range(heads):
            for i in range(length):
                logits = np.full(length, -np.inf)
                values = []
                for j in range(length):
                    distance = min(max(j - i, -max_rel), 0 if unidirectional else max_rel) + max_rel
                    key = k[b, h, j] + (key_rel[h, distance] if key_rel is not None else 0)
                    values.append(v[b, h, j] + (value_rel[h, distance] if value_rel is not None else 0))
                    if allowed[b, i, j]:
                        logits[j] = q[b, h, i] @ key / np.sqrt(depth)
                weights = np.exp(logits - logits.max())
                out[b, h, i] = (weights / weights.sum()) @ np.array(values)
    return out


@pytest.mark.parametrize("unidirectional", [False, True])
@pytest.mark.parametrize("relative", [False, True])
def test_attention_matches_the_reference(relative: bool, unidirectional: bool) -> None:
    rng = np.random.default_rng(0)
    batch, heads, length, depth, max_rel = 2, 3, 6, 4, 2
    q, k, v = (rng.normal(size=(batch, heads, length, depth)).astype(np.float32) for _ in range(3))
    mask = np.ones((batch, length), np.float32)
    mask[1, 4:] = 0  # the second sequence has 4 real positions
    table = max_rel + 1 if unidirectional else 2 * max_rel + 1
    key_rel = value_rel = index = None
    if relative:
        key_rel, value_rel = (rng.normal(size=(heads, table, depth)).astype(np.float32) for _ in range(2))
        index = relative_positions(length, max_rel, unidirectional)
    got = attention(q, k, v, mask_bias(mask, causal=unidirectional), key_rel, value_rel, index)

    allowed = np.broadcast_to(mask[:, None, :] > 0, (batch, length, length))
    if unidirectional:
        allowed = allowed & np.tril(np.ones((length, length), bool))[None]
    expected = reference(q, k, v, allowed, key_rel, value_rel, max_rel, unidirectional)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_relative_positions_clip_the_distance() -> None:
    np.testing.assert_array_equal(
        relative_positions(4, 2),
        [[2, 3, 4, 4], [1, 2, 3, 4], [0, 1, 2, 3], [0, 0, 1, 2]],  # j - i, clipped to [-2, 2], + 2
    )
    np.testing.assert_array_equal(
        relative_positions(3, 1, unidirectional=True), [[1, 1, 1], [0, 1, 1], [0, 0, 1]]  # to [-1, 0]
    )


def test_mask_bias_blocks_padding_and_with_causal_the_future() -> None:
    mask = np.array([[1, 1, 0]])
    assert mask_bias(mask).shape == (1, 1, 1, 3)
    np.testing.assert_array_equal(mask_bias(mask)[0, 0, 0], np.float32([0, 0, NEG_INF]))
    causal = mask_bias(mask, causal=True)[0, 0]  # [L, L]
    blocked = [[False, True, True], [False, False, True], [False, False, True]]  # future, padding
    np.testing.assert_array_equal(causal < 0, blocked)


def test_split_and_merge_heads_are_inverse_views() -> None:
    qkv = np.arange(2 * 5 * 12, dtype=np.float32).reshape(2, 5, 12)  # U = 4, 2 heads of depth 2
    query, key, value = split_qkv(qkv, heads=2)
    assert query.shape == (2, 2, 5, 2) and np.shares_memory(query, qkv)
    np.testing.assert_array_equal(merge_heads(query), qkv[..., :4])
    np.testing.assert_array_equal(merge_heads(value), qkv[..., 8:])
    np.testing.assert_array_equal(key[1, 1, 3], qkv[1, 3, 6:8])  # batch 1, head 1, position 3
