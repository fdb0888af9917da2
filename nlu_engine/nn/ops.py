"""Float32 NumPy gelu, for DIET's small dense heads (``classifiers/diet/inference.py``)."""

from __future__ import annotations

import numpy as np

_F = np.float32
#: Abramowitz & Stegun 7.1.26: erf(z) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2),
#: t = 1 / (1 + p z) for z >= 0 (absolute error < 1.5e-7, below float32's own rounding here);
#: faster than ``scipy.special.erf``, which works in float64
_P = _F(0.3275911)
_A = (_F(0.254829592), _F(-0.284496736), _F(1.421413741), _F(-1.453152027), _F(1.061405429))
#: elements per block of ``gelu``: its scratch arrays stay in the core's cache
_GELU_BLOCK = 16384


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) gelu, as ``keras.activations.gelu``'s default and BERT's "gelu":
    0.5 x (1 + erf(x / sqrt 2)), float32 in and out.

    erf is A&S 7.1.26 (above), computed in place on blocks of ``_GELU_BLOCK`` elements: on a
    batch's (B*T, 1536) activations, one whole-array pass per operation went to memory a dozen
    times and took three times as long.
    """
    flat = np.ascontiguousarray(x, dtype=_F).reshape(-1)
    out = np.empty_like(flat)
    block = min(_GELU_BLOCK, max(flat.size, 1))
    z_buf, t_buf, p_buf = (np.empty(block, _F) for _ in range(3))
    for start in range(0, flat.size, block):
        v = flat[start : start + block]
        n = v.size
        z, t, p = z_buf[:n], t_buf[:n], p_buf[:n]
        np.multiply(v, _F(1.0 / np.sqrt(2.0)), out=z)
        np.abs(z, out=z)  # |z|
        np.multiply(z, _P, out=t)
        t += _F(1.0)
        np.divide(_F(1.0), t, out=t)  # t = 1 / (1 + p |z|)
        np.multiply(t, _A[4], out=p)
        for a in (_A[3], _A[2], _A[1]):
            p += a
            p *= t
        p += _A[0]
        p *= t  # the polynomial
        np.multiply(z, z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)
        p *= z  # poly exp(-z^2)
        np.subtract(_F(1.0), p, out=p)
        np.copysign(p, v, out=p)  # erf(x / sqrt 2)
        p += _F(1.0)
        p *= v
        np.multiply(p, _F(0.5), out=out[start : start + n])
    return out.reshape(x.shape)
