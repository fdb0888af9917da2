"""libsvm's probabilities of a one-vs-one SVM, in NumPy (``sklearn_intent.SVMModel``).

For each pair of classes a Platt sigmoid of the pair's decision value (its parameters fitted by
``held_out.fit_sigmoid`` on cross-validated decisions), then pairwise coupling (Wu, Lin and Weng
2004, method 2), as ``SVC(probability=True)`` computes them.
"""

from __future__ import annotations

import numpy as np

MIN_PROBABILITY = 1e-7


def pairs(n_classes: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]


def sigmoid_predict(decisions: np.ndarray, a: float | np.ndarray, b: float | np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(A f + B))``, computed without overflow."""
    fApB = np.asarray(decisions, dtype=np.float64) * a + b
    e = np.exp(-np.abs(fApB))
    return np.where(fApB >= 0, e / (1.0 + e), 1.0 / (1.0 + e))


def pairwise_probabilities(
    decisions: np.ndarray, prob_a: np.ndarray, prob_b: np.ndarray, n_classes: int
) -> np.ndarray:
    """Class probabilities from one-vs-one decision values ``[n, n_pairs]``."""
    n = decisions.shape[0]
    pairwise = np.clip(sigmoid_predict(decisions, prob_a, prob_b), MIN_PROBABILITY, 1 - MIN_PROBABILITY)
    r = np.zeros((n, n_classes, n_classes))
    for p, (i, j) in enumerate(pairs(n_classes)):
        r[:, i, j] = pairwise[:, p]
        r[:, j, i] = 1.0 - pairwise[:, p]
    # scikit-learn's libsvm couples two classes too (plain libsvm returns r[0, 1], r[1, 0])
    return np.stack([_multiclass_probability(r[m]) for m in range(n)]) if n else np.zeros((0, n_classes))


def _multiclass_probability(r: np.ndarray) -> np.ndarray:
    """libsvm's ``multiclass_probability``: pairwise coupling, method 2 of Wu, Lin and Weng."""
    k = r.shape[0]
    max_iter, eps = max(100, k), 0.005 / k
    Q = -r.T * r  # Q[t, j] = -r[j, t] * r[t, j]
    np.fill_diagonal(Q, 0.0)
    Q[np.diag_indices(k)] = np.sum(r.T**2, axis=1) - np.diag(r) ** 2
    p = np.full(k, 1.0 / k)
    for _ in range(max_iter):
        Qp = Q @ p
        pQp = float(p @ Qp)
        if np.max(np.abs(Qp - pQp)) < eps:
            break
        for t in range(k):
            diff = (-Qp[t] + pQp) / Q[t, t]
            p[t] += diff
            pQp = (pQp + diff * (diff * Q[t, t] + 2 * Qp[t])) / (1 + diff) / (1 + diff)
            Qp = (Qp + diff * Q[t]) / (1 + diff)
            p /= 1 + diff
    return p
