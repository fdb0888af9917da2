"""GazetteerFeaturizer: which tokens lie in a value the user already wrote down for an entity type.

The values are those of ``training_data/entity_values.py``: annotated entities, lookup tables
(a table is of the entity type it is named after) and synonyms. For each type ``T`` (sorted),
two ``sequence`` columns: the token starts a known value of ``T``, the token continues one; a
``sentence`` row marks the types found anywhere. A value matches where it starts at a token's
start and ends at a token's end (case folded, white space collapsed), so touching tokens
(``10am``) and values that overlap each other are all marked.

On its own training examples a value the example alone annotated does not fire (leave one out):
at parse a value never seen does not fire either, so the network learns what a known value is
worth instead of learning that every entity is in the gazetteer.

Matching looks up each span of up to ``MAX_SPAN_TOKENS`` tokens (and no longer than the longest
value) in one dict: the cost grows with the message, not with the number of values, so lookup
tables of 100,000 values cost their dict (tens of MB) and nothing at each token.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse

from nlu_engine.contract.component import (
    SPARSE_FEATURES,
    CannotResume,
    Component,
    Featurizer,
    FinetuneOptions,
)
from nlu_engine.contract.message import TEXT, Features, Message, Token
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import entity_values
from nlu_engine.training_data.entity_values import normalize

VALUES_FILE = "gazetteer.json"
#: the longest span, in tokens, looked up as a value
MAX_SPAN_TOKENS = 12


class GazetteerFeaturizer(Featurizer):
    """Sparse features marking the tokens that start or continue a known value of each entity type."""

    provides = (SPARSE_FEATURES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        #: values annotated in the training examples: off by default (on fold 1 and xSID it
        #: moved exact F1 by -0.7 to +0.6 and intent accuracy by up to -0.7, BENCHMARKS.md,
        #: "Values users already wrote"), so the default reads only what users list
        entity_values: bool = False
        #: elements of the ``lookup:`` tables (a table is of the type it is named after)
        lookup_tables: bool = True
        #: surface forms and values of ``synonym:`` entries, of the types annotated with them
        synonyms: bool = True
        alias: str | None = None

    config: Config

    # --- learning the values --------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        values = entity_values.collect(data, data.messages if self.config.entity_values else [],
                                       lookup_tables=self.config.lookup_tables,
                                       synonyms=self.config.synonyms)
        self.types_ = values.types
        self._index(values)

    def finetune(self, data: TrainingData, previous: Component, options: FinetuneOptions) -> None:
        """The stored types keep their columns; new types are appended."""
        stored = getattr(previous, "types_", None)
        if not isinstance(previous, GazetteerFeaturizer) or stored is None:
            raise CannotResume("no stored gazetteer")
        self.train(data)
        self.types_ = [*stored, *(t for t in self.types_ if t not in stored)]

    def _index(self, values: entity_values.EntityValues) -> None:
        """``_known``: normalized value -> its types; ``_counts``: (value, type) -> annotations."""
        self._known: dict[str, set[str]] = {}
        self._counts: Counter[tuple[str, str]] = Counter()
        self._listed: set[tuple[str, str]] = set()
        for kind, counts in values.annotated.items():
            for text, n in counts.items():
                key = normalize(text)
                self._known.setdefault(key, set()).add(kind)
                self._counts[(key, kind)] += n
        for kind, listed in values.listed.items():
            for key in listed:
                self._known.setdefault(key, set()).add(kind)
                self._listed.add((key, kind))
        self._longest = max((len(k) for k in self._known), default=0)

    # --- features ---------------------------------------------------------------------------
    def process(self, messages: list[Message]) -> None:
        self._featurize(messages, leave_one_out=False)

    def process_training_data(self, messages: list[Message]) -> None:
        self._featurize(messages, leave_one_out=True)

    def _featurize(self, messages: list[Message], leave_one_out: bool) -> None:
        if not hasattr(self, "types_"):
            raise RuntimeError(f"{self.component_name()} must be trained or loaded before use.")
        if not self.types_:
            return
        column = {kind: 2 * i for i, kind in enumerate(self.types_)}
        origin = self.origin()
        for message in messages:
            tokens = message.tokens.get(TEXT)
            if not message.text or not tokens:
                continue
            own = (Counter((normalize(t), k) for t, k in entity_values.annotated(message))
                   if leave_one_out else None)
            sequence = np.zeros((len(tokens), 2 * len(self.types_)), dtype=np.float32)
            for first, last, kind in self.matches(message.text, tokens, own):
                if kind in column:
                    sequence[first, column[kind]] = 1.0
                    sequence[first + 1 : last + 1, column[kind] + 1] = 1.0
            sentence = sequence.max(axis=0, keepdims=True)
            message.features = [f for f in message.features if f.origin != origin or f.attribute != TEXT]
            message.add_features(Features(_csr(sequence), "sequence", TEXT, origin))
            message.add_features(Features(_csr(sentence), "sentence", TEXT, origin))

    def matches(self, text: str, tokens: list[Token],
                own: Counter[tuple[str, str]] | None = None) -> list[tuple[int, int, str]]:
        """``(first token, last token, type)`` of every known value in ``text``; with ``own``
        (a training example's annotations), a value only it annotated is left out."""
        found = []
        folded = text.casefold() if len(text.casefold()) == len(text) else None
        for first, start_token in enumerate(tokens):
            for last in range(first, min(len(tokens), first + MAX_SPAN_TOKENS)):
                span = text[start_token.start : tokens[last].end]
                if len(span) > self._longest + 8:  # white space collapses; a little slack
                    break
                key = (" ".join(folded[start_token.start : tokens[last].end].split())
                       if folded is not None else normalize(span))
                for kind in self._known.get(key, ()):
                    if own is None or self._known_elsewhere(key, kind, own):
                        found.append((first, last, kind))
        return found

    def _known_elsewhere(self, key: str, kind: str, own: Counter[tuple[str, str]]) -> bool:
        return (key, kind) in self._listed or self._counts[(key, kind)] > own[(key, kind)]

    # --- storage ----------------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        values: dict[str, list[str]] = {}
        for key, kinds in sorted(getattr(self, "_known", {}).items()):
            for kind in sorted(kinds):
                values.setdefault(kind, []).append(key)
        with open(Path(directory) / VALUES_FILE, "w", encoding="utf-8") as f:
            json.dump({"types": getattr(self, "types_", []), "values": values}, f, ensure_ascii=False)

    @classmethod
    def load(cls, directory: Path, config: GazetteerFeaturizer.Config) -> GazetteerFeaturizer:
        """The types and values as stored; no leave-one-out counts (parsing needs none)."""
        featurizer = cls(config)
        with open(Path(directory) / VALUES_FILE, encoding="utf-8") as f:
            stored = json.load(f)
        featurizer.types_ = [str(t) for t in stored["types"]]
        values = entity_values.EntityValues(
            listed={str(k): {str(v): str(v) for v in vs} for k, vs in stored["values"].items()})
        featurizer._index(values)
        return featurizer


def _csr(matrix: np.ndarray) -> scipy.sparse.csr_matrix:
    """``matrix`` (0 / 1) as CSR, built from its parts (a third of scipy's conversion's time)."""
    rows, columns = np.nonzero(matrix)
    indptr = np.zeros(matrix.shape[0] + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=matrix.shape[0]), out=indptr[1:])
    return scipy.sparse.csr_matrix((np.ones(len(rows), dtype=np.float32), columns.astype(np.int32), indptr),
                                   shape=matrix.shape)
