"""The model's fallback threshold on the test data, as training reports it on the held-out examples.

Confidences here are calibrated, so a ``FallbackClassifier.threshold`` brought over from a Rasa
config may send many more messages to ``nlu_fallback`` than it did under Rasa. Training says so
when it sends more than a tenth of the held-out examples there
(``classifiers.fallback.training_notice``); ``nlu-engine test`` reports the same on the test
messages: the share whose top confidence (with the fallback undone: the ranking without
``nlu_fallback``) is below the model's threshold, and the largest threshold that keeps accuracy
within a point of no fallback (``classifiers.fallback.threshold_advice``). Out-of-scope test
messages (``--out-of-scope-intent``) are left out: they are meant to fall back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nlu_engine.classifiers.calibration import OUT_OF_SCOPE
from nlu_engine.classifiers.fallback import FallbackClassifier, ThresholdAdvice, threshold_advice
from nlu_engine.contract.message import Message
from nlu_engine.evaluation.confidence import predicted_intent, undo_fallback


def model_threshold(components: Iterable[Any]) -> float | None:
    """The threshold of the pipeline's (first) FallbackClassifier; None when it has none."""
    for component in components:
        if isinstance(component, FallbackClassifier):
            return float(component.config.threshold)
    return None


def evaluate_threshold(
    golds: Sequence[Message],
    results: Sequence[Mapping[str, Any]],
    threshold: float,
    out_of_scope_intent: str = OUT_OF_SCOPE,
) -> ThresholdAdvice | None:
    """What ``threshold`` does to the in-scope test messages (gold intent set, not
    ``out_of_scope_intent``), their fallback undone; None when there are none."""
    confidences: list[float] = []
    correct: list[bool] = []
    for gold, given in zip(golds, results, strict=True):
        if not gold.intent or gold.intent == out_of_scope_intent:
            continue
        name, confidence = predicted_intent(undo_fallback(given)[0])
        confidences.append(confidence)
        correct.append(name == gold.intent)
    return threshold_advice(confidences, correct, threshold)


def threshold_line(advice: Mapping[str, Any]) -> str:
    """The terminal line of ``summary.json``'s ``fallback_threshold``."""
    return (f"Fallback threshold: {advice['threshold']:g} sends {advice['share'] * 100:.1f} % of the "
            f"{advice['num_examples']} in-scope test messages to nlu_fallback (in-scope accuracy "
            f"{advice['accuracy_at_threshold']:.4f}, {advice['accuracy']:.4f} without fallback); "
            f"{advice['suggested_threshold']:.2f} keeps in-scope accuracy within a point of no fallback")
