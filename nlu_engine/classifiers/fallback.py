"""FallbackClassifier: predict ``nlu_fallback`` when the intent classifier is unsure.

A message falls back when its intent confidence is below ``threshold``, or when the top two
intents of its ranking are closer than ``ambiguity_threshold``. Its intent then becomes
``{"name": "nlu_fallback", "confidence": threshold}`` and the same entry is inserted at the
top of ``intent_ranking`` (Rasa 3 behaviour; the original ranking follows it). A message with
no intent prediction (confidence 0) falls back too. Nothing is learned or persisted.

Confidences here are calibrated, so a threshold carried over from a Rasa config (tuned on Rasa's
overconfident ones) may send far more messages to ``nlu_fallback`` than it did there.
:func:`threshold_advice` says what a threshold does to a set of predictions (the share it sends to
the fallback, and the largest threshold that keeps accuracy within a point of no fallback), and
:func:`training_notice` turns it into one notice when a trained pipeline's threshold sends more
than :data:`NOTICE_SHARE` of its intent classifier's held-out examples there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from nlu_engine.contract.component import INTENT, Component, param
from nlu_engine.contract.message import Message

FALLBACK_INTENT = "nlu_fallback"
#: a threshold that sends more than this share of the held-out examples to the fallback gets a notice
NOTICE_SHARE = 0.1
#: how much accuracy the suggested threshold may give up (a fraction: one point)
ACCURACY_BUDGET = 0.01
#: the thresholds searched for the suggested one
THRESHOLD_GRID = tuple(i / 100 for i in range(100))


class FallbackClassifier(Component):
    """Replaces low-confidence or ambiguous intent predictions by ``nlu_fallback``."""

    requires = (INTENT,)
    provides = (INTENT,)
    learns_from_data = False

    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        threshold: float = param(0.3, low=0.0, high=1.0)
        ambiguity_threshold: float = param(0.1, low=0.0, high=1.0)

    config: Config

    def should_fallback(self, message: Message) -> bool:
        """Whether the message's intent prediction is too unsure to keep."""
        if float(message.intent_confidence) < self.config.threshold:
            return True
        ranking = message.intent_ranking
        if len(ranking) >= 2:
            first = float(ranking[0].get("confidence", 1.0))
            second = float(ranking[1].get("confidence", 1.0))
            return first - second < self.config.ambiguity_threshold
        return False

    def process(self, messages: list[Message]) -> None:
        for message in messages:
            if not self.should_fallback(message):
                continue
            confidence = float(self.config.threshold)
            message.intent = FALLBACK_INTENT
            message.intent_confidence = confidence
            message.intent_response_key = None
            message.intent_ranking = [
                {"name": FALLBACK_INTENT, "confidence": confidence},
                *message.intent_ranking,
            ]


def undo_fallback_prediction(message: Message) -> None:
    """Restore the prediction the fallback replaced (Rasa's ``undo_fallback_prediction``)."""
    ranking = message.intent_ranking
    if not ranking or ranking[0].get("name") != FALLBACK_INTENT:
        return
    message.intent_ranking = ranking[1:]
    if message.intent_ranking:
        message.intent = message.intent_ranking[0]["name"]
        message.intent_confidence = float(message.intent_ranking[0]["confidence"])
    else:
        message.intent, message.intent_confidence = None, 0.0


# --- what a threshold does to a set of predictions -------------------------------------------------
@dataclass(frozen=True)
class ThresholdAdvice:
    """What ``threshold`` does to ``num_examples`` predictions: ``share`` of them fall back (top
    confidence below it); ``accuracy`` is the share right without a fallback and
    ``accuracy_at_threshold`` the share right and kept (a fallback counts as not answered);
    ``suggested_threshold`` is the largest threshold of :data:`THRESHOLD_GRID` whose accuracy is
    within :data:`ACCURACY_BUDGET` of ``accuracy``."""

    threshold: float
    share: float
    suggested_threshold: float
    accuracy: float
    accuracy_at_threshold: float
    num_examples: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def threshold_advice(
    confidences: Sequence[float] | np.ndarray, correct: Sequence[bool] | np.ndarray, threshold: float
) -> ThresholdAdvice | None:
    """:class:`ThresholdAdvice` of ``threshold`` over top confidences [M] and whether each top
    prediction was right [M]; None without predictions."""
    c = np.asarray(confidences, np.float64)
    right = np.asarray(correct, bool)
    if c.shape != right.shape:
        raise ValueError(f"{len(c)} confidences but {len(right)} correct flags")
    if not len(c):
        return None

    def accuracy(t: float) -> float:
        return float(np.mean(right & (c >= t)))

    floor = accuracy(0.0) - ACCURACY_BUDGET - 1e-12
    suggested = max((t for t in THRESHOLD_GRID if accuracy(t) >= floor), default=0.0)
    return ThresholdAdvice(threshold=float(threshold), share=float(np.mean(c < threshold)),
                           suggested_threshold=suggested, accuracy=accuracy(0.0),
                           accuracy_at_threshold=accuracy(threshold), num_examples=len(c))


def advice_text(advice: ThresholdAdvice, what: str) -> str:
    """``FallbackClassifier threshold 0.7 sends 24.6 % of <what> to nlu_fallback; 0.42 keeps
    in-scope accuracy within a point of no fallback``."""
    return (f"FallbackClassifier threshold {advice.threshold:g} sends {advice.share * 100:.1f} % of "
            f"{what} to {FALLBACK_INTENT}; {advice.suggested_threshold:.2f} keeps in-scope accuracy "
            "within a point of no fallback")


def held_out_predictions(components: Sequence[Component]) -> tuple[list[float], list[bool]] | None:
    """The held-out examples' calibrated top confidences and whether they were right, from the
    last of ``components`` that predicts intents and recorded them in its calibration's notes
    (``classifiers.held_out.record_held_out``); None when none did."""
    for component in reversed(components):
        if INTENT not in component.provides:
            continue
        notes = getattr(getattr(component, "calibration_", None), "notes", None) or {}
        confidences, correct = notes.get("held_out_confidence"), notes.get("held_out_correct")
        if (isinstance(confidences, list) and isinstance(correct, list) and confidences
                and len(confidences) == len(correct)):
            return [float(c) for c in confidences], [bool(c) for c in correct]
    return None


def training_notice(components: Sequence[Component]) -> str | None:
    """One notice when a trained pipeline's FallbackClassifier threshold sends more than
    :data:`NOTICE_SHARE` of its intent classifier's held-out examples to the fallback (the
    classifier before it that recorded them); None otherwise, or without held-out predictions."""
    for index, component in enumerate(components):
        if not isinstance(component, FallbackClassifier):
            continue
        held_out = held_out_predictions(components[:index])
        advice = threshold_advice(*held_out, component.config.threshold) if held_out else None
        if advice is None or advice.share <= NOTICE_SHARE:
            return None
        return (f"{advice_text(advice, 'the held-out examples')} (confidences here are "
                "calibrated: README, Rasa projects)")
    return None
