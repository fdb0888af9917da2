"""Scores over labels, which intents, entity tokens and response keys share.

``classification_report`` is scikit-learn's dict (per label ``precision``, ``recall``,
``f1-score``, ``support``, then ``accuracy``, ``micro avg``, ``macro avg``, ``weighted avg``),
``confusion_matrix`` its rows and columns, ``add_confused_with`` Rasa's per-label
``confused_with``. :class:`LabelEvaluation` holds what an evaluation over one kind of label
reports. ``metrics`` (intents, entities) and ``responses`` (response keys) build on this module.
Zero divided by zero is 0.0 everywhere (scikit-learn's default).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nlu_engine.training_data.bilou import f1_score

AVERAGES = ("accuracy", "micro avg", "macro avg", "weighted avg")


@dataclass
class LabelEvaluation:
    """The report, confusion matrix, errors and successes of one kind of label."""

    report: dict[str, Any]
    labels: list[str]
    matrix: list[list[int]]
    errors: list[dict[str, Any]]
    successes: list[dict[str, Any]]
    correct_confidences: list[float] = field(default_factory=list)
    wrong_confidences: list[float] = field(default_factory=list)

    @property
    def num_examples(self) -> int:
        return len(self.errors) + len(self.successes)


def order_report(report: dict[str, Any]) -> dict[str, Any]:
    """The labels first, then the averages (in :data:`AVERAGES` order)."""
    labels = {k: v for k, v in report.items() if k not in AVERAGES}
    return {**labels, **{k: report[k] for k in AVERAGES if k in report}}


# --- counting ----------------------------------------------------------------------------------
def ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``, 0.0 when the denominator is 0."""
    return numerator / denominator if denominator else 0.0


def prf(correct: int, gold: int, predicted: int) -> dict[str, float]:
    """``precision``, ``recall`` and ``f1-score`` from counts (0.0 when undefined)."""
    return {
        "precision": ratio(correct, predicted),
        "recall": ratio(correct, gold),
        "f1-score": f1_score(correct, gold, predicted),
    }


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean (0.0 of no values)."""
    return math.fsum(values) / len(values) if values else 0.0


def classification_report(
    targets: Sequence[str], predictions: Sequence[str], labels: Sequence[str] | None = None
) -> dict[str, Any]:
    """scikit-learn's ``classification_report(..., output_dict=True)``, in plain Python.

    ``labels`` defaults to every label in targets or predictions (sorted). When the labels do not
    cover every label that occurs, the report has ``micro avg`` instead of ``accuracy``. An empty
    label list gives ``{}``.
    """
    if len(targets) != len(predictions):
        raise ValueError(f"{len(targets)} targets but {len(predictions)} predictions")
    present = set(targets) | set(predictions)
    chosen = sorted(present) if labels is None else list(labels)
    if not chosen or not targets:
        return {}
    gold_counts = Counter(targets)
    predicted_counts = Counter(predictions)
    correct_counts = Counter(t for t, p in zip(targets, predictions, strict=True) if t == p)
    report: dict[str, Any] = {}
    for label in chosen:
        report[label] = {
            **prf(correct_counts[label], gold_counts[label], predicted_counts[label]),
            "support": gold_counts[label],
        }
    rows = [report[label] for label in chosen]
    support = sum(row["support"] for row in rows)
    correct = sum(correct_counts[label] for label in chosen)
    predicted = sum(predicted_counts[label] for label in chosen)
    if set(chosen) >= present:
        report["accuracy"] = ratio(correct, len(targets))
    else:
        report["micro avg"] = {**prf(correct, support, predicted), "support": support}
    report["macro avg"] = {
        **{key: mean([row[key] for row in rows]) for key in ("precision", "recall", "f1-score")},
        "support": support,
    }
    report["weighted avg"] = {
        **{
            key: ratio(math.fsum(row[key] * row["support"] for row in rows), support)
            for key in ("precision", "recall", "f1-score")
        },
        "support": support,
    }
    return report


def complete_report(report: dict[str, Any], accuracy: float | None = None) -> dict[str, Any]:
    """Rasa's ``make_classification_report_complete`` (in place; also returned): a report with
    ``accuracy`` gets a ``micro avg`` of the accuracy; one with ``micro avg`` gets ``accuracy``."""
    if "accuracy" in report and "micro avg" not in report and "macro avg" in report:
        value = report["accuracy"]
        report["micro avg"] = {"precision": value, "recall": value, "f1-score": value,
                               "support": report["macro avg"]["support"]}
    elif "micro avg" in report and "accuracy" not in report and accuracy is not None:
        report["accuracy"] = accuracy
    return report


def confusion_matrix(
    targets: Sequence[str], predictions: Sequence[str], labels: Sequence[str] | None = None
) -> tuple[list[str], list[list[int]]]:
    """``(labels, matrix)``: ``matrix[i][j]`` counts gold ``labels[i]`` predicted as ``labels[j]``.

    Labels default to every label in targets or predictions, sorted.
    """
    chosen = sorted(set(targets) | set(predictions)) if labels is None else list(labels)
    index = {label: i for i, label in enumerate(chosen)}
    matrix = [[0] * len(chosen) for _ in chosen]
    for target, prediction in zip(targets, predictions, strict=True):
        if target in index and prediction in index:
            matrix[index[target]][index[prediction]] += 1
    return chosen, matrix


def add_confused_with(
    report: dict[str, Any],
    labels: Sequence[str],
    matrix: Sequence[Sequence[int]],
    exclude: Iterable[str] = (),
    candidates: int = 3,
) -> dict[str, Any]:
    """Add Rasa's ``confused_with`` to each label row of ``report`` (in place; also returned).

    Per label: the ``candidates`` largest cells of its row (ties by label name), keeping those
    that are another label, not excluded, with a count above zero.
    """
    excluded = set(exclude)
    n = min(candidates, len(labels))
    for i, label in enumerate(labels):
        row = report.get(label)
        if label in excluded or not isinstance(row, dict):
            continue
        order = sorted(range(len(labels)), key=lambda j, r=matrix[i]: (-r[j], labels[j]))[:n]
        row["confused_with"] = {
            labels[j]: int(matrix[i][j])
            for j in order
            if j != i and labels[j] not in excluded and matrix[i][j] > 0
        }
    return report


def most_confused_pairs(
    labels: Sequence[str], matrix: Sequence[Sequence[int]], limit: int = 20
) -> list[dict[str, Any]]:
    """The largest off-diagonal cells: ``[{gold, predicted, count, share}]``, most frequent first.

    ``share`` is the count over the gold label's number of examples.
    """
    pairs = []
    for i, gold in enumerate(labels):
        total = sum(matrix[i])
        for j, predicted in enumerate(labels):
            if i != j and matrix[i][j] > 0:
                pairs.append(
                    {"gold": gold, "predicted": predicted, "count": int(matrix[i][j]),
                     "share": ratio(matrix[i][j], total)}
                )
    pairs.sort(key=lambda p: (-p["count"], p["gold"], p["predicted"]))
    return pairs[:limit]
