"""RegexFeaturizer: one feature per regex or lookup table of the training data.

Patterns come from the training data's ``regex:`` entries (``use_regexes``) and ``lookup:``
tables (``use_lookup_tables``); a lookup table becomes one regex, its escaped elements joined
by ``|``, each wrapped in ``\\b…\\b`` when ``use_word_boundaries``. For each pattern:

* ``sequence`` ``(n_tokens × P)``: 1 where a match overlaps the token
  (``token.start < match.end and token.end > match.start``);
* ``sentence`` ``(1 × P)``: 1 if a match overlaps any token.

Each token also gets ``token.data["pattern"] = {name: bool}`` (used by the CRF entity
extractor); when two patterns share a name (a regex and a lookup table, say), the token is
marked if either matches. With no patterns the featurizer adds nothing.
"""

from __future__ import annotations

import json
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
from nlu_engine.contract.message import TEXT_ATTRIBUTES, Features, Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.patterns import PatternConfig, compile_patterns, extract_patterns

PATTERNS_FILE = "patterns.json"


class RegexFeaturizer(Featurizer):
    """Sparse features marking which tokens (and sentences) match the data's regexes."""

    provides = (SPARSE_FEATURES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(PatternConfig):
        alias: str | None = None

    config: Config

    def train(self, data: TrainingData) -> None:
        patterns = extract_patterns(
            data, self.config.use_regexes, self.config.use_lookup_tables, self.config.use_word_boundaries
        )
        self._compiled = compile_patterns(patterns, self.config.case_sensitive)
        self.patterns_ = patterns

    def data_fingerprint(self, data: TrainingData) -> str:
        """The regex and lookup sections: its patterns come from them alone."""
        return TrainingData(regex_features=data.regex_features,
                            lookup_tables=data.lookup_tables).fingerprint()

    def finetune(
        self, data: TrainingData, previous: Component, options: FinetuneOptions
    ) -> None:
        """The stored patterns, then the data's new ones: each stored pattern keeps its feature
        column (one no longer in the data too, until a training from scratch)."""
        stored = getattr(previous, "patterns_", None)
        if not isinstance(previous, RegexFeaturizer) or stored is None:
            raise CannotResume("no stored patterns")
        self.train(data)
        known = {(p["name"], p["pattern"]) for p in stored}
        added = [p for p in self.patterns_ if (p["name"], p["pattern"]) not in known]
        self.patterns_ = [*stored, *added]
        self._compiled = compile_patterns(self.patterns_, self.config.case_sensitive)

    def process(self, messages: list[Message]) -> None:
        if not hasattr(self, "patterns_"):
            raise RuntimeError(f"{self.component_name()} must be trained or loaded before use.")
        if not self.patterns_:
            return
        if not hasattr(self, "_compiled"):
            self._compiled = compile_patterns(self.patterns_, self.config.case_sensitive)
        origin = self.origin()
        names = [p["name"] for p in self.patterns_]
        size = len(self.patterns_)
        for message in messages:
            for attribute in TEXT_ATTRIBUTES:
                text = message.get(attribute)
                tokens = message.tokens.get(attribute)
                if not text or not tokens:
                    continue
                sequence = np.zeros((len(tokens), size), dtype=np.float32)
                flags = [dict.fromkeys(names, False) for _ in tokens]
                for column, regex in enumerate(self._compiled):
                    spans = [m.span() for m in regex.finditer(text)]
                    if not spans:
                        continue
                    for row, token in enumerate(tokens):
                        if any(token.start < end and token.end > start for start, end in spans):
                            sequence[row, column] = 1.0
                            flags[row][names[column]] = True
                for token, token_flags in zip(tokens, flags, strict=True):
                    token.data["pattern"] = token_flags
                sentence = sequence.max(axis=0, keepdims=True)
                message.add_features(
                    Features(scipy.sparse.csr_matrix(sequence), "sequence", attribute, origin)
                )
                message.add_features(
                    Features(scipy.sparse.csr_matrix(sentence), "sentence", attribute, origin)
                )

    def persist(self, directory: Path) -> None:
        with open(Path(directory) / PATTERNS_FILE, "w", encoding="utf-8") as f:
            json.dump(getattr(self, "patterns_", []), f, ensure_ascii=False, indent=1)

    @classmethod
    def load(cls, directory: Path, config: RegexFeaturizer.Config) -> RegexFeaturizer:
        featurizer = cls(config)
        with open(Path(directory) / PATTERNS_FILE, encoding="utf-8") as f:
            patterns = json.load(f)
        featurizer.patterns_ = [{"name": str(p["name"]), "pattern": str(p["pattern"])} for p in patterns]
        featurizer._compiled = compile_patterns(featurizer.patterns_, featurizer.config.case_sensitive)
        return featurizer
