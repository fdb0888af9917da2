"""More entity examples from the values users already wrote: a training example with a ``city``
becomes several, each with its values swapped for others of the same type.

The values of a type are those annotated in the examples the network trains on (never the
held-out ones), the type's lookup table and the synonyms annotated with it
(``training_data/entity_values.py``). ``entity_swaps`` variants are drawn for each example
that has an entity (every entity of a variant gets another value of its type, where its type has
one), at most ``MAX_MULTIPLIED`` in all, round by round so that each example gets as many as any
other; the draw is seeded by ``random_seed``. The text is rebuilt piece by piece, so the new
offsets are exact, touching entities included. The variants are tokenized and featurized by the
components before DIET, as its training examples were (``link``), and join the network's
training only: the user's data, the calibration's held-out share and the sentence head never
see them. An epoch count given to the training shrinks by the share the variants add, so the
network takes as many optimizer steps as without them (the default epochs already aim at a
number of steps). A resumed training (fine-tuning) draws none, and neither does a network that
fine-tunes a language model (``trainable: true``).

A mixin of :class:`~nlu_engine.classifiers.diet.component.DIETClassifier`; its hooks:
``_learn_listed_values`` (in ``_fit``) and ``_multiplied`` (in ``_train_network``).
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Sequence
from typing import Any

from nlu_engine.contract.component import TOKENS, Component
from nlu_engine.contract.errors import NOTICE
from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import entity_values
from nlu_engine.training_data.alignment import split_tokens_at_annotations
from nlu_engine.training_data.entity_values import normalize

logger = logging.getLogger(__name__)

#: ``entity_swaps: auto``: this many variants an example, swapping only the values of the types
#: a lookup table or synonym lists (swapping annotated values among themselves did not pay:
#: BENCHMARKS.md, "Values users already wrote")
AUTO_SWAPS = 2
#: the most variants drawn in one training, whatever ``entity_swaps`` and the data's size: the
#: network's epoch grows by at most this many examples
MAX_MULTIPLIED = 2000


class MultipliedExamples:
    """DIET's ``entity_swaps``: variants of its training examples with other values swapped in."""

    config: Any
    #: the components before this one that annotate training examples (``link``)
    _annotators: tuple[Component, ...] = ()
    #: lookup-table and synonym values by type (``_learn_listed_values``)
    _listed_values: dict[str, list[str]] | None = None

    def link(self, before: Sequence[Component]) -> None:
        super().link(before)  # type: ignore[misc]
        self._annotators = tuple(c for c in before if c.processes_training_data)

    def _learn_listed_values(self, data: TrainingData) -> None:
        """Keep the lookup-table and synonym values of each type the data annotates."""
        if not self.config.entity_swaps:
            return
        values = entity_values.collect(data)
        self._listed_values = {kind: list(values.listed.get(kind, {}).values()) for kind in values.annotated}

    def fingerprint_with_values(self, data: TrainingData) -> str:
        """The examples' fingerprint, with the synonyms and lookup tables when values are
        swapped in (their change then trains the network again when fine-tuning)."""
        if not self.config.entity_swaps or not self.config.entity_recognition:
            return data.fingerprint(sections=False)
        return TrainingData(messages=data.messages, synonyms=data.synonyms,
                            lookup_tables=data.lookup_tables).fingerprint()

    def _swaps(self) -> tuple[int, bool]:
        """Variants an example, and whether only listed types are swapped (``auto``)."""
        if self.config.entity_swaps != "auto":
            return int(self.config.entity_swaps), False
        return (AUTO_SWAPS if any((self._listed_values or {}).values()) else 0), True

    def _multiplied(self, examples: list[Message], previous: Any,
                    epochs: int | None) -> tuple[list[Message], int | None]:
        """``examples`` and their annotated variants, and the epochs that keep the network's
        optimizer steps what they were (an epoch count given; ``None`` stays None: the default
        epochs already aim at a number of steps, ``spec.resolve_epochs``). Unchanged when
        resuming, or when ``entity_swaps`` is 0."""
        variants = self._variants(examples, previous)
        if not variants:
            return examples, epochs
        if epochs is not None:
            epochs = max(1, round(epochs * len(examples) / (len(examples) + len(variants))))
        return [*examples, *variants], epochs

    def _variants(self, examples: list[Message], previous: Any) -> list[Message]:
        swaps, only_listed = self._swaps()
        if (not swaps or not self.config.entity_recognition or previous is not None
                or self._listed_values is None):
            return []
        if any(getattr(c.config, "trainable", False) for c in self._annotators):
            logger.log(NOTICE, "%s: entity_swaps has no effect beside a fine-tuned language model "
                       "(trainable: true)", type(self).__name__)
            return []
        variants = swapped_variants(examples, self._listed_values, swaps, MAX_MULTIPLIED,
                                    self.config.random_seed, only_listed)
        for component in self._annotators:
            if not variants:
                break
            component.process_training_data(variants)
            if TOKENS in component.provides:
                split_tokens_at_annotations(variants)
        variants = [m for m in variants if m.tokens.get(TEXT)]
        logger.info("%s: %d examples with other values swapped in (%d an example)",
                    type(self).__name__, len(variants), swaps)
        return variants


