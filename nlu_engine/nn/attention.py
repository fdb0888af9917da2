"""Multi-head self-attention in float32 NumPy: the one used by DIET's and BERT's inference.

The callers project their inputs (each with its own weights and layout) and hand over the
query, key and value heads; this module does the rest::

    qkv [B, L, 3U] ─► split_qkv ─► q, k, v [B, H, L, d]
    logits = q kᵀ (+ q · key-relative embedding of each clipped distance)     [B, H, L, L]
    weights = softmax(logits / sqrt(d) + mask_bias)                            [B, H, L, L]
    attended = weights v (+ attention mass per distance · value-relative embedding)
    ─► merge_heads ─► [B, L, U]

Shapes: B batch, L length, U units, H heads, d = U / H depth, Kr relative table rows (2R + 1,
or R + 1 when unidirectional; R the largest distance told apart). The relative terms are
Shaw et al.'s, as DIET's TensorFlow transformer (``classifiers/diet/transformer.py``) trains
them.
"""

from __future__ import annotations

import numpy as np

#: added to the logits of a position that may not be attended to (padding, the future)
NEG_INF = -1e9


def split_qkv(qkv: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The query, key and value heads [B, H, L, d] of their side-by-side projection [B, L, 3U]
    (views, no copy)."""
    size, length, width = qkv.shape
    depth = width // (3 * heads)
    split = qkv.reshape(size, length, 3, heads, depth).transpose(2, 0, 3, 1, 4)  # [3, B, H, L, d]
    return split[0], split[1], split[2]


def merge_heads(x: np.ndarray) -> np.ndarray:
    """[B, H, L, d] -> [B, L, H * d]."""
    size, heads, length, depth = x.shape
    return x.transpose(0, 2, 1, 3).reshape(size, length, heads * depth)


def mask_bias(mask: np.ndarray, causal: bool = False) -> np.ndarray:
    """What the logits get added: 0 where a query may attend, ``NEG_INF`` where not.

    mask [B, L] (1 = real position, 0 = padding) -> [B, 1, 1, L]; with ``causal`` also no
    future keys -> [B, 1, L, L].
    """
    blocked = (1.0 - mask.astype(np.float32))[:, None, None, :]  # [B, 1, 1, L]
    if causal:
        length = mask.shape[1]
        future = np.triu(np.ones((length, length), np.float32), 1)  # [L, L]
        blocked = np.minimum(1.0, blocked + future[None, None])  # [B, 1, L, L]
    return blocked * np.float32(NEG_INF)


def relative_positions(length: int, max_relative: int, unidirectional: bool = False) -> np.ndarray:
    """[L, L]: the row of the relative tables for query i and key j, the distance j - i clipped
    to [-R, R] (to [-R, 0] when unidirectional) and shifted to start at 0."""
    positions = np.arange(length)
    right = 0 if unidirectional else max_relative
    index = np.clip(positions[None, :] - positions[:, None], -max_relative, right)
    return index + max_relative


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis (x is overwritten)."""
    x -= x.max(-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(-1, keepdims=True)
    return x


def attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    bias: np.ndarray,
    key_relative: np.ndarray | None = None,
    value_relative: np.ndarray | None = None,
    relative_index: np.ndarray | None = None,
) -> np.ndarray:
    """Scaled dot-product attention of every head: query, key, value [B, H, L, d] -> [B, H, L, d].

    ``bias`` [B, 1, L|1, L] is added to the scaled logits (``mask_bias``). ``key_relative`` and
    ``value_relative`` [H, Kr, d] are relative-position tables, indexed by ``relative_index``
    [L, L] (``relative_positions``).
    """
    depth = query.shape[-1]
    logits = query @ key.transpose(0, 1, 3, 2)  # [B, H, L, L]
    if key_relative is not None:
        by_distance = np.einsum("bhid,hkd->bhik", query, key_relative)  # [B, H, L, Kr]
        rows = np.arange(query.shape[2])[:, None]  # [L, 1]
        logits = logits + by_distance[:, :, rows, relative_index]  # [B, H, L, L]
    weights = softmax(logits * np.float32(depth**-0.5) + bias)  # [B, H, L, L]
    attended = weights @ value  # [B, H, L, d]
    if value_relative is not None:
        one_hot = np.eye(value_relative.shape[1], dtype=np.float32)[relative_index]  # [L, L, Kr]
        per_distance = np.einsum("bhij,ijk->bhik", weights, one_hot)  # [B, H, L, Kr]
        attended = attended + np.einsum("bhik,hkd->bhid", per_distance, value_relative)
    return attended
