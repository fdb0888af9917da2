"""How DIET's weights are rounded for the archive: the sparse input tables as int8 with one
scale per row, everything else at float16 precision."""

from __future__ import annotations

import numpy as np


def quantize_rows(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per row: weights [V, U] -> (q [V, U] int8, scale [V] float32), with
    weights ~= q * scale[:, None] and an error of at most half a step (max |row| / 254)."""
    scale = np.empty(len(weights), np.float32)  # [V]
    q = np.empty(weights.shape, np.int8)
    for start in range(0, len(weights), 8192):  # in slices: no full-size float temporaries
        rows = weights[start : start + 8192]
        part = (np.abs(rows).max(axis=1) / 127.0).astype(np.float32)
        safe = np.where(part > 0, part, 1.0)[:, None]
        q[start : start + 8192] = np.clip(np.rint(rows / safe), -127, 127)
        scale[start : start + 8192] = part
    return q, scale


def dequantize_rows(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    weights = q.astype(np.float32)  # [V, U]
    weights *= scale[:, None]
    return weights


def half_precision(weights: np.ndarray) -> np.ndarray:
    """float32 values rounded to float16 precision (other dtypes unchanged)."""
    if weights.dtype != np.float32:
        return weights
    return weights.astype(np.float16).astype(np.float32)
