"""Float32 NumPy building blocks shared by the NumPy forward passes (DIET's inference, the
language model's encoder)."""

from __future__ import annotations

import numpy as np


def erf(x: np.ndarray) -> np.ndarray:
    """erf in float32 (Abramowitz & Stegun 7.1.26: absolute error < 1.5e-7, below float32's
    own rounding here); faster than ``scipy.special.erf``, which works in float64."""
    a = np.abs(x)
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * a)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    return np.copysign(np.float32(1.0) - poly * np.exp(-a * a), x)


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) gelu, as ``keras.activations.gelu``'s default and BERT's "gelu"."""
    return np.float32(0.5) * x * (np.float32(1.0) + erf(x * np.float32(1.0 / np.sqrt(2.0))))


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta."""
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta
