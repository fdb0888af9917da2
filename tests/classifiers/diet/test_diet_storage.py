"""DIET's storage format (storage.py): how the weights are rounded for the archive."""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers.diet.storage import dequantize_rows, quantize_rows


def test_int8_rows_round_trip_within_half_a_step() -> None:
    rng = np.random.default_rng(1)
    weights = rng.normal(0, 0.05, (300, 16)).astype(np.float32)
    weights[7] = 0.0  # an all-zero row (an n-gram never trained) stays zero
    q, scale = quantize_rows(weights)
    assert q.dtype == np.int8 and scale.shape == (300,)
    restored = dequantize_rows(q, scale)
    assert np.all(np.abs(restored - weights) <= scale[:, None] / 2 + 1e-7)
    assert not restored[7].any()
    # quantizing what was restored gives the same integers: saving again changes nothing
    q2, scale2 = quantize_rows(restored)
    np.testing.assert_array_equal(q2, q)
    np.testing.assert_allclose(scale2, scale, rtol=1e-6)
