"""The combiner's weights: a weighted geometric mean of its members' probabilities, stacked.

The combination is ``softmax(sum_m w_m log p_m)`` (:func:`combine`), with ``w_m`` in
``[0, MAX_WEIGHT]`` fitted by likelihood on the examples every member predicted held out
(:func:`likeliest_weights`, on the held-out predictions ``held_out.py`` makes). When one member
alone predicts those examples more accurately than the combination beyond chance (a sign test on
the examples only one of them gets right, :func:`surely_better`), that member alone is kept, so
the whole is not worse than its best part where that can be measured (:func:`fit_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: the largest weight of a member's log probabilities
MAX_WEIGHT = 20.0


def combine(probabilities: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """``softmax(sum_m w_m log p_m)`` [B, N] of the members' probabilities [B, N] each."""
    z = np.zeros_like(probabilities[0], dtype=np.float64)
    for weight, p in zip(weights, probabilities, strict=True):
        z += weight * np.log(np.maximum(p, 1e-12))
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def fit_weights(held: list[np.ndarray], targets: np.ndarray) -> tuple[list[float], dict[str, Any]] | None:
    """The members' weights, by likelihood on their held-out predictions [H, N] each against
    ``targets`` [H]; the best member alone when it is surely better than the combination. Returns
    them and what the fit saw (``held_out``, ``combined_accuracy``, ``members_accuracy``: a list,
    one a member); None when there is nothing to fit (one member, or fewer than two examples)."""
    if len(targets) < 2 or len(held) == 1:
        return None
    logs = np.stack([np.log(np.maximum(p, 1e-12)) for p in held])  # [K, H, N]
    weights = likeliest_weights(logs, targets)
    combined = np.tensordot(weights, logs, axes=1).argmax(axis=1) == targets  # [H]
    right = [p.argmax(axis=1) == targets for p in held]
    alone = [(float(r.mean()), k) for k, r in enumerate(right)]
    k = max(alone)[1]
    if surely_better(right[k], combined):
        weights = np.zeros(len(held))
        weights[k] = likeliest_weights(logs[k : k + 1], targets)[0]
    return ([float(w) for w in weights],
            {"held_out": len(targets), "combined_accuracy": float(combined.mean()),
             "members_accuracy": [a for a, _ in alone]})


def equal_weights(members: int) -> list[float]:
    """What members weigh when nothing can be fitted: the same, summing to one."""
    return [1.0 / members if members > 1 else 1.0] * members


def surely_better(one: np.ndarray, other: np.ndarray) -> bool:
    """Whether predictions right where ``one`` [H] says are more accurate than ``other``'s [H]
    beyond chance: of the examples only one of them gets right, ``one`` gets more than half by
    over two standard deviations (a sign test). A difference of one or two examples in a few
    hundred says nothing about which is better on new messages."""
    wins, losses = int((one & ~other).sum()), int((other & ~one).sum())
    return wins - losses > 2.0 * np.sqrt(max(wins + losses, 1))


def likeliest_weights(logs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Weights [K] in [0, MAX_WEIGHT] maximising the likelihood of ``targets`` [H] under
    ``softmax(sum_k w_k logs_k)``, from the members' log probabilities [K, H, N] (L-BFGS-B with
    the exact gradient)."""
    from scipy.optimize import minimize

    rows = np.arange(len(targets))

    def nll(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = np.tensordot(w, logs, axes=1)  # [H, N]
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        p = e / e.sum(axis=1, keepdims=True)
        value = float(np.mean(np.log(e.sum(axis=1)) - z[rows, targets]))
        # d/dw_k: mean over rows of (E_p[logs_k] - logs_k[target])
        grad = np.einsum("khn,hn->k", logs, p) / len(rows) - logs[:, rows, targets].mean(axis=1)
        return value, grad

    start = np.ones(len(logs))
    result = minimize(nll, start, jac=True, method="L-BFGS-B", bounds=[(0.0, MAX_WEIGHT)] * len(logs))
    return np.asarray(result.x, np.float64)
