"""Can a bot act on an entity's confidence? Calibration of ``confidence_entity`` and what a
threshold on it filters.

Each entity an extractor predicts may carry ``confidence_entity`` (DIET and
``CRFEntityExtractor``: the smallest CRF marginal of its tokens' tags). Each such entity is
scored against exact-span correctness, as ``span_exact`` scores it: 1 when its ``(type, start,
end)`` is a gold entity of the message that no earlier prediction matched, else 0.

- **Calibration**: the expected calibration error over ``BINS`` equal-width bins (ECE) and the
  largest bin gap, with the bins for a reliability diagram; beside it the ECE's noise floor
  (``confidence.ece_noise_floor``: what perfectly calibrated confidences would measure on as many
  entities) and its p-value. Entities are fewer than messages, hence 10 bins, not the intents' 15.
- **Thresholds**: for each of ``THRESHOLDS``, dropping the entities whose confidence is below
  it: the share of the wrong entities it removes, the share of the right ones it costs, and the
  exact-span precision, recall and F1 of the entities kept (recall over every gold entity).

Entities without a confidence (regexes, Duckling) are not scored; an extractor none of whose
entities has one gets no evaluation (None).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nlu_engine.classifiers.calibration import expected_calibration_error
from nlu_engine.evaluation.confidence import ece_noise_floor
from nlu_engine.evaluation.labels import prf, ratio

#: equal-width bins of the entity ECE
BINS = 10
#: thresholds on ``confidence_entity`` whose effect is reported
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def span_correctness(
    gold: Iterable[tuple[str, int, int]], predicted: Iterable[Mapping[str, Any]]
) -> list[tuple[float | None, bool]]:
    """``(confidence_entity or None, exactly right)`` of each predicted entity of one message;
    each gold ``(type, start, end)`` makes one prediction right at most."""
    left = Counter(gold)
    scored = []
    for entity in predicted:
        confidence = entity.get("confidence_entity")
        key = (str(entity["entity"]), int(entity["start"]), int(entity["end"]))
        right = left[key] > 0
        if right:
            left[key] -= 1
        number = isinstance(confidence, int | float) and not isinstance(confidence, bool)
        scored.append((float(confidence) if number else None, right))
    return scored


@dataclass
class EntityConfidenceEvaluation:
    """See the module's docstring."""

    num_entities: int
    num_gold: int
    ece: float
    max_gap: float
    bins: list[dict[str, float]]
    mean_confidence: float
    precision: float
    ece_floor: float = 0.0
    ece_p_value: float = 1.0
    thresholds: list[dict[str, float]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The headline numbers (``summary.json``, beside the extractor's span scores)."""
        return {
            "num_scored": self.num_entities, "bins": BINS, "ece": self.ece,
            "ece_floor": self.ece_floor, "ece_p_value": self.ece_p_value,
            "max_calibration_gap": self.max_gap, "mean_confidence": self.mean_confidence,
            "precision": self.precision, "thresholds": self.thresholds,
        }

    def at(self, threshold: float) -> dict[str, float] | None:
        """The row of ``thresholds`` for ``threshold``, if reported."""
        return next((row for row in self.thresholds if abs(row["threshold"] - threshold) < 1e-9), None)


def evaluate_entity_confidence(
    predictions: Sequence[tuple[float | None, bool]], num_gold: int,
    thresholds: Sequence[float] = THRESHOLDS,
) -> EntityConfidenceEvaluation | None:
    """Calibration and threshold table of an extractor's predicted entities, ``(confidence or
    None, exactly right)`` each (``span_correctness``); ``num_gold``: the gold entities (for
    recall and F1). Entities without a confidence are kept by every threshold. None when no
    entity has a confidence."""
    scored = [(c, r) for c, r in predictions if c is not None]
    if not scored:
        return None
    num_unscored_right = sum(r for c, r in predictions if c is None)
    confidence = np.clip(np.array([c for c, _ in scored], np.float64), 0.0, 1.0)
    right = np.array([r for _, r in scored], bool)
    ece, gap, bins = expected_calibration_error(confidence, right, bins=BINS)
    floor, p_value = ece_noise_floor(confidence, ece, bins=BINS)
    return EntityConfidenceEvaluation(
        num_entities=len(scored), num_gold=num_gold, ece=ece, max_gap=gap, bins=bins,
        mean_confidence=float(confidence.mean()), precision=float(right.mean()),
        ece_floor=floor, ece_p_value=p_value,
        thresholds=threshold_table(confidence, right, num_gold, num_unscored_right, thresholds),
    )


def threshold_table(
    confidence: np.ndarray, right: np.ndarray, num_gold: int, num_unscored_right: int = 0,
    thresholds: Sequence[float] = THRESHOLDS,
) -> list[dict[str, float]]:
    """Per threshold: the shares of wrong and right entities below it (removed), and exact
    precision, recall and F1 of those kept (``num_unscored_right`` right ones always kept)."""
    wrong = ~right
    rows = []
    for threshold in thresholds:
        kept = confidence >= threshold
        correct = int((right & kept).sum()) + num_unscored_right
        scores = prf(correct, num_gold, int(kept.sum()) + num_unscored_right)
        rows.append({
            "threshold": float(threshold),
            "wrong_removed": ratio(int((wrong & ~kept).sum()), int(wrong.sum())),
            "right_removed": ratio(int((right & ~kept).sum()), int(right.sum())),
            "precision": scores["precision"], "recall": scores["recall"], "f1": scores["f1-score"],
        })
    return rows


#: the threshold whose effect the terminal line names
SHOWN_THRESHOLD = 0.5


def confidence_line(name: str, confidence: Mapping[str, Any]) -> str:
    """One terminal line: the ECE of ``name``'s entity confidences (a summary's
    ``entities[name]["confidence"]``) and what ``SHOWN_THRESHOLD`` would filter."""
    threshold = next((row for row in confidence.get("thresholds") or ()
                      if abs(row["threshold"] - SHOWN_THRESHOLD) < 1e-9), None)
    verdict = "miscalibrated beyond chance" if confidence["ece_p_value"] < 0.05 else "within chance"
    line = (f"Entity confidence ({name}): expected calibration error {confidence['ece']:.4f} over "
            f"{confidence['num_scored']} entities ({confidence['bins']} bins; calibrated confidences "
            f"would measure {confidence['ece_floor']:.4f} on as many, p {confidence['ece_p_value']:.2f}: "
            f"{verdict}), mean "
            f"{confidence['mean_confidence']:.4f} for an exact-span precision of "
            f"{confidence['precision']:.4f}")
    if threshold is not None:
        line += (f"; a threshold of {threshold['threshold']:.1f} drops {threshold['wrong_removed']:.0%} "
                 f"of the wrong entities and {threshold['right_removed']:.0%} of the right ones "
                 f"(exact F1 {threshold['f1']:.4f})")
    return line
