"""A pipeline: components built from a validated config, trained in order, run on batches."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any

from nlu_engine.component import Component
from nlu_engine.config import PipelineConfig
from nlu_engine.errors import DataError
from nlu_engine.message import Message
from nlu_engine.training_data.training_data import TrainingData


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def fresh_copies(data: TrainingData) -> TrainingData:
    """The data with every example copied without tokens or features: tokenizers and featurizers
    annotate what they train on, and the caller's data (reused for another fold, pipeline or
    fine-tuning) must not collect duplicate features."""
    return data.with_messages([_fresh_copy(m) for m in data.messages])


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

    def __init__(self, config: PipelineConfig, components: list[Component]) -> None:
        self.config = config
        self.components = components

    @classmethod
    def build(cls, config: PipelineConfig) -> Pipeline:
        components = []
        for index, step in enumerate(config.steps):
            component = step.cls(**step.params)
            component.index = index
            component.language = config.language
            components.append(component)
        return cls(config, components)

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
                component.process(data.messages)
            if log:
                log(f"[{i + 1}/{total}] {name} trained in {time.perf_counter() - start:.1f} s")

    def process(self, messages: list[Message]) -> list[Message]:
        for component in self.components:
            component.process(messages)
        return messages

    def parse_batch(self, texts: list[str]) -> list[dict[str, Any]]:
        messages = self.process([Message(text=text) for text in texts])
        return [m.as_parse_result() for m in messages]
