"""Response selection scores of ``nlu-engine test``, as ``rasa test nlu`` computes them.

A gold message of a retrieval intent carries its response key (``faq/ask_name``); the parse
result's ``response_selector`` holds what the selectors predicted. As in Rasa's
``get_eval_data`` and ``evaluate_response_selections``:

- response selection is scored when the test data holds at least two response keys;
- the prediction of a message is the selector trained for its gold intent when that is one of
  ``all_retrieval_intents`` and present, else the ``default`` selector; its
  ``response.intent_response_key`` and ``response.confidence`` (a missing key is ``""``, a missing
  confidence 0.0);
- messages without a gold response key are left out;
- ``response_selection_report.json`` is the classification report over the gold keys (with
  ``accuracy``, ``micro avg``, ``macro avg``, ``weighted avg`` and per key ``confused_with``);
  ``response_selection_errors.json`` / ``_successes.json`` list
  ``{text, intent_response_key_target, intent_response_key_prediction: {name, confidence}}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nlu_engine.contract.message import Message
from nlu_engine.evaluation.labels import (
    LabelEvaluation,
    add_confused_with,
    classification_report,
    complete_report,
    confusion_matrix,
    order_report,
)

DEFAULT_SELECTOR = "default"
#: Rasa's minimum number of response keys in the test data for response selection to be scored
MIN_RESPONSE_KEYS = 2


@dataclass
class ResponseSelectionEvaluation(LabelEvaluation):
    """Rasa's response selection report, errors and confidences."""


def predicted_response(gold_intent: str, result: Mapping[str, Any]) -> tuple[str, float]:
    """``(intent_response_key, confidence)`` the selectors predicted for a message whose gold
    intent is ``gold_intent`` (``("", 0.0)`` when none did)."""
    selector = result.get("response_selector") or {}
    if not isinstance(selector, Mapping):
        return "", 0.0
    retrieval = selector.get("all_retrieval_intents") or []
    key = gold_intent if gold_intent in retrieval and gold_intent in selector else DEFAULT_SELECTOR
    prediction = (selector.get(key) or {}).get("response") or {}
    name = prediction.get("intent_response_key")
    confidence = prediction.get("confidence")
    return (str(name) if name else "",
            float(confidence) if isinstance(confidence, int | float) else 0.0)


def evaluate_response_selection(
    golds: Sequence[Message], results: Sequence[Mapping[str, Any]]
) -> ResponseSelectionEvaluation | None:
    """Rasa's response selection scores; None when the test data has fewer than two response keys."""
    if len({g.intent_response_key for g in golds if g.intent_response_key}) < MIN_RESPONSE_KEYS:
        return None
    targets: list[str] = []
    predictions: list[str] = []
    evaluation = ResponseSelectionEvaluation(report={}, labels=[], matrix=[], errors=[], successes=[])
    for gold, result in zip(golds, results, strict=True):
        if not gold.intent_response_key:
            continue
        name, confidence = predicted_response(gold.intent or "", result)
        targets.append(gold.intent_response_key)
        predictions.append(name)
        row = {"text": gold.text, "intent_response_key_target": gold.intent_response_key,
               "intent_response_key_prediction": {"name": name, "confidence": confidence}}
        correct = name == gold.intent_response_key
        (evaluation.successes if correct else evaluation.errors).append(row)
        (evaluation.correct_confidences if correct else evaluation.wrong_confidences).append(confidence)
    report = classification_report(targets, predictions, sorted(set(targets)))
    report.setdefault("accuracy", len(evaluation.successes) / len(targets))
    evaluation.labels, evaluation.matrix = confusion_matrix(targets, predictions)
    add_confused_with(report, evaluation.labels, evaluation.matrix)
    evaluation.report = order_report(complete_report(report))
    return evaluation
