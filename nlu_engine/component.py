"""The component contract: one small base class per kind.

A component's hyperparameters are the typed keyword arguments of its ``__init__`` (with
defaults); ``__init__`` only stores them. ``train(data)`` learns state (attributes ending in
``_``), ``process(messages)`` handles a batch and writes only what the component provides,
``persist(directory)`` writes JSON / ``.npz`` / weights into its own folder and ``load``
restores it: no pickle, no code executed on load.

``requires`` and ``provides`` name what flows between components: ``tokens``,
``sparse_features``, ``dense_features``, ``intent``, ``entities``, ``response``. The
pipeline checks them when it is built.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, ClassVar

from nlu_engine.message import Message
from nlu_engine.training_data.training_data import TrainingData

TOKENS = "tokens"
SPARSE_FEATURES = "sparse_features"
DENSE_FEATURES = "dense_features"
FEATURES = "features"  # either kind satisfies a requirement for "features"
INTENT = "intent"
ENTITIES = "entities"
RESPONSE = "response"
SPACY_DOC = "spacy_doc"


class Component:
    """Base of every pipeline component."""

    #: what this component adds to a message
    provides: ClassVar[tuple[str, ...]] = ()
    #: what must be provided by an earlier component (all of them)
    requires: ClassVar[tuple[str, ...]] = ()
    #: inclusive numeric ranges for parameters: {"epochs": (1, None)}
    ranges: ClassVar[dict[str, tuple[float | None, float | None]]] = {}
    #: True for components whose ``process`` must also run over the training data
    processes_training_data: ClassVar[bool] = False

    #: set by the pipeline: the component's place in the pipeline and the config's language
    index: int = 0
    language: str = "en"

    @classmethod
    def component_name(cls) -> str:
        return cls.__name__

    def get_config(self) -> dict[str, Any]:
        """The hyperparameters this instance was built with (the ``__init__`` arguments)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def train(self, data: TrainingData) -> None:
        """Learn state from the training data."""

    def process(self, messages: list[Message]) -> None:
        """Annotate a batch of messages in place."""

    def persist(self, directory: Path) -> None:
        """Write learned state into ``directory`` (created by the caller)."""

    @classmethod
    def load(cls, directory: Path, config: dict[str, Any]) -> Component:
        """Rebuild a trained component from ``config`` and what ``persist`` wrote."""
        return cls(**config)


class Tokenizer(Component):
    provides = (TOKENS,)
    processes_training_data = True


class Featurizer(Component):
    """A sparse featurizer unless it says otherwise (DenseFeaturizer)."""

    requires = (TOKENS,)
    provides = (SPARSE_FEATURES,)
    processes_training_data = True

    #: name written into Features.origin; a featurizer that takes ``alias`` uses it instead
    def origin(self) -> str:
        alias = getattr(self, "alias", None)
        return alias or f"{self.component_name()}_{self.index}"


class DenseFeaturizer(Featurizer):
    provides = (DENSE_FEATURES,)


class IntentClassifier(Component):
    provides = (INTENT,)


class EntityExtractor(Component):
    provides = (ENTITIES,)
