"""Resuming DIET from a stored model: its weights mapped onto a network for the new data.

Fine-tuning (``DIETClassifier.finetune``) builds the network the new data needs, with fresh
weights, and then copies in every stored weight that still means the same thing
(:meth:`ResumePlan.merge`). Most weights keep their shape and are copied whole. The ones whose
size follows the data are mapped along their data-sized axes, row by row (each axis map gives,
for every new row, its stored row or -1 for a new one, which keeps its fresh initialisation):

- the sparse input tables (``seq_bag``, ``sent_bag``) [V, D]: per featurizer block (a resuming
  featurizer keeps its columns and appends new ones), stored rows move to their block's new
  offset and new n-grams get new rows;
- the label table (``label_dense``) [V_label, D]: the same, over the label features' blocks, or
  per intent when intents are one-hot;
- the tag heads: logits [U, K] (columns) and bias [K], CRF transitions [K, K] (rows and
  columns) and the entity-tag embedding [K_entity, E] (rows), by tag name, so new entity types,
  roles and groups add tags and removed ones drop theirs.

A stored weight whose shape changed in any other way means the network changed: CannotResume.

Rehearsal: each training example is known by a hash of its text and annotations. Examples the
stored model was trained on are "old"; every epoch trains on all new or changed examples and a
fresh random ``rehearsal_fraction`` of the old ones (:meth:`ResumePlan.epoch_pool`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.classifiers.diet.spec import Blocks, Vocabularies
from nlu_engine.contract.component import CannotResume, FinetuneOptions
from nlu_engine.contract.message import Message

#: an axis map: for each row of the new weight, its row in the stored one, or -1 for a new row
AxisMap = np.ndarray


def block_rows(stored: Blocks, current: Blocks) -> AxisMap:
    """The axis map of a table over side-by-side feature blocks: a block of the same origin keeps
    its stored rows (at its new offset), and its columns beyond the stored width are new."""
    offsets, start = {}, 0
    for origin, width in stored:
        offsets[str(origin)] = (start, int(width))
        start += int(width)
    rows = []
    for origin, width in current:
        mapped = np.full(int(width), -1, np.int64)
        if str(origin) in offsets:
            first, old_width = offsets[str(origin)]
            if old_width > int(width):
                raise CannotResume(f"the features of {origin} shrank ({old_width} -> {width} columns)")
            mapped[:old_width] = np.arange(first, first + old_width)
        rows.append(mapped)
    return np.concatenate(rows) if rows else np.zeros(0, np.int64)


def name_rows(stored: Sequence[str], current: Sequence[str]) -> AxisMap:
    """The axis map of rows that stand for names (intents, tags): a name keeps its stored row."""
    position = {name: i for i, name in enumerate(stored)}
    return np.array([position.get(name, -1) for name in current], np.int64)


def remap(stored: np.ndarray, fresh: np.ndarray, maps: Sequence[AxisMap | None], name: str) -> np.ndarray:
    """``fresh`` with the rows ``maps`` give copied from ``stored`` (an axis without a map must
    keep its length)."""
    if stored.ndim != fresh.ndim or len(maps) != fresh.ndim:
        raise CannotResume(f"the weight {name} changed shape ({stored.shape} -> {fresh.shape})")
    new_index, old_index = [], []
    for axis, rows in enumerate(maps):
        if rows is None:
            if stored.shape[axis] != fresh.shape[axis]:
                raise CannotResume(f"the weight {name} changed shape ({stored.shape} -> {fresh.shape})")
            new_index.append(np.arange(fresh.shape[axis]))
            old_index.append(np.arange(fresh.shape[axis]))
            continue
        if len(rows) != fresh.shape[axis] or (len(rows) and rows.max(initial=-1) >= stored.shape[axis]):
            raise CannotResume(f"the weight {name} does not match its stored layout")
        kept = np.flatnonzero(rows >= 0)
        new_index.append(kept)
        old_index.append(rows[kept])
    merged = fresh.copy()
    merged[np.ix_(*new_index)] = stored[np.ix_(*old_index)]
    return merged


def example_hashes(examples: list[Message], label_of: Callable[[Message], str | None]) -> np.ndarray:
    """A 64-bit hash per example of its text, label and entity annotations [N] uint64."""
    hashes = np.empty(len(examples), np.uint64)
    for i, message in enumerate(examples):
        entities = sorted(
            [str(e.get("entity")), e.get("start"), e.get("end"), str(e.get("role")),
             str(e.get("group")), str(e.get("value"))]
            for e in message.entities
        )
        raw = json.dumps([message.text, label_of(message), entities], ensure_ascii=False,
                         default=str)
        digest = hashlib.blake2b(raw.encode("utf-8"), digest_size=8).digest()
        hashes[i] = int.from_bytes(digest, "little")
    return hashes


@dataclass
class ResumePlan:
    """How a stored DIET model carries over to the new network (see the module doc)."""

    weights: dict[str, np.ndarray]  # the stored model's weights, by ``weight_names``
    axes: dict[str, tuple[AxisMap | None, ...]]  # per weight name, its axis maps
    rehearse: np.ndarray  # [N] bool per training example: the stored model was trained on it
    options: FinetuneOptions

    def merge(self, fresh: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The stored weights laid out as the new network's (``fresh``, by name); names only
        one side has are left out (new heads keep their initialisation)."""
        merged = {}
        for name, initial in fresh.items():
            stored = self.weights.get(name)
            if stored is not None:
                maps = self.axes.get(name, (None,) * initial.ndim)
                merged[name] = remap(stored, initial, maps, name)
        return merged

    def restore(self, network: Any) -> None:
        """Put the stored weights into ``network`` (a ``DIETNetwork`` just built)."""
        try:
            network.import_weights(self.merge(network.export_weights()))
        except ValueError as error:
            raise CannotResume(str(error)) from None

    def subset(self, keep: np.ndarray) -> ResumePlan:
        """The plan for the examples ``keep`` (the rest held out for evaluation)."""
        return replace(self, rehearse=self.rehearse[keep])

    def examples_per_epoch(self) -> int:
        old = int(self.rehearse.sum())
        return len(self.rehearse) - old + round(self.options.rehearsal_fraction * old)

    def epochs(self, full: int) -> int:
        """Fine-tuning's epochs: ``epoch_fraction`` of a full training's, none when nothing is
        left to train on."""
        if self.examples_per_epoch() == 0:
            return 0
        return max(1, math.ceil(self.options.epoch_fraction * full))

    def epoch_pool(self, rng: np.random.Generator) -> np.ndarray:
        """One epoch's examples: every new or changed one and a fresh sample of the old ones."""
        new = np.flatnonzero(~self.rehearse)
        old = np.flatnonzero(self.rehearse)
        count = round(self.options.rehearsal_fraction * len(old))
        picked = rng.choice(old, count, replace=False) if count else np.zeros(0, np.int64)
        return np.sort(np.concatenate([new, picked]))


