"""A pipeline: components built from a validated config, trained in order, run on batches."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from nlu_engine.assembly.config import PipelineConfig, step_names
from nlu_engine.contract.component import INTENT, TOKENS, Component, Featurizer, IntentClassifier
from nlu_engine.contract.errors import ConfigError, DataError
from nlu_engine.contract.message import Message
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.contract.training_data import TrainingData
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
    def build(cls, config: PipelineConfig, names: Sequence[str] | None = None) -> Pipeline:
        """The untrained components of ``config``, named (``names``: the steps' names in the
        pipeline, by default ``assembly.config.step_names``; fine-tuning keeps the model's) and linked.

        Every link is made here, in generic steps, never by one component reaching into another:
        the names lists of features (``featurizers``) resolve, each encoder offered for
        fine-tuning goes to its one reader, and each component's declared links are resolved
        (:func:`resolve_links`)."""
        names = step_names([step.name for step in config.steps]) if names is None else names
        components = []
        for index, (step, name) in enumerate(zip(config.steps, names, strict=True)):
            component = step.cls(step.config)  # validated once, when the config was read
            component.index, component.step_name, component.language = index, name, config.language
            components.append(component)
        resolve_feature_names(components)
        tuned = connect_trainable_encoders(components, config.source)
        resolve_links(components)
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


def resolve_feature_names(components: Sequence[Component]) -> None:
    """Let a component's ``featurizers`` list name a featurizer before it as models before step
    names did, by its class and position (``CountVectorsFeaturizer_3``): each such entry becomes
    that featurizer's origin now. The stored config keeps the list as written, so a model loads
    to the same lists; in a model from before names, origins are those names and nothing changes."""
    for i, component in enumerate(components):
        listed = getattr(component.config, "featurizers", None)
        if not listed or not isinstance(listed, list):
            continue
        earlier = [c for c in components[:i] if isinstance(c, Featurizer)]
        origins = {c.origin() for c in earlier}
        by_position = {f"{c.component_name()}_{c.index}": c.origin() for c in earlier}
        resolved = [name if name in origins else by_position.get(name, name) for name in listed]
        if resolved != listed:
            component.config = dataclasses.replace(component.config, featurizers=resolved)


def resolve_links(components: Sequence[Component]) -> None:
    """Resolve every declared link (``Component.links``): each earlier component a link accepts
    is asked what the link asks of it (``Link.asks``: an ``EntityChooser``'s extractors record
    their held-out entities), then the component takes what it needs to know of the components
    before it (``Component.link``: the combiner, its members' languages). The config check made
    sure every link finds a component (``assembly.config.check_links``)."""
    for i, component in enumerate(components):
        before = components[:i]
        for link in component.links(component.config):
            for earlier in before:
                if link.asks and link.accepts(type(earlier)):
                    setattr(earlier, link.asks, True)
        component.link(before)


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
