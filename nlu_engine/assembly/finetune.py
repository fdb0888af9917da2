"""Incremental training: a trained pipeline continued on new data (``train --finetune``).

First the fine-tuning config must match the model's (:func:`check_compatible`): the same
language, the same components in the same order and the same parameters, apart from those a
component lists in ``Config.finetune_free`` (such as DIET's ``epochs``). A change of data only
is what fine-tuning is for.

Then each component gets a fingerprint (:func:`fingerprints`), as Rasa's graph cache does: its
name and parameters, what it learns from in the data (``Component.data_fingerprint``) and the
fingerprint of the last component before it that annotates the training data, so a change
upstream reaches everything after it. The model stores them in its manifest. In
:func:`finetune_pipeline` a component whose fingerprint did not change is **reused** as the model
stored it, and so is one that learns nothing from data. Every other one **resumes** from its
stored state (``Component.finetune``), or is **trained from scratch** when it cannot resume, or
when a component before it that annotates the training data was trained from scratch: that one's
feature columns no longer mean what they meant. The components never see the manifest.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nlu_engine.assembly.config import PipelineConfig
from nlu_engine.assembly.pipeline import Pipeline, annotate_training_data, fresh_copies
from nlu_engine.contract.component import CannotResume, Component, FinetuneOptions
from nlu_engine.contract.errors import ConfigError, DataError
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.nn.onnx_runtime import check_runtime, runtime_for_cpu

REUSED, RESUMED, RETRAINED = "reused", "resumed", "trained from scratch"


@dataclass
class Outcome:
    """What fine-tuning did with one component."""

    name: str
    decision: str  # REUSED, RESUMED or RETRAINED
    seconds: float = 0.0
    reason: str = ""  # why a component that learns from data was trained from scratch

    def as_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"name": self.name, "decision": self.decision,
                                  "seconds": round(self.seconds, 2)}
        if self.reason:
            record["reason"] = self.reason
        return record


def _digest(payload: Any) -> str:
    raw = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def _fingerprinted_params(step_cls: type[Component], params: dict[str, Any]) -> dict[str, Any]:
    free = step_cls.Config.finetune_free
    return {key: value for key, value in params.items() if key not in free}


def fingerprints(config: PipelineConfig, components: list[Component], data: TrainingData) -> list[str]:
    """One fingerprint per component (see the module doc)."""
    result: list[str] = []
    upstream = ""
    for step, component in zip(config.steps, components, strict=True):
        view = component.data_fingerprint(data)
        fingerprint = _digest([config.language, step.name,
                               _fingerprinted_params(step.cls, step.params), view, upstream])
        result.append(fingerprint)
        if component.processes_training_data:
            upstream = fingerprint
    return result


def check_compatible(model: PipelineConfig, config: PipelineConfig, where: str) -> None:
    """Refuse a config that differs from the model's in anything but data: one line naming the
    difference (language, a component, or a parameter)."""
    fix = "fine-tune with the model's config, or train from scratch without --finetune"

    def refuse(difference: str) -> ConfigError:
        return ConfigError(f"cannot fine-tune '{where}': {difference}; {fix}")

    if model.language != config.language:
        raise refuse(f"the model's language is '{model.language}', the config's '{config.language}'")
    for index, (old, new) in enumerate(zip(model.steps, config.steps, strict=False)):
        if old.cls is not new.cls:
            raise refuse(f"step {index + 1} is {old.name} in the model and {new.name} in the config")
    if len(model.steps) != len(config.steps):
        longer, side = (model, "model") if len(model.steps) > len(config.steps) else (config, "config")
        extra = ", ".join(step.name for step in longer.steps[min(len(model.steps), len(config.steps)):])
        raise refuse(f"only the {side}'s pipeline has {extra} (the model has "
                     f"{len(model.steps)} steps, the config {len(config.steps)})")
    for index, (old, new) in enumerate(zip(model.steps, config.steps, strict=True)):
        before = _fingerprinted_params(old.cls, old.params)
        after = _fingerprinted_params(new.cls, new.params)
        for key in sorted(set(before) | set(after)):
            if _digest(before.get(key)) != _digest(after.get(key)):
                raise refuse(
                    f"{new.name} (step {index + 1}) has '{key}' = {_shown(before.get(key))} in the "
                    f"model and {_shown(after.get(key))} in the config"
                )


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def finetune_pipeline(
    previous: Pipeline,
    stored: list[str] | None,
    config: PipelineConfig,
    data: TrainingData,
    options: FinetuneOptions,
    log: Callable[[str], None] | None = None,
) -> tuple[Pipeline, list[str], list[Outcome]]:
    """Continue ``previous`` (a loaded model, left unchanged) on ``data``.

    ``stored``: the fingerprints the model's manifest holds (None when it has none: every
    component that learns from data then resumes). Returns the new pipeline, its fingerprints
    and what happened to each component. ``config`` must have passed :func:`check_compatible`.
    """
    if not data.messages:
        raise DataError("the training data holds no examples; add intents with examples")
    # the model's names (none, for a model from before them): its features keep their origins
    pipeline = Pipeline.build(config, names=[c.step_name for c in previous.components])
    # the features learnt from are the ones parsed with, in the config's runtime where this CPU
    # is fast in it (``runtime_for_cpu``)
    runtime = runtime_for_cpu(check_runtime(pipeline.default_runtime()), explicit=True, training=True)
    pipeline.use_runtime(runtime)
    previous.use_runtime(runtime)
    current = fingerprints(config, pipeline.components, data)
    if stored is None or len(stored) != len(current):
        stored = [""] * len(current)
    changed = [new != old and component.learns_from_data
               for new, old, component in zip(current, stored, pipeline.components, strict=True)]
    if pipeline.tunes_encoders and any(changed):
        return _train_afresh(pipeline, current, data, log)
    # the training data is annotated only as far as a component still has to learn from it
    last = max((i for i, change in enumerate(changed) if change), default=-1)
    work = fresh_copies(data) if last >= 0 else data
    outcomes: list[Outcome] = []
    components: list[Component] = []
    from_scratch = ""  # the first component annotating the training data that starts afresh
    total = len(pipeline.components)
    for i, (new, old) in enumerate(zip(pipeline.components, previous.components, strict=True)):
        name = config.steps[i].name
        start = time.perf_counter()
        if not changed[i]:
            component, outcome = old, Outcome(name, REUSED)
        else:
            component, decision, reason = _resume_or_train(new, old, work, options, from_scratch)
            outcome = Outcome(name, decision, reason=reason)
            if decision == RETRAINED and component.processes_training_data:
                from_scratch = from_scratch or name
        if component.processes_training_data and i < last:
            annotate_training_data(component, work.messages, log)
        component.index, component.language = i, config.language
        components.append(component)
        outcome.seconds = time.perf_counter() - start
        outcomes.append(outcome)
        if log:
            took = "" if outcome.decision == REUSED else f" in {outcome.seconds:.1f} s"
            log(f"[{i + 1}/{total}] {name} {outcome.decision}{took}")
    tuned = Pipeline(config, components)
    tuned.runtime = runtime
    return tuned, current, outcomes


def _train_afresh(
    pipeline: Pipeline, current: list[str], data: TrainingData, log: Callable[[str], None] | None
) -> tuple[Pipeline, list[str], list[Outcome]]:
    """A pipeline that fine-tunes a language model inside a classifier, trained from scratch: the
    encoder and the classifier learn together, so one cannot resume without the other."""
    reason = "the pipeline fine-tunes a language model inside a classifier, and the two train together"
    if log:
        log(f"notice: every component is trained from scratch: {reason}")
    work, outcomes = fresh_copies(data), []
    total = len(pipeline.components)
    for i, (step, component) in enumerate(zip(pipeline.config.steps, pipeline.components, strict=True)):
        start = time.perf_counter()
        component.train(work)
        if component.processes_training_data:
            annotate_training_data(component, work.messages, log)
        outcomes.append(Outcome(step.name, RETRAINED, seconds=time.perf_counter() - start, reason=reason))
        if log:
            log(f"[{i + 1}/{total}] {step.name} {RETRAINED} in {outcomes[-1].seconds:.1f} s")
    return pipeline, current, outcomes


def _resume_or_train(
    new: Component, old: Component, data: TrainingData, options: FinetuneOptions, from_scratch: str
) -> tuple[Component, str, str]:
    """``new`` resumed from ``old``, or a fresh instance trained from scratch; the decision and,
    for a training from scratch, why."""
    if from_scratch:
        reason = f"{from_scratch} before it was trained from scratch"
    else:
        try:
            new.finetune(data, old, options)
            return new, RESUMED, ""
        except CannotResume as error:
            reason = str(error) or "cannot resume"
    fresh = type(new)(new.config)  # nothing a failed attempt left behind
    fresh.index, fresh.step_name, fresh.language = new.index, new.step_name, new.language
    fresh.train(data)
    return fresh, RETRAINED, reason


def summary_lines(outcomes: list[Outcome]) -> list[str]:
    """The progress output's summary: one notice naming the components that could not resume
    (with the reasons), then what was reused, resumed and trained from scratch."""
    lines = []
    scratch = [o for o in outcomes if o.decision == RETRAINED]
    if scratch:
        lines.append("notice: trained from scratch, as they cannot resume: "
                     + "; ".join(f"{o.name} ({o.reason})" for o in scratch))
    parts = []
    for decision in (REUSED, RESUMED, RETRAINED):
        names = [o.name for o in outcomes if o.decision == decision]
        if names:
            parts.append(f"{decision}: {', '.join(names)}")
    lines.append("fine-tuning: " + "; ".join(parts))
    return lines
