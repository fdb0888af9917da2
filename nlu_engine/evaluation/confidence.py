"""Can a bot act on the confidences? Calibration, out-of-scope detection and the fallback sweep.

- **Calibration** of the top intent's confidence on the in-scope test messages (fallback undone):
  the expected calibration error over 15 equal bins (ECE) and the largest bin gap, with the bins
  for a reliability diagram. Beside it, the ECE's noise floor: a test set of a few hundred or a
  thousand messages shows an ECE of about 0.02 even for perfectly calibrated confidences (most
  bins hold a handful of messages). ``ece_floor`` is the median ECE of such a model with the same
  confidences, simulated (each message right with probability its confidence), and
  ``ece_p_value`` the share of those simulations at or above the measured ECE: below 0.05, the
  miscalibration is real; above it, the test set cannot tell the confidences from calibrated ones.
- **Out of scope**, when the test data holds examples of the out-of-scope intent (default
  ``out_of_scope``): a message is *caught* when it falls back (``nlu_fallback``) or is predicted
  as that intent. In-scope accuracy counts a fallback as an error. AUROC ranks the top confidence
  of in-scope messages against out-of-scope ones.
- **The sweep**: for each threshold from 0 to 1, what a ``FallbackClassifier`` with it would
  catch and keep, and the largest threshold that keeps in-scope accuracy within one point of no
  fallback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nlu_engine.classifiers.calibration import OUT_OF_SCOPE, expected_calibration_error
from nlu_engine.classifiers.fallback import FALLBACK_INTENT
from nlu_engine.contract.message import Message

#: thresholds of the sweep
SWEEP = tuple(round(t, 2) for t in np.linspace(0.0, 1.0, 101))
#: how much in-scope accuracy the suggested threshold may give up, in points
ACCURACY_BUDGET = 1.0
#: simulated test sets for the ECE's noise floor (seeded: the report is reproducible)
FLOOR_SIMULATIONS = 400


def predicted_intent(result: Mapping[str, Any]) -> tuple[str | None, float]:
    """``(name, confidence)`` of a parse result's intent (``(None, 0.0)`` when there is none)."""
    intent = result.get("intent") or {}
    name = intent.get("name")
    confidence = intent.get("confidence")
    return (str(name) if name is not None else None,
            float(confidence) if isinstance(confidence, int | float) else 0.0)


