"""Comparing configs (``nlu-engine test --config A B``): each config trained on the same training
parts, with a share of the training examples left out (``percentages``), in several runs, and
scored on the same test parts (``experiments.train_and_evaluate``), as Rasa's
``rasa test nlu --config A B`` does. ``comparison_point`` is one run and percentage, from nothing
but the data, the configs and the seed, so that a distributed runner can hand the points out;
``compare_configs`` runs them in turn and collects their scores.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlu_engine.contract.errors import DataError
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.evaluation.experiments import (
    ConfigSource,
    Progress,
    Quiet,
    Runner,
    RunResult,
    Sequential,
    check_configs,
    train_and_evaluate,
)
from nlu_engine.training_data.split import train_test_split

COMPARISON_TRAINING_FRACTION = 0.8


INTENT_CURVES = ("intent_macro_f1", "intent_accuracy", "intent_weighted_f1")


def config_names(paths: Sequence[str]) -> list[str]:
    """Short unique names: the file stem, the path when stems clash, a counter for repeats."""
    stems = [Path(p).name.removesuffix(".yml").removesuffix(".yaml") for p in paths]
    names = [stem if stems.count(stem) == 1 else str(p) for stem, p in zip(stems, paths, strict=True)]
    unique: list[str] = []
    for name in names:
        candidate, k = name, 1
        while candidate in unique:
            k += 1
            candidate = f"{name} #{k}"
        unique.append(candidate)
    return unique


def comparison_split(
    data: TrainingData, seed: int, percent: float
) -> tuple[TrainingData, TrainingData]:
    """A run's stratified 80/20 split with ``seed``, with ``percent`` of the training part
    removed (stratified, same seed); too little data is a ``DataError``."""
    try:
        train_all, test_part = train_test_split(data, COMPARISON_TRAINING_FRACTION, seed)
    except ValueError as error:
        raise DataError(str(error)) from None
    if not test_part.messages:
        raise DataError("too few examples for an 80/20 split")
    if percent == 0:
        return train_all, test_part
    return train_test_split(train_all, 1 - percent / 100, seed)[0], test_part


def comparison_point(
    config: ConfigSource,
    data: TrainingData,
    *,
    seed: int,
    percent: float,
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
    label: str = "model",
) -> RunResult:
    """Train on ``comparison_split(data, seed, percent)``'s training part, score on its test part."""
    train_part, test_part = comparison_split(data, seed, percent)
    return train_and_evaluate(config, train_part, test_part.messages, overrides=overrides,
                              progress=progress, label=label)


@dataclass
class Comparison:
    """The result of ``compare_configs``: per config, F1 curves over runs × percentages."""

    configs: list[str]
    overrides: list[str]
    runs: int
    random_seed: int
    percentages: list[float]
    #: per run, the number of training examples at each percentage
    num_examples: list[list[int]]
    num_test_examples: list[int]
    #: per config name: ``config`` and runs × percentages lists of scores (see ``comparison_results``)
    results: dict[str, dict[str, Any]]
    seconds: float

    def to_json(self, data: Sequence[str]) -> dict[str, Any]:
        """``comparison.json``'s content; ``data`` names the data files."""
        return {
            "configs": self.configs, "overrides": self.overrides, "data": list(data),
            "runs": self.runs, "random_seed": self.random_seed, "percentages": self.percentages,
            "num_examples": self.num_examples, "num_test_examples": self.num_test_examples,
            "results": self.results, "seconds": self.seconds,
        }


def compare_configs(
    configs: Sequence[str | Path],
    data: TrainingData,
    *,
    runs: int = 3,
    percentages: Sequence[float] = (0, 25, 50, 75),
    seed: int = 42,
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
    runner: Runner | None = None,
) -> Comparison:
    """Per run ``r`` (split seed ``seed + r``) and percentage removed, train and score each
    config; ``runner`` runs the trainings (default: one after another, here)."""
    if not configs:
        raise ValueError("no configs to compare")
    if runs < 1:
        raise ValueError(f"runs must be at least 1 (got {runs})")
    if not all(0 <= p < 100 for p in percentages):
        raise ValueError(f"percentages must be in [0, 100) (got {list(percentages)})")
    points = [int(p) if float(p).is_integer() else p for p in percentages] or [0]
    check_configs(configs, overrides)
    names = config_names([str(c) for c in configs])
    progress = progress or Quiet()
    summaries: dict[tuple[int, int, str], dict[str, Any]] = {}
    num_examples = [[0] * len(points) for _ in range(runs)]
    num_test = [0] * runs
    keys = [(run, pi, name) for run in range(runs) for pi in range(len(points)) for name in names]
    paths = dict(zip(names, configs, strict=True))
    calls = [{"config": paths[name], "seed": seed + run, "percent": points[pi],
              "label": f"run {run + 1}, {points[pi]}% removed, {name}"} for run, pi, name in keys]
    start = time.perf_counter()
    progress.begin(len(calls), "model", "comparison")
    try:
        points_run = (runner or Sequential()).run(
            comparison_point, {"data": data, "overrides": tuple(overrides)}, calls, progress)
        for (run, pi, name), point in zip(keys, points_run, strict=True):
            summaries[run, pi, name] = point.evaluation.summary()
            num_examples[run][pi] = point.num_train
            num_test[run] = len(point.golds)
            progress.advance()
    finally:
        progress.end()
    return Comparison(
        configs=names, overrides=list(overrides), runs=runs, random_seed=seed, percentages=points,
        num_examples=num_examples, num_test_examples=num_test,
        results=comparison_results(names, [str(c) for c in configs], summaries, runs, len(points)),
        seconds=round(time.perf_counter() - start, 1),
    )


def comparison_results(
    names: Sequence[str],
    configs: Sequence[str],
    summaries: Mapping[tuple[int, int, str], Mapping[str, Any]],
    runs: int,
    num_percentages: int,
) -> dict[str, dict[str, Any]]:
    """Per config name: its ``config``, the intent scores (``intent_macro_f1``,
    ``intent_accuracy``, ``intent_weighted_f1``; empty when the data has no intents) and per
    extractor ``exact_f1`` and ``overlap_f1``, each as runs × percentages (0.0 where a model
    reported nothing). ``summaries`` are keyed by (run, percentage index, name)."""
    has_intents = any(summary.get("intent") for summary in summaries.values())
    results: dict[str, dict[str, Any]] = {}
    for name, config in zip(names, configs, strict=True):
        curves: dict[str, list[list[float]]] = {key: [] for key in INTENT_CURVES}
        entities: dict[str, dict[str, list[list[float]]]] = {}
        for run in range(runs):
            for key in INTENT_CURVES:
                curves[key].append([])
            for pi in range(num_percentages):
                summary = summaries[run, pi, name]
                intent = summary.get("intent") or {}
                for key in INTENT_CURVES:
                    curves[key][run].append(intent.get(key.removeprefix("intent_"), 0.0))
                for extractor, scores in summary["entities"].items():
                    slot = entities.setdefault(extractor, {
                        key: [[0.0] * num_percentages for _ in range(runs)]
                        for key in ("exact_f1", "overlap_f1")
                    })
                    for key in ("exact_f1", "overlap_f1"):
                        slot[key][run][pi] = scores[key]
        results[name] = {
            "config": config,
            **{key: values if has_intents else [] for key, values in curves.items()},
            "entities": entities,
        }
    return results
