"""Experiments behind ``nlu-engine test``: score a model, cross-validate a config (configs are
compared in ``comparison``, with the same units).

Each experiment is made of units that a caller can run one at a time, in any process:
``train_and_evaluate`` trains a config on one part of the data and scores it on another;
``cross_validation_fold`` and ``comparison_point`` do that for one fold, or one run and
percentage, from nothing but the data, the config and the seed, so that a distributed runner
can hand them out. ``cross_validate`` and ``compare_configs`` run the units in turn and
aggregate their scores.

Seeds: an experiment's ``seed`` splits the data (``nlu_engine.training_data.split``); the
models train with the seeds of their configs (each component's ``random_seed``).

The model (and with it TensorFlow) is imported only when something is trained or parsed.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nlu_engine.classifiers.calibration import OUT_OF_SCOPE
from nlu_engine.contract.errors import DataError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.evaluation.labels import mean
from nlu_engine.evaluation.metrics import Evaluation, evaluate, extractors_in
from nlu_engine.evaluation.thresholds import model_threshold
from nlu_engine.training_data.split import stratified_folds

#: a config as ``train`` takes it: a file, a parsed dict, or None for the default pipeline
ConfigSource = str | Path | dict[str, Any] | None


class Progress(Protocol):
    """What an experiment reports while it runs; the CLI draws progress bars with it."""

    def begin(self, total: int, unit: str, desc: str) -> None:
        """``total`` units (folds, models) are about to run."""

    def status(self, text: str) -> None:
        """What runs now."""

    def parsed(self, done: int, total: int, desc: str) -> None:
        """``done`` of ``total`` test messages are parsed (called with 0 before the first batch)."""

    def advance(self, note: str = "") -> None:
        """One unit finished; ``note``, when given, is a line worth keeping."""

    def end(self) -> None:
        """The experiment is over (also after an error)."""


class Runner(Protocol):
    """Runs an experiment's units: ``function(**shared, **call)`` for each call, results in
    the calls' order. ``Sequential`` runs them here, one after another;
    ``nlu_engine.distributed.trials.RayRunner`` as Ray tasks."""

    def run(
        self,
        function: Callable[..., RunResult],
        shared: Mapping[str, Any],
        calls: Sequence[Mapping[str, Any]],
        progress: Progress,
    ) -> Iterator[RunResult]:
        """The result of each call, in order."""


class Sequential:
    """The ``Runner`` that trains one unit after another in this process: the default."""

    def run(
        self,
        function: Callable[..., RunResult],
        shared: Mapping[str, Any],
        calls: Sequence[Mapping[str, Any]],
        progress: Progress,
    ) -> Iterator[RunResult]:
        for call in calls:
            yield function(**shared, **call, progress=progress)


def trial_threads(cpus: int) -> dict[str, str]:
    """The environment that gives a training ``cpus`` threads (TensorFlow's and BLAS's).

    A model's numbers depend on how many threads summed them, so two runs of a unit are
    identical only with the same thread count: a distributed run sets these in each task, and a
    sequential run set the same way (``--cpus-per-trial``) reproduces it.
    """
    return {"TF_NUM_INTRAOP_THREADS": str(cpus), "TF_NUM_INTEROP_THREADS": str(cpus),
            "OMP_NUM_THREADS": str(cpus)}


class Quiet:
    """The ``Progress`` that reports nothing: the default."""

    def begin(self, total: int, unit: str, desc: str) -> None:
        pass

    def status(self, text: str) -> None:
        pass

    def parsed(self, done: int, total: int, desc: str) -> None:
        pass

    def advance(self, note: str = "") -> None:
        pass

    def end(self) -> None:
        pass


# --- one model ---------------------------------------------------------------------------------
def fresh_copy(data: TrainingData) -> TrainingData:
    """A copy of the training data whose messages training may annotate freely.

    Folds and splits share Message objects; training adds tokens and features to them in place.
    """
    messages = [
        dataclasses.replace(m, entities=[dict(e) for e in m.entities], tokens={}, features=[],
                            extra={}, intent_ranking=list(m.intent_ranking))
        for m in data.messages
    ]
    return data.with_messages(messages)


def pipeline_extractors(model: Any) -> list[str]:
    """Names of the model's components that extract entities, without those whose entities an
    ``EntityChooser`` removes."""
    names = []
    dropped = {name for component in model.pipeline.components
               for name in (component.dropped() if hasattr(component, "dropped") else ())}
    for component in model.pipeline.components:
        if "entities" in getattr(component, "provides", ()) and getattr(
            component, "entity_recognition", True
        ) and component.component_name() not in dropped:
            names.append(component.component_name())
    return names


def parse_all(
    model: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 256,
    progress: Progress | None = None,
    desc: str = "parsing",
) -> list[dict[str, Any]]:
    """Parse results of ``texts`` in order, reporting progress after each batch."""
    progress = progress or Quiet()
    results: list[dict[str, Any]] = []
    progress.parsed(0, len(texts), desc)
    for i in range(0, len(texts), batch_size):
        batch = list(texts[i : i + batch_size])
        results.extend(model.parse_batch(batch, batch_size=batch_size))
        progress.parsed(len(results), len(texts), desc)
    return results


def evaluate_model(
    model: Any,
    messages: Sequence[Message],
    *,
    progress: Progress | None = None,
    desc: str = "parsing",
    out_of_scope_intent: str = OUT_OF_SCOPE,
) -> tuple[Evaluation, list[dict[str, Any]], float]:
    """Parse the gold messages' texts and score the results: ``(evaluation, results, seconds)``.

    The entity extractors reported are the model's and any other found in the results; gold
    messages of ``out_of_scope_intent`` are out of scope; the share of fallbacks is reported at
    the model's FallbackClassifier threshold (``thresholds``).
    """
    start = time.perf_counter()
    results = parse_all(model, [m.text for m in messages], progress=progress, desc=desc)
    seconds = time.perf_counter() - start
    extractors = set(pipeline_extractors(model)) | set(extractors_in(results))
    evaluation = evaluate(messages, results, extractors, out_of_scope_intent,
                          model_threshold(getattr(model.pipeline, "components", [])))
    if evaluation.confidence is not None:
        evaluation.confidence.calibrated = model_is_calibrated(model)
    return evaluation, results, seconds


def model_is_calibrated(model: Any) -> bool | None:
    """Whether the model's intent classifiers calibrated their confidences (None: it has none
    that could)."""
    found = [c.calibration_.calibrated for c in getattr(model.pipeline, "components", [])
             if hasattr(c, "calibration_") and type(c).__name__ != "ResponseSelector"]
    return all(found) if found else None


def held_out_intents(data: TrainingData, k: int, seed: int) -> list[str]:
    """``k`` intents of ``data`` chosen by ``seed``, to train without and test as out of scope;
    ``k`` must leave at least two intents."""
    import random

    intents = sorted(data.intents)
    if not 0 < k <= len(intents) - 2:
        raise DataError(f"--hold-out-intents {k}: the data has {len(intents)} intents; hold out "
                        f"from 1 to {max(len(intents) - 2, 0)} so that at least two remain to train")
    return sorted(random.Random(seed).sample(intents, k))


def without_intents(train: TrainingData, test: Sequence[Message], intents: Sequence[str],
                    out_of_scope_intent: str) -> tuple[TrainingData, list[Message]]:
    """The training data without ``intents``, and the test messages with theirs relabelled as
    ``out_of_scope_intent`` (and their entities dropped: nothing was trained on them)."""
    unknown = set(intents)
    kept = dataclasses.replace(train, messages=[m for m in train.messages if m.intent not in unknown])
    relabelled = [dataclasses.replace(m, intent=out_of_scope_intent, entities=[]) if m.intent in unknown
                  else m for m in test]
    return kept, relabelled


@dataclass
class RunResult:
    """One config trained on one part of the data and scored on another."""

    evaluation: Evaluation
    golds: list[Message]
    results: list[dict[str, Any]]
    #: the entity extractors to report: the pipeline's and those found in the results
    extractors: list[str]
    num_train: int
    train_seconds: float
    parse_seconds: float


def train_and_evaluate(
    config: ConfigSource,
    train_data: TrainingData,
    test_messages: Sequence[Message],
    *,
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
    label: str = "model",
    out_of_scope_intent: str = OUT_OF_SCOPE,
) -> RunResult:
    """Train ``config`` (with ``overrides``) on a fresh copy of ``train_data``, parse the test
    messages and score them. The archive lives in a temporary folder and is gone afterwards.
    ``label`` names the run in progress messages."""
    from nlu_engine.assembly.config import load_config
    from nlu_engine.assembly.model import Model, custom_components, train

    progress = progress or Quiet()
    # the config is the user's own: the archive trained from it may load its custom components
    allowed = custom_components(load_config(config, list(overrides)))
    with tempfile.TemporaryDirectory(prefix="nlu-experiment-") as tmp:
        progress.status(f"{label}: training on {len(train_data.messages)}")
        start = time.perf_counter()
        archive = train(config, fresh_copy(train_data), out=tmp, fixed_model_name="model",
                        overrides=list(overrides), log=None)
        train_seconds = time.perf_counter() - start
        progress.status(f"{label}: parsing {len(test_messages)}")
        model = Model.load(archive, allowed)
        evaluation, results, parse_seconds = evaluate_model(
            model, test_messages, progress=progress, desc=f"{label} parsing",
            out_of_scope_intent=out_of_scope_intent,
        )
        extractors = set(pipeline_extractors(model)) | set(extractors_in(results))
    return RunResult(
        evaluation=evaluation, golds=list(test_messages), results=results,
        extractors=sorted(extractors), num_train=len(train_data.messages),
        train_seconds=train_seconds, parse_seconds=parse_seconds,
    )


def check_configs(configs: Sequence[ConfigSource], overrides: Sequence[str] = ()) -> None:
    """Raise the config's error now, before anything trains."""
    from nlu_engine.assembly.config import load_config

    for config in configs:
        load_config(config, list(overrides))