def value_pool(examples: list[Message], listed: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per type, its distinct values (by :func:`normalize`): annotated ones first, then listed."""
    pool: dict[str, dict[str, str]] = {}
    for message in examples:
        for text, kind in entity_values.annotated(message):
            if (key := normalize(text)):
                pool.setdefault(kind, {}).setdefault(key, text)
    for kind, values in listed.items():
        if kind in pool:
            for value in values:
                if (key := normalize(value)):
                    pool[kind].setdefault(key, value)
    return {kind: list(values.values()) for kind, values in pool.items()}


def swappable(message: Message, pool: dict[str, list[str]]) -> list[dict[str, Any]] | None:
    """The message's entities by start, when at least one has another value to take and none
    overlap or is malformed; else None."""
    entities = sorted(message.entities, key=lambda e: (e.get("start", -1), e.get("end", -1)))
    end = 0
    for entity in entities:
        start, stop = entity.get("start"), entity.get("end")
        if not (isinstance(start, int) and isinstance(stop, int)
                and end <= start < stop <= len(message.text)):
            return None
        end = stop
    if not any(len(pool.get(str(e.get("entity")), ())) > 1 for e in entities):
        return None
    return entities


def swap(message: Message, entities: list[dict[str, Any]], pool: dict[str, list[str]],
         rng: random.Random) -> Message | None:
    """``message`` with each entity's text replaced by another value of its type (drawn from
    ``pool``), offsets recomputed; None when nothing changed."""
    pieces: list[str] = []
    swapped: list[dict[str, Any]] = []
    cursor = length = 0
    changed = False
    for entity in entities:
        old = message.text[entity["start"] : entity["end"]]
        new = _draw(pool.get(str(entity.get("entity")), []), old, rng)
        changed = changed or new != old
        between = message.text[cursor : entity["start"]]
        pieces += [between, new]
        start = length + len(between)
        length = start + len(new)
        swapped.append({**entity, "start": start, "end": length, "value": new})
        cursor = entity["end"]
    if not changed:
        return None
    pieces.append(message.text[cursor:])
    return dataclasses.replace(
        message, text="".join(pieces), entities=swapped, tokens={}, features=[],
        intent_ranking=[], extra={}, language=None,
    )


def _draw(values: list[str], old: str, rng: random.Random) -> str:
    """A value of ``values`` other than ``old`` (``old`` when there is none)."""
    if len(values) < 2:
        return old
    for _ in range(8):
        new = values[rng.randrange(len(values))]
        if normalize(new) != normalize(old):
            return new
    return old


def swapped_variants(examples: list[Message], listed: dict[str, list[str]], per_example: int,
                     cap: int, seed: int | None, only_listed: bool = False) -> list[Message]:
    """Up to ``per_example`` variants of each swappable example, at most ``cap`` in all, drawn
    round by round (each example its first variant before any its second), seeded;
    ``only_listed``: only the values of types ``listed`` has values of are swapped."""
    pool = value_pool(examples, listed)
    if only_listed:
        pool = {kind: values for kind, values in pool.items() if listed.get(kind)}
    candidates = [(m, e) for m in examples if (e := swappable(m, pool)) is not None]
    rng = random.Random(0 if seed is None else seed)
    variants: list[Message] = []
    for _ in range(per_example):
        for message, entities in candidates:
            if len(variants) >= cap:
                return variants
            if (variant := swap(message, entities, pool, rng)) is not None:
                variants.append(variant)
    return variants