def undo_fallback(result: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """``(result without the fallback, whether it fell back)``: Rasa's ``undo_fallback_prediction``."""
    if (result.get("intent") or {}).get("name") != FALLBACK_INTENT:
        return result, False
    ranking = result.get("intent_ranking") or []
    if len(ranking) < 2:
        return result, True
    return {**result, "intent": ranking[1], "intent_ranking": ranking[1:]}, True


def auroc(positive: np.ndarray, negative: np.ndarray) -> float:
    """The probability that a positive scores above a negative (ties count half)."""
    if not len(positive) or not len(negative):
        return float("nan")
    scores = np.concatenate([positive, negative])
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for value in np.unique(scores):  # average ranks over ties
        same = scores == value
        ranks[same] = ranks[same].mean()
    n = len(positive)
    return float((ranks[:n].sum() - n * (n + 1) / 2) / (n * len(negative)))


@dataclass
class ConfidenceEvaluation:
    """See the module's docstring. ``calibrated``: what the model says of its confidences (None
    when the caller did not ask it)."""

    ece: float
    max_gap: float
    bins: list[dict[str, float]]
    mean_confidence: float
    accuracy: float
    sweep: list[dict[str, float]]
    suggested_threshold: float
    out_of_scope_intent: str
    num_out_of_scope: int = 0
    out_of_scope: dict[str, float] = field(default_factory=dict)
    calibrated: bool | None = None
    ece_floor: float = 0.0
    ece_p_value: float = 1.0

    def summary(self) -> dict[str, Any]:
        return {
            "ece": self.ece, "ece_floor": self.ece_floor, "ece_p_value": self.ece_p_value,
            "max_calibration_gap": self.max_gap,
            "mean_confidence": self.mean_confidence, "accuracy": self.accuracy,
            "calibrated": self.calibrated, "suggested_threshold": self.suggested_threshold,
            "out_of_scope_intent": self.out_of_scope_intent,
            "num_out_of_scope": self.num_out_of_scope, **self.out_of_scope,
        }


def evaluate_confidence(
    golds: Sequence[Message],
    results: Sequence[Mapping[str, Any]],
    out_of_scope_intent: str = OUT_OF_SCOPE,
    calibrated: bool | None = None,
) -> ConfidenceEvaluation | None:
    """Score the confidences of parse results against gold messages (same order); None when no
    gold message has an intent."""
    rows = []  # (gold is out of scope, predicted name, confidence, fell back)
    for gold, given in zip(golds, results, strict=True):
        if not gold.intent:
            continue
        result, fell_back = undo_fallback(given)
        name, confidence = predicted_intent(result)
        rows.append((gold.intent == out_of_scope_intent, gold.intent, name, confidence, fell_back))
    if not rows:
        return None
    oos = np.array([r[0] for r in rows])
    correct = np.array([r[1] == r[2] for r in rows])
    confidence = np.array([r[3] for r in rows])
    fell_back = np.array([r[4] for r in rows])
    predicted_oos = np.array([r[2] == out_of_scope_intent for r in rows])
    ece, gap, bins = expected_calibration_error(confidence[~oos], correct[~oos])
    sweep = threshold_sweep(confidence, correct, oos, predicted_oos)
    floor, p_value = ece_noise_floor(confidence[~oos], ece)
    evaluation = ConfidenceEvaluation(
        ece=ece, ece_floor=floor, ece_p_value=p_value, max_gap=gap, bins=bins,
        mean_confidence=_mean(confidence[~oos]),
        accuracy=_mean(correct[~oos]), sweep=sweep, suggested_threshold=suggested_threshold(sweep),
        out_of_scope_intent=out_of_scope_intent, num_out_of_scope=int(oos.sum()), calibrated=calibrated,
    )
    if oos.any():
        caught = fell_back | predicted_oos
        kept_right = correct & ~fell_back & ~oos
        evaluation.out_of_scope = {
            "in_scope_accuracy": _mean(kept_right[~oos]),
            "in_scope_accuracy_without_fallback": _mean(correct[~oos]),
            "out_of_scope_recall": _mean(caught[oos]),
            "out_of_scope_precision": _mean(oos[caught]) if caught.any() else 0.0,
            "auroc": auroc(confidence[~oos], confidence[oos]),
        }
    return evaluation


def ece_noise_floor(
    confidences: np.ndarray, measured: float, simulations: int = FLOOR_SIMULATIONS, seed: int = 0,
    bins: int = 15,
) -> tuple[float, float]:
    """``(median ECE, share at or above measured)`` over ``simulations`` test sets in which each
    message [M] is right with probability its confidence: what perfectly calibrated confidences
    would measure on this many messages (ECE over ``bins`` equal bins)."""
    if not len(confidences):
        return 0.0, 1.0
    rng = np.random.default_rng(seed)
    confidences = np.clip(np.asarray(confidences, np.float64), 0.0, 1.0)
    values = np.array([
        expected_calibration_error(confidences, rng.random(len(confidences)) < confidences, bins)[0]
        for _ in range(simulations)
    ])
    return float(np.median(values)), float((values >= measured - 1e-12).mean())


def threshold_sweep(
    confidence: np.ndarray, correct: np.ndarray, oos: np.ndarray, predicted_oos: np.ndarray
) -> list[dict[str, float]]:
    """Per threshold: the share of messages caught, the accuracy on the ones kept, in-scope
    accuracy (a fallback counts as an error) and out-of-scope recall."""
    points = []
    for threshold in SWEEP:
        caught = (confidence < threshold) | predicted_oos
        kept = ~caught
        points.append({
            "threshold": threshold,
            "caught": _mean(caught),
            "kept_accuracy": _mean((correct & ~oos)[kept]) if kept.any() else 1.0,
            "in_scope_accuracy": _mean((correct & kept)[~oos]) if (~oos).any() else 0.0,
            "out_of_scope_recall": _mean(caught[oos]) if oos.any() else 0.0,
        })
    return points


def suggested_threshold(sweep: Sequence[Mapping[str, float]]) -> float:
    """The largest threshold whose in-scope accuracy is within ``ACCURACY_BUDGET`` points of no
    fallback's (threshold 0)."""
    floor = sweep[0]["in_scope_accuracy"] - ACCURACY_BUDGET / 100
    allowed = [p["threshold"] for p in sweep if p["in_scope_accuracy"] >= floor - 1e-12]
    best = 0.0
    for point in sweep:  # the sweep is monotone in practice; stop at the first that loses more
        if point["threshold"] not in allowed:
            break
        best = point["threshold"]
    return float(best)


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else 0.0