# --- cross-validation --------------------------------------------------------------------------
def cross_validation_folds(
    data: TrainingData, folds: int, seed: int
) -> list[tuple[TrainingData, TrainingData]]:
    """The ``(train, test)`` pairs of ``stratified_folds``; too little data is a ``DataError``."""
    try:
        return stratified_folds(data, folds, seed)
    except ValueError as error:
        raise DataError(str(error)) from None


def cross_validation_fold(
    config: ConfigSource,
    data: TrainingData,
    *,
    folds: int,
    fold: int,
    seed: int,
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
    hold_out_intents: int = 0,
    out_of_scope_intent: str = OUT_OF_SCOPE,
) -> RunResult:
    """Train on every fold of ``cross_validation_folds(data, folds, seed)`` but ``fold``
    (0-based) and score on that one; ``hold_out_intents``: train without that many intents
    (``held_out_intents``) and score their test messages as out of scope."""
    train_part, test_part = cross_validation_folds(data, folds, seed)[fold]
    test_messages = test_part.messages
    if hold_out_intents:
        unknown = held_out_intents(data, hold_out_intents, seed)
        train_part, test_messages = without_intents(train_part, test_messages, unknown, out_of_scope_intent)
    return train_and_evaluate(config, train_part, test_messages, overrides=overrides,
                              progress=progress, label=f"fold {fold + 1}",
                              out_of_scope_intent=out_of_scope_intent)


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


