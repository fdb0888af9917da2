"""Confidences that mean what they say: the calibration maps every intent classifier applies.

This module holds what is fitted and applied (``Calibration``, ``InScope``) and how it is
stored; ``held_out.py`` is the one owner of the fitting. While a classifier trains, a stratified
share of its examples is held out, or every example is predicted by a model trained without it
(cross-fitting); its scores for the held-out examples fit two things:

* **Temperature** ``T`` (Guo et al. 2017): the confidences become ``softmax(log p / T)``, with
  ``T`` chosen to minimise the negative log-likelihood of the held-out intents. Then the top
  intent's confidence ``c`` becomes ``sigmoid(a * logit(c) + b)`` (Platt scaling of the top label,
  fitted on whether the held-out predictions were right, when at least 200 were held out and 20
  of them were wrong; the other intents share what is left in proportion). Neither changes the
  ranking, so accuracy is unchanged; together they make a confidence of 0.8 right about 8 times
  in 10.
* **An in-scope score**: the Mahalanobis distance of the message's sentence vector to the nearest
  intent's training examples (class means, one shared covariance; Lee et al. 2018). The held-out
  examples' distances are the reference of what in-scope looks like. A message farther out than
  most of them gets the conformal p-value ``q`` (the share of held-out examples at least as far
  out), and its confidences are multiplied by ``min(1, q / alpha)``. In-scope messages are that
  far out in about ``alpha`` of cases; out-of-scope messages, the bot never trained for, are
  far out most of the time. The ranking then says how likely each intent is *and* the message in
  scope, so ``FallbackClassifier.threshold`` has one meaning whatever made the confidence.

Everything learned is plain numbers (``calibration.json``, ``calibration.npz``); a component
without them (an archive from before, or data too small to hold anything out) reports its raw
confidences and ``calibrated`` is False.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.npz import load_npz

logger = logging.getLogger(__name__)

CALIBRATION_JSON = "calibration.json"
CALIBRATION_NPZ = "calibration.npz"
#: the share of each intent's examples held out to fit the calibration
DEFAULT_SHARE = 0.1
#: in-scope messages whose confidence the in-scope score lowers (the conformal level)
DEFAULT_ALPHA = 0.05
#: a covariance's shrinkage towards its diagonal's mean, so that a few hundred examples give a
#: well-conditioned inverse
SHRINKAGE = 0.1
#: at most this many examples are held out (a smaller share of large data): what is held out is
#: not trained on, and a few hundred fit the calibration as well as thousands
MAX_HELD_OUT = 500
#: fewer held-out examples than this fit no calibration (the classifier says so once)
MIN_HELD_OUT = 20
#: fewer held-out examples than this fit the temperature only, not the top label's Platt scaling
MIN_HELD_OUT_FOR_PLATT = 200
#: nor do fewer wrong predictions among them than this: a sigmoid fitted to a handful of errors
#: (a classifier 98 % right on 500 held-out examples) says more about them than about the model
MIN_ERRORS_FOR_PLATT = 20
#: the training examples whose vectors fit the in-scope score, at most
MAX_REFERENCE_EXAMPLES = 4000
#: the intent Rasa bots use for out-of-scope examples
OUT_OF_SCOPE = "out_of_scope"

#: a classifier's prediction for calibration: probabilities [B, N] and sentence vectors [B, D]
#: (None when it has none to offer the in-scope score)
Predict = Callable[[list[Message]], tuple[np.ndarray, np.ndarray | None]]


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p.astype(np.float64), 1e-7, 1 - 1e-7)
    return np.log(p / (1 - p))


#: a mean variance a dimension below this is no spread at all (``InScope.fit``)
TINY_SPREAD = 1e-12


@dataclass
class InScope:
    """Mahalanobis distance to the nearest intent's examples, and held-out distances to rank it
    against. ``means`` [N, D], ``precision`` [D, D], ``reference`` [M] sorted ascending."""

    means: np.ndarray
    precision: np.ndarray
    reference: np.ndarray
    alpha: float = DEFAULT_ALPHA
    #: the median distance of the training examples themselves (what a retrained network's
    #: reference is rescaled by, ``refit_in_scope``); 0 when unknown
    train_median: float = 0.0

    @classmethod
    def fit(
        cls, vectors: np.ndarray, labels: np.ndarray, held_vectors: np.ndarray,
        alpha: float = DEFAULT_ALPHA,
    ) -> InScope:
        """From training vectors [K, D] with label indices [K] and held-out vectors [M, D]."""
        vectors = vectors.astype(np.float64)
        classes = np.unique(labels)
        means = np.zeros((int(labels.max()) + 1, vectors.shape[1]))
        for c in classes:
            means[c] = vectors[labels == c].mean(axis=0)
        centred = vectors - means[labels]
        covariance = centred.T @ centred / max(len(vectors) - len(classes), 1)
        target = np.trace(covariance) / len(covariance)
        if target <= TINY_SPREAD:
            # one example a class (a fold of a bot with two an intent): no spread within a class
            # to measure, so the spread of all the vectors around their mean stands in, and
            # the identity where there is none at all
            spread = vectors - vectors.mean(axis=0)
            covariance = spread.T @ spread / max(len(vectors) - 1, 1)
            target = np.trace(covariance) / len(covariance)
            if target <= TINY_SPREAD:
                covariance, target = np.eye(len(covariance)), 1.0
        covariance = (1 - SHRINKAGE) * covariance + SHRINKAGE * target * np.eye(len(covariance))
        model = cls(means=means[classes], precision=np.linalg.inv(covariance),
                    reference=np.zeros(0), alpha=alpha)
        model.reference = np.sort(model.distances(held_vectors))
        model.train_median = float(np.median(model.distances(vectors)))
        return model

    def __post_init__(self) -> None:
        # P = L L^T once, so that a message costs one product with [D, D + N]:
        # (x - mu) P (x - mu) = |x L|^2 - 2 (x L).(mu L) + |mu L|^2, with x [L | L mu'] in one go
        factor = np.linalg.cholesky(self.precision)  # [D, D]
        projected_means = self.means @ factor  # [N, D]: mu L
        # float32: a message's one product reads this [D, D + N] table from memory, and that
        # read is most of the combiner's parse (BENCHMARKS.md, "Small bots and one parse")
        self._product = np.concatenate([factor, factor @ projected_means.T], axis=1).astype(np.float32)
        self._centres = (projected_means**2).sum(axis=1)  # [N]: mu P mu
        self._dimension = len(factor)

    def distances(self, vectors: np.ndarray) -> np.ndarray:
        """Squared Mahalanobis distance [B] of each vector [B, D] to its nearest class mean:
        x P x - 2 x P mu + mu P mu, minimised over the N means."""
        product = (vectors.astype(np.float32) @ self._product).astype(np.float64)  # [B, D + N]
        projected, cross = product[:, : self._dimension], product[:, self._dimension:]
        own = (projected * projected).sum(axis=1)  # [B]: x P x
        return np.maximum(own[:, None] - 2 * cross + self._centres, 0.0).min(axis=1)

    def p_values(self, vectors: np.ndarray) -> np.ndarray:
        """The share of held-out examples at least as far out as each message [B] (conformal)."""
        d = self.distances(vectors)
        beyond = len(self.reference) - np.searchsorted(self.reference, d, side="left")
        return (beyond + 1) / (len(self.reference) + 1)

    def factors(self, vectors: np.ndarray) -> np.ndarray:
        """What each message's confidences are multiplied by [B]: 1 unless it is out further
        than all but ``alpha`` of the held-out examples."""
        return np.minimum(1.0, self.p_values(vectors) / self.alpha)


@dataclass
class Calibration:
    """What a classifier learned about its own confidences (see the module's docstring)."""

    temperature: float = 1.0
    top_slope: float = 1.0
    top_bias: float = 0.0
    in_scope: InScope | None = None
    examples: int = 0  # how many held-out examples it was fitted on (0: not calibrated)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def calibrated(self) -> bool:
        return self.examples > 0

    def apply(self, probabilities: np.ndarray, vectors: np.ndarray | None = None,
              exempt: int | None = None) -> np.ndarray:
        """Calibrated confidences [B, N] from the classifier's own probabilities [B, N] and, for
        the in-scope score, its sentence vectors [B, D]; messages whose top intent is ``exempt``
        (the data's own out-of-scope intent) are not discounted for being far out."""
        if not self.calibrated:
            return probabilities
        out = _softmax(np.log(np.maximum(probabilities.astype(np.float64), 1e-300)) / self.temperature)
        if (self.top_slope, self.top_bias) != (1.0, 0.0):
            out = self._rescale_top(out)
        if self.in_scope is not None and vectors is not None:
            factors = self.in_scope.factors(vectors)
            if exempt is not None:
                factors[probabilities.argmax(axis=1) == exempt] = 1.0
            out *= factors[:, None]
        return out

    def _rescale_top(self, probabilities: np.ndarray) -> np.ndarray:
        """The top intent's confidence through the fitted sigmoid, the others scaled to share the
        rest but kept below it, so the ranking stands (the sum may then fall short of 1)."""
        rows = np.arange(len(probabilities))
        top = probabilities.argmax(axis=1)
        old = probabilities[rows, top]
        new = 1.0 / (1.0 + np.exp(-(self.top_slope * _logit(old) + self.top_bias)))
        rest = np.where(old < 1.0, (1.0 - new) / np.maximum(1.0 - old, 1e-12), 0.0)
        out = np.minimum(probabilities * rest[:, None], new[:, None] * (1 - 1e-9))  # below the top
        out[rows, top] = new
        return out

    # --- persistence --------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        state: dict[str, Any] = {"temperature": self.temperature, "examples": self.examples,
                                 "top_label": [self.top_slope, self.top_bias],
                                 "notes": self.notes, "in_scope": None}
        if self.in_scope is not None:
            state["in_scope"] = {"score": "mahalanobis", "alpha": self.in_scope.alpha}
            np.savez(directory / CALIBRATION_NPZ, means=self.in_scope.means,
                     precision=self.in_scope.precision, reference=self.in_scope.reference)
        (directory / CALIBRATION_JSON).write_text(json.dumps(state, indent=1))

    @classmethod
    def load(cls, directory: Path) -> Calibration:
        """The stored calibration, or an uncalibrated one when the folder has none (an archive
        from before calibration existed)."""
        path = directory / CALIBRATION_JSON
        if not path.is_file():
            return cls()
        state = json.loads(path.read_text(encoding="utf-8"))
        temperature = float(state.get("temperature", 1.0))
        if not np.isfinite(temperature) or temperature <= 0:
            raise ValueError(f"{CALIBRATION_JSON}: temperature must be a positive number")
        in_scope = None
        if state.get("in_scope"):
            arrays = load_npz(directory / CALIBRATION_NPZ)
            means, precision = arrays["means"].astype(np.float64), arrays["precision"].astype(np.float64)
            if precision.shape != (means.shape[1], means.shape[1]):
                raise ValueError(f"{CALIBRATION_NPZ}: the precision matrix does not fit the means")
            in_scope = InScope(means=means, precision=precision,
                               reference=np.sort(arrays["reference"].astype(np.float64)),
                               alpha=float(state["in_scope"].get("alpha", DEFAULT_ALPHA)))
        slope, bias = (float(v) for v in state.get("top_label", [1.0, 0.0]))
        if not (np.isfinite(slope) and np.isfinite(bias)):
            raise ValueError(f"{CALIBRATION_JSON}: top_label must be two numbers")
        return cls(temperature=temperature, top_slope=slope, top_bias=bias, in_scope=in_scope,
                   examples=int(state.get("examples", 0)), notes=dict(state.get("notes") or {}))


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def expected_calibration_error(
    confidences: np.ndarray, correct: np.ndarray, bins: int = 15
) -> tuple[float, float, list[dict[str, float]]]:
    """(ECE, the largest bin gap, the bins) of top-label ``confidences`` [M] against ``correct``
    [M]: equal-width bins over [0, 1], each bin's |accuracy - mean confidence| weighted by its
    share of the examples (Naeini et al. 2015; 15 bins as Guo et al. 2017)."""
    confidences = np.clip(np.asarray(confidences, np.float64), 0.0, 1.0)
    correct = np.asarray(correct, bool)
    if not len(confidences):
        return 0.0, 0.0, []
    index = np.minimum((confidences * bins).astype(int), bins - 1)
    ece, worst, table = 0.0, 0.0, []
    for b in range(bins):
        members = index == b
        count = int(members.sum())
        if not count:
            continue
        accuracy, confidence = float(correct[members].mean()), float(confidences[members].mean())
        gap = abs(accuracy - confidence)
        ece += count / len(confidences) * gap
        worst = max(worst, gap)
        table.append({"low": b / bins, "high": (b + 1) / bins, "count": count,
                      "accuracy": accuracy, "confidence": confidence})
    return ece, worst, table


def out_of_scope_intent(configured: str | None, intents: Iterable[str], where: str) -> str | None:
    """The intent whose examples are out of scope: the configured one, which must be in the data,
    or ``out_of_scope`` when the data has it."""
    names = set(intents)
    if configured is None:
        return OUT_OF_SCOPE if OUT_OF_SCOPE in names else None
    if configured not in names:
        raise ConfigError(
            f"{where}: out_of_scope_intent '{configured}' is not an intent of the training data; "
            "name one of its intents or leave the parameter out"
        )
    return configured
