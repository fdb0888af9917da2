"""The attention graph's inputs: the mask's bias and the clipped relative distances."""

from __future__ import annotations

import numpy as np

from nlu_engine.nn.attention import NEG_INF, mask_bias, relative_positions


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