@dataclass
class CrossValidation:
    """The result of ``cross_validate``."""

    #: the held-out predictions of all folds scored together
    evaluation: Evaluation
    fold_summaries: list[dict[str, Any]]
    #: ``aggregate_folds`` of the fold summaries
    metrics: dict[str, dict[str, Any]]
    train_seconds: float
    parse_seconds: float


def cross_validate(
    config: ConfigSource,
    data: TrainingData,
    *,
    folds: int = 5,
    seed: int = 42,
    overrides: Sequence[str] = (),
    progress: Progress | None = None,
    runner: Runner | None = None,
    hold_out_intents: int = 0,
    out_of_scope_intent: str = OUT_OF_SCOPE,
) -> CrossValidation:
    """Train and score ``config`` on each of ``folds`` stratified folds split with ``seed``;
    ``runner`` runs the folds (default: one after another, here). ``hold_out_intents``: see
    ``cross_validation_fold``."""
    check_configs([config], overrides)
    cross_validation_folds(data, folds, seed)  # too little data fails before anything trains
    if hold_out_intents:
        held_out_intents(data, hold_out_intents, seed)  # so does a K that leaves too few intents
    # each fold splits the data again from the seed, as a worker given only the data would
    progress = progress or Quiet()
    shared = {"config": config, "data": data, "folds": folds, "seed": seed, "overrides": tuple(overrides),
              "hold_out_intents": hold_out_intents, "out_of_scope_intent": out_of_scope_intent}
    runs = (runner or Sequential()).run(cross_validation_fold, shared, [{"fold": f} for f in range(folds)],
                                        progress)
    golds: list[Message] = []
    results: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    extractors: set[str] = set()
    train_seconds = parse_seconds = 0.0
    flags: list[bool | None] = []  # each fold's model: calibrated or not
    thresholds: set[float | None] = set()  # each fold's FallbackClassifier threshold
    progress.begin(folds, "fold", "cross-validation")
    try:
        for fold, run in enumerate(runs):
            train_seconds += run.train_seconds
            parse_seconds += run.parse_seconds
            extractors.update(run.extractors)
            summaries.append(run.evaluation.summary())
            flags.append(run.evaluation.confidence.calibrated if run.evaluation.confidence else None)
            advice = run.evaluation.fallback_threshold
            thresholds.add(advice.threshold if advice else None)
            golds.extend(run.golds)
            results.extend(run.results)
            intent = summaries[-1].get("intent")
            score = f": intent accuracy {intent['accuracy']:.4f}" if intent else ""
            progress.advance(f"fold {fold + 1}/{folds}{score}")
    finally:
        progress.end()
    return CrossValidation(
        evaluation=_scored_together(golds, results, extractors, out_of_scope_intent, flags,
                                    thresholds.pop() if len(thresholds) == 1 else None),
        fold_summaries=summaries,
        metrics=aggregate_folds(summaries), train_seconds=train_seconds,
        parse_seconds=parse_seconds,
    )


def _scored_together(golds: list[Message], results: list[dict[str, Any]], extractors: set[str],
                    out_of_scope_intent: str, flags: Sequence[bool | None],
                    threshold: float | None = None) -> Evaluation:
    evaluation = evaluate(golds, results, extractors, out_of_scope_intent, threshold)
    if evaluation.confidence is not None:
        evaluation.confidence.calibrated = all(flags) if flags and None not in flags else None
    return evaluation


