"""A pipeline: components built from a validated config, trained in order, run on batches."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any

from nlu_engine.assembly.config import PipelineConfig
from nlu_engine.contract.component import INTENT, TOKENS, Component, IntentClassifier
from nlu_engine.contract.errors import ConfigError, DataError
from nlu_engine.contract.message import Message
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.extractors.entity_chooser import connect_entity_choosers
from nlu_engine.training_data.alignment import split_tokens_at_annotations


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def fresh_copies(data: TrainingData) -> TrainingData:
    """The data with every example copied without tokens or features: tokenizers and featurizers
    annotate what they train on, and the caller's data (reused for another fold, pipeline or
    fine-tuning) must not collect duplicate features."""
    return data.with_messages([_fresh_copy(m) for m in data.messages])


def annotate_training_data(
    component: Component, messages: list[Message], log: Callable[[str], None] | None
) -> None:
    """Run a trained component over the training examples; after a tokenizer, split the tokens
    an entity annotation cuts (``training_data.alignment``), with one notice counting them."""
    component.process_training_data(messages)
    if TOKENS in component.provides:
        notice = split_tokens_at_annotations(messages)
        if notice and log:
            log(f"notice: {component.component_name()}: {notice}")


def _fresh_copy(message: Message) -> Message:
    """The example without tokens or features (gold annotations copied, not shared)."""
    return dataclasses.replace(
        message,
        entities=[dict(e) for e in message.entities],
        intent_ranking=list(message.intent_ranking),
        tokens={},
        features=[],
        extra=dict(message.extra),
    )


class Pipeline:
    """The trained (or untrained) components of one config, in order."""

    def __init__(
        self, config: PipelineConfig, components: list[Component], tunes_encoders: bool = False
    ) -> None:
        self.config = config
        self.components = components
        mark_superseded_rankings(components)
        #: a component fine-tunes another's encoder (``connect_trainable_encoders``): the two
        #: train together, so neither can be reused or resumed without the other
        self.tunes_encoders = tunes_encoders
        #: the parse runtime the components run in (``use_runtime``)
        self.runtime = "float32"

    @classmethod
    def build(cls, config: PipelineConfig) -> Pipeline:
        components = []
        for index, step in enumerate(config.steps):
            component = step.cls(step.config)  # validated once, when the config was read
            component.index = index
            component.language = config.language
            components.append(component)
        tuned = connect_trainable_encoders(components, config.source)
        connect_entity_choosers(components)
        for index, component in enumerate(components):
            component.link(components[:index])
        return cls(config, components, tunes_encoders=tuned > 0)

    def default_runtime(self) -> str:
        """The runtime the config names, else the first a component prefers, else float32."""
        preferred = [r for c in self.components if (r := c.default_runtime()) is not None]
        return self.config.runtime or (preferred[0] if preferred else "float32")

    def use_runtime(self, runtime: str) -> None:
        """Every component parses in ``runtime`` from now on (``nn.onnx_runtime``)."""
        self.runtime = runtime
        for component in self.components:
            component.use_runtime(runtime)

    def train(self, data: TrainingData, log: Callable[[str], None] | None = _stderr) -> None:
        """Train each component in order; tokenizers and featurizers then annotate the data."""
        if not data.messages:
            raise DataError("the training data holds no examples; add intents with examples")
        data = fresh_copies(data)
        total = len(self.components)
        for i, component in enumerate(self.components):
            name = component.component_name()
            start = time.perf_counter()
            component.train(data)
            if component.processes_training_data:
                annotate_training_data(component, data.messages, log)
            if log:
                log(f"[{i + 1}/{total}] {name} trained in {time.perf_counter() - start:.1f} s")

    def process(self, messages: list[Message]) -> list[Message]:
        """Run every component on ``messages`` (a parse), on one BLAS thread throughout: a parse's
        NumPy products are small, and after a product on two threads OpenBLAS's idle worker spins
        on the other core for a long while, taking it from ONNX Runtime's threads in the
        components after (BENCHMARKS.md, "One parse, to the kernel")."""
        with single_blas_thread():
            for component in self.components:
                component.process(messages)
        return messages

    def parse_batch(
        self, texts: list[str], times: list[float | None] | None = None
    ) -> list[dict[str, Any]]:
        """Parse results in order; ``times`` are the messages' times (seconds since the epoch,
        None for now), Duckling's reference times."""
        stamps = times if times is not None else [None] * len(texts)
        messages = self.process([Message(text=t, time=s) for t, s in zip(texts, stamps, strict=True)])
        return [m.as_parse_result() for m in messages]


def mark_superseded_rankings(components: list[Component]) -> None:
    """Mark each intent classifier whose ranking a later one replaces before any component reads
    it (DIET before the IntentCombiner): the last intent classifier's ranking is the message's,
    as in Rasa, so the earlier one need not calibrate and write its own. A component that
    requires the intent (FallbackClassifier, which reads the confidence) is a reader; one that
    keeps an earlier prediction when it has none (``replaces_ranking`` False: keyword matching)
    replaces nothing."""
    for i, component in enumerate(components):
        if not isinstance(component, IntentClassifier):
            continue
        component.ranking_superseded = False
        for later in components[i + 1:]:
            if INTENT in later.requires:
                break
            if INTENT in later.provides and getattr(later, "replaces_ranking", True):
                component.ranking_superseded = True
                break


def connect_trainable_encoders(components: list[Component], where: str) -> int:
    """Hand each encoder a featurizer offers for fine-tuning to the later component that reads
    its features, which must be exactly one that can fine-tune it; returns how many.

    A second reader would learn from the features before fine-tuning and meet the tuned ones
    when parsing, so it is refused, as is an encoder nothing fine-tunes.
    """
    connected = 0
    for i, component in enumerate(components):
        name = f"{component.component_name()} (step {i + 1})"
        try:
            encoder = component.trainable_encoder()
        except ConfigError as error:  # e.g. weights missing or not fitting: before anything trains
            text = str(error).removeprefix(f"{component.component_name()}: ")
            raise ConfigError(f"{where}: {name}: {text}") from None
        if encoder is None:
            continue
        origin = encoder.origin()
        readers = [(j, c) for j, c in enumerate(components) if j > i and c.reads_features_from(origin)]
        if not readers:
            raise ConfigError(
                f"{where}: {name} is trainable but no later component reads its features; add "
                "DIETClassifier after it or set trainable: false"
            )
        if len(readers) > 1:
            others = ", ".join(f"{c.component_name()} (step {j + 1})" for j, c in readers)
            raise ConfigError(
                f"{where}: {name} is trainable, so one component may read its features, but "
                f"{others} do: the others would parse with other features than they trained on; "
                f"leave '{origin}' out of their `featurizers:` lists or set trainable: false"
            )
        j, reader = readers[0]
        if not reader.accept_trainable_encoder(encoder):
            raise ConfigError(
                f"{where}: {name} is trainable, but {reader.component_name()} (step {j + 1}), "
                "which reads its features, cannot fine-tune it; use DIETClassifier there or set "
                "trainable: false"
            )
        connected += 1
    return connected
