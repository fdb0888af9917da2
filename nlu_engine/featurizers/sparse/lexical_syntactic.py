"""LexicalSyntacticFeaturizer: one-hot word-shape features of each token and its neighbours.

``features`` is a list of windows positions, each a list of feature names: with the default of
three lists, the first describes the token before, the second the token itself, the third the
token after. For ``w`` lists the relative positions are ``range(-(w // 2), w // 2 + w % 2)``,
so an even ``w`` looks one more token back. Positions outside the sentence contribute nothing.

Every (window position, feature name, value) seen in training gets a column: positions and
names sorted, values sorted as strings (``"True"``, ``"False"``, a suffix, a POS tag), with
contiguous offsets, as Rasa numbers them. Unseen values at inference are ignored. Only
``sequence`` features of ``text`` are produced (no sentence feature), multi-hot float32 CSR.
``pos`` / ``pos2`` read ``token.data["pos"]`` (set by the SpacyTokenizer).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
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
    param,
)
from nlu_engine.contract.errors import ConfigError, closest
from nlu_engine.contract.message import TEXT, Features, Message, Token
from nlu_engine.contract.training_data import TrainingData

FEATURE_TO_IDX_FILE = "feature_to_idx.json"
BEGIN_OF_SENTENCE = "BOS"
END_OF_SENTENCE = "EOS"
POS_TAG_KEY = "pos"
_SEPARATOR = "###"

_FUNCTIONS: dict[str, Callable[[Token], object]] = {
    "low": lambda token: token.text.islower(),
    "title": lambda token: token.text.istitle(),
    "prefix5": lambda token: token.text[:5],
    "prefix2": lambda token: token.text[:2],
    "suffix5": lambda token: token.text[-5:],
    "suffix3": lambda token: token.text[-3:],
    "suffix2": lambda token: token.text[-2:],
    "suffix1": lambda token: token.text[-1:],
    "pos": lambda token: token.data.get(POS_TAG_KEY),
    "pos2": lambda token: (
        token.data[POS_TAG_KEY][:2] if token.data.get(POS_TAG_KEY) is not None else None
    ),
    "upper": lambda token: token.text.isupper(),
    "digit": lambda token: token.text.isdigit(),
}
SUPPORTED_FEATURES: tuple[str, ...] = tuple(
    sorted({*_FUNCTIONS, BEGIN_OF_SENTENCE, END_OF_SENTENCE})
)

DEFAULT_FEATURES = [
    ["low", "title", "upper"],
    ["BOS", "EOS", "low", "upper", "title", "digit"],
    ["low", "title", "upper"],
]

# (window position, feature name) -> {value: column}
FeatureIndex = dict[tuple[int, str], dict[str, int]]


class LexicalSyntacticFeaturizer(Featurizer):
    """Sparse lexical and syntactic features in a sliding window over the tokens."""

    provides = (SPARSE_FEATURES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(Featurizer.Config):
        features: list[list[str]] = param(DEFAULT_FEATURES)
        alias: str | None = None

        def validate(self) -> None:
            """Every feature name is one of ``SUPPORTED_FEATURES``."""
            super().validate()
            for window in self.features:
                for feature in window:
                    if feature not in SUPPORTED_FEATURES:
                        raise ConfigError(
                            f"unknown feature '{feature}'{closest(str(feature), SUPPORTED_FEATURES)}"
                            f" in 'features'; allowed: {', '.join(SUPPORTED_FEATURES)}"
                        )

    config: Config

    def _window(self) -> range:
        size = len(self.config.features)
        half = size // 2
        return range(-half, half + size % 2)

    # --- raw features -------------------------------------------------------------------------
    def _raw_features(self, tokens: list[Token]) -> list[dict[tuple[int, str], str]]:
        """For each token: {(window position, feature name): value as a string}."""
        count = len(tokens)
        window = list(enumerate(self._window()))
        # each token's own feature values, computed once
        values: list[dict[str, str]] = []
        names = {feature for position in self.config.features for feature in position}
        for index, token in enumerate(tokens):
            own = {}
            for feature in names:
                if feature == BEGIN_OF_SENTENCE:
                    own[feature] = str(index == 0)
                elif feature == END_OF_SENTENCE:
                    own[feature] = str(index == count - 1)
                else:
                    own[feature] = str(_FUNCTIONS[feature](token))
            values.append(own)

        result = []
        for index in range(count):
            token_features: dict[tuple[int, str], str] = {}
            for position, offset in window:
                other = index + offset
                if 0 <= other < count:
                    for feature in self.config.features[position]:
                        token_features[(position, feature)] = values[other][feature]
            result.append(token_features)
        return result

    # --- training -----------------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        vocabulary: dict[tuple[int, str], set[str]] = defaultdict(set)
        for message in data.messages:
            for token_features in self._raw_features(message.tokens.get(TEXT, [])):
                for key, value in token_features.items():
                    vocabulary[key].add(value)
        index: FeatureIndex = {}
        offset = 0
        for key in sorted(vocabulary):
            values = sorted(vocabulary[key])
            index[key] = {value: offset + i for i, value in enumerate(values)}
            offset += len(values)
        self.feature_to_idx_ = index
        self.n_features_ = offset

    def finetune(
        self, data: TrainingData, previous: Component, options: FinetuneOptions
    ) -> None:
        """The stored feature values keep their columns; the data's new ones are appended."""
        stored = getattr(previous, "feature_to_idx_", None)
        if not isinstance(previous, LexicalSyntacticFeaturizer) or stored is None:
            raise CannotResume("no stored feature values")
        self.train(data)
        fitted = self.feature_to_idx_
        index: FeatureIndex = {key: dict(values) for key, values in stored.items()}
        size = previous.n_features_
        for key in sorted(fitted):
            values = index.setdefault(key, {})
            for value in sorted(v for v in fitted[key] if v not in values):
                values[value] = size
                size += 1
        self.feature_to_idx_, self.n_features_ = index, size

    def data_fingerprint(self, data: TrainingData) -> str:
        """The examples only: it learns nothing from the synonym, regex or lookup sections."""
        return data.fingerprint(sections=False)

    # --- featurization ------------------------------------------------------------------------
    def process(self, messages: list[Message]) -> None:
        if not hasattr(self, "feature_to_idx_"):
            raise RuntimeError(f"{self.component_name()} must be trained or loaded before use.")
        origin = self.origin()
        for message in messages:
            tokens = message.tokens.get(TEXT)
            if not tokens:
                continue
            indptr = [0]
            indices: list[int] = []
            for token_features in self._raw_features(tokens):
                row = []
                for key, value in token_features.items():
                    column = self.feature_to_idx_.get(key, {}).get(value)
                    if column is not None:
                        row.append(column)
                indices.extend(sorted(row))
                indptr.append(len(indices))
            matrix = scipy.sparse.csr_matrix(
                (
                    np.ones(len(indices), dtype=np.float32),
                    np.array(indices, dtype=np.int32),
                    np.array(indptr, dtype=np.int32),
                ),
                shape=(len(tokens), self.n_features_),
                dtype=np.float32,
            )
            message.add_features(Features(matrix, "sequence", TEXT, origin))

    # --- persistence --------------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        index = getattr(self, "feature_to_idx_", {})
        payload = {f"{position}{_SEPARATOR}{name}": values for (position, name), values in index.items()}
        with open(Path(directory) / FEATURE_TO_IDX_FILE, "w", encoding="utf-8") as f:
            json.dump(payload, f, ensure_ascii=False, sort_keys=True)

    @classmethod
    def load(cls, directory: Path, config: LexicalSyntacticFeaturizer.Config) -> LexicalSyntacticFeaturizer:
        featurizer = cls(config)
        with open(Path(directory) / FEATURE_TO_IDX_FILE, encoding="utf-8") as f:
            payload = json.load(f)
        index: FeatureIndex = {}
        for key, values in payload.items():
            position, name = key.split(_SEPARATOR, 1)
            index[(int(position), name)] = {str(v): int(i) for v, i in values.items()}
        featurizer.feature_to_idx_ = index
        featurizer.n_features_ = 1 + max((i for v in index.values() for i in v.values()), default=-1)
        return featurizer
