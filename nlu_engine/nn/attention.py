"""The inputs DIET's attention graph reads beside its features: the mask's bias and the clipped
relative distances (``classifiers/diet/onnx_graph.py`` computes the attention itself).

Shapes: B batch, L length, R the largest distance told apart. The relative terms are Shaw et
al.'s, as DIET's TensorFlow transformer (``classifiers/diet/transformer.py``) trains them.
"""

from __future__ import annotations

import numpy as np

#: added to the logits of a position that may not be attended to (padding, the future)
NEG_INF = -1e9


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
