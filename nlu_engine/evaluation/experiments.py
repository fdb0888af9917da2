"""Experiments behind ``nlu-engine test``: what cross-validation makes of per-fold scores."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from nlu_engine.evaluation.metrics import mean


def flat_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The numeric headline metrics of a summary as ``{"intent accuracy": x, ...}``."""
    flat: dict[str, float] = {}
    intent = summary.get("intent")
    if intent:
        for key in ("accuracy", "macro_f1", "weighted_f1", "macro_precision", "macro_recall"):
            flat[f"intent {key}"] = float(intent[key])
    for name, scores in (summary.get("entities") or {}).items():
        for key in ("token_micro_f1", "exact_f1", "exact_precision", "exact_recall", "overlap_f1"):
            flat[f"{name} {key}"] = float(scores[key])
    return flat


def aggregate_folds(summaries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{metric: {"mean", "std", "folds"}}`` over per-fold summaries (population std)."""
    per_metric: dict[str, list[float]] = defaultdict(list)
    for summary in summaries:
        for key, value in flat_metrics(summary).items():
            per_metric[key].append(value)
    stats = {}
    for key, values in per_metric.items():
        average = mean(values)
        std = math.sqrt(mean([(v - average) ** 2 for v in values]))
        stats[key] = {"mean": average, "std": std, "folds": values}
    return stats