@dataclass(frozen=True)
class StoredModel:
    """A trained DIET model as fine-tuning resumes from it."""

    data: Vocabularies  # what it had learned from its data
    weights: dict[str, np.ndarray]  # by ``weight_names``
    example_hashes: np.ndarray | None  # of the examples it was trained on (``example_hashes``)


def plan(
    previous: StoredModel, current: Vocabularies, hashes: np.ndarray, options: FinetuneOptions
) -> ResumePlan:
    """Map ``previous`` onto the vocabularies, intents, tags and input blocks the new data has
    just set (``current``; ``hashes`` of its training examples); CannotResume when the two do
    not fit."""
    old = previous.data
    if (old.seq_blocks is None or old.sent_blocks is None or old.label_blocks is None
            or previous.example_hashes is None):
        raise CannotResume("the model does not record its input layout (trained by an older "
                           "version, or with text labels)")
    if current.label_blocks is None:
        raise CannotResume("text labels are rebuilt on every training")
    if (old.dense_seq_dim, old.dense_sent_dim) != (current.dense_seq_dim, current.dense_sent_dim):
        raise CannotResume("the dense features changed width")
    if bool(old.label_blocks) != bool(current.label_blocks):
        raise CannotResume("the label features changed kind")
    label_rows = (block_rows(old.label_blocks, current.label_blocks) if current.label_blocks
                  else name_rows(old.intents, current.intents))
    axes: dict[str, tuple[AxisMap | None, ...]] = {
        names.kernel(names.SEQ_BAG): (block_rows(old.seq_blocks, current.seq_blocks or ()), None),
        names.kernel(names.SENT_BAG): (block_rows(old.sent_blocks, current.sent_blocks or ()), None),
        names.kernel(names.LABEL_DENSE): (label_rows, None),
    }
    for kind, vocabulary in current.tags.items():
        tags = name_rows(old.tags.get(kind, ()), vocabulary)
        axes[names.kernel(names.tag_logits(kind))] = (None, tags)
        axes[names.bias(names.tag_logits(kind))] = (tags,)
        axes[names.transitions(kind)] = (tags, tags)
        if kind == "entity":
            axes[names.kernel(names.ENTITY_TAG_EMBED)] = (tags, None)
    rehearse = np.isin(hashes, previous.example_hashes)
    return ResumePlan(previous.weights, axes, rehearse, options)
