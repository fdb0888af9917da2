"""The data that flows through a pipeline: Message, Token, Features.

A training example and a message to parse are both a ``Message``. Gold annotations live in
``intent`` and ``entities``; a parse starts from a Message with only ``text`` and the components
fill ``intent``, ``intent_confidence``, ``intent_ranking`` and ``entities`` (and ``language``,
when the pipeline has a language identifier).

Entities are plain dicts in Rasa's JSON form: ``entity``, ``start``, ``end``, ``value`` and
optionally ``role``, ``group``, ``confidence_entity``, ``extractor``, ``processors``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse

TEXT = "text"
INTENT = "intent"
RESPONSE = "response"
#: a retrieval intent with its response key, kept whole: "faq/ask_name"
INTENT_RESPONSE_KEY = "intent_response_key"
#: separates a retrieval intent from its response key in "faq/ask_name"
RESPONSE_IDENTIFIER_DELIMITER = "/"

#: attributes tokenized as free text (sentence-like)
TEXT_ATTRIBUTES: tuple[str, ...] = (TEXT, RESPONSE)
#: attributes that hold a label name
LABEL_ATTRIBUTES: tuple[str, ...] = (INTENT, INTENT_RESPONSE_KEY)

FeatureKind = Literal["sequence", "sentence"]


@dataclass
class Token:
    """A token with its character span in the message text."""

    text: str
    start: int
    end: int
    lemma: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Features:
    """Features one featurizer computed for one attribute of one message.

    ``sequence`` features have one row per token, ``sentence`` features one row.
    ``matrix`` is a ``scipy.sparse.csr_matrix`` (sparse) or a float32 ``np.ndarray`` (dense).
    """

    matrix: scipy.sparse.csr_matrix | np.ndarray
    kind: FeatureKind
    attribute: str
    origin: str
    #: each ``sequence`` row was computed with the whole message in view (a language model's
    #: hidden states), not from its token alone: DIET needs no transformer of its own over
    #: such rows to learn entities from few examples
    contextual: bool = False

    @property
    def is_sparse(self) -> bool:
        return scipy.sparse.issparse(self.matrix)


@dataclass(frozen=True)
class IdentifiedLanguage:
    """The language a message is written in, as a language identifier found it
    (``nlu_engine.featurizers.language_identifier``): ``name`` an ISO 639-1 code of
    ``contract.languages.LANGUAGES``, or ``"unknown"`` (no letters, or below the identifier's
    threshold); ``confidence`` from 0 to 1."""

    name: str
    confidence: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "confidence": float(self.confidence)}


#: ``IdentifiedLanguage.name`` when the language could not be told
UNKNOWN_LANGUAGE = "unknown"


@dataclass
class Message:
    """One training example or one message to parse."""

    text: str
    intent: str | None = None
    entities: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    # Predictions (and gold confidence 1.0 for training data).
    intent_confidence: float = 0.0
    intent_ranking: list[dict[str, Any]] = field(default_factory=list)
    # Retrieval intents: "faq/ask_name" is kept whole here; ``intent`` holds "faq".
    intent_response_key: str | None = None
    response_selector: dict[str, Any] | None = None
    # Filled by tokenizers and featurizers, per attribute ("text", "intent", ...).
    tokens: dict[str, list[Token]] = field(default_factory=dict)
    features: list[Features] = field(default_factory=list)
    # Free-form data other components may share (e.g. a spaCy doc); never serialised.
    extra: dict[str, Any] = field(default_factory=dict)
    # When the message was sent, in seconds since the epoch (Rasa's ``time``): Duckling's
    # reference time for "tomorrow"; None means now.
    time: float | None = None
    # The language the message is written in, when a language identifier ran (None otherwise);
    # the parse result shows it as ``language``.
    language: IdentifiedLanguage | None = None

    def get(self, attribute: str) -> str | None:
        """The string value of an attribute: the text, or the intent name."""
        if attribute == TEXT:
            return self.text
        if attribute == INTENT:
            return self.intent
        if attribute == RESPONSE:
            return self.extra.get(RESPONSE)
        return None

    def sparse_blocks(
        self, attribute: str, kind: FeatureKind, origins: list[str] | None = None
    ) -> list[scipy.sparse.csr_matrix]:
        """The sparse feature matrices ``features_for`` would stack side by side, unstacked."""
        return [
            f.matrix
            for f in self.features
            if f.attribute == attribute
            and f.kind == kind
            and f.is_sparse
            and (not origins or f.origin in origins)
        ]

    def features_for(
        self,
        attribute: str,
        kind: FeatureKind,
        sparse: bool,
        origins: list[str] | None = None,
    ) -> scipy.sparse.csr_matrix | np.ndarray | None:
        """All features of one attribute, kind and sparsity stacked side by side (None if none)."""
        found = [
            f.matrix
            for f in self.features
            if f.attribute == attribute
            and f.kind == kind
            and f.is_sparse == sparse
            and (not origins or f.origin in origins)
        ]
        if not found:
            return None
        if sparse:
            return scipy.sparse.hstack(found, format="csr")
        return np.concatenate(found, axis=-1).astype(np.float32)

    def add_features(self, features: Features) -> None:
        """Add features; a featurizer never overwrites another's."""
        self.features.append(features)

    def full_retrieval_intent_name(self) -> str | None:
        """``faq/ask_name`` when the intent is a retrieval intent, else None.

        As Rasa's ``_update_full_retrieval_intent``: when the intent is one of the response
        selector's ``all_retrieval_intents``, the response key its selector picked (the selector
        trained for that intent, else the ``default`` one; Rasa gives None there). Ours takes
        the best-ranked key of that intent, so the name always agrees with the intent. Without
        a selection, a gold ``intent_response_key`` of this intent.
        """
        intent = self.intent
        if not intent:
            return None
        selector = self.response_selector or {}
        if intent in selector.get("all_retrieval_intents", []):
            for name in (intent, "default"):
                ranking = (selector.get(name) or {}).get("ranking") or []
                for entry in ranking:
                    key = entry.get("intent_response_key")
                    if isinstance(key, str) and key.startswith(intent + "/"):
                        return key
        key = self.intent_response_key
        if key and key.startswith(intent + "/"):
            return key
        return None

    def as_parse_result(self) -> dict[str, Any]:
        """Rasa's ``/model/parse`` JSON for this message."""
        result: dict[str, Any] = {
            "text": self.text,
            "intent": {"name": self.intent, "confidence": float(self.intent_confidence)},
            "entities": [dict(e) for e in self.entities],
            "text_tokens": [[t.start, t.end] for t in self.tokens.get(TEXT, [])],
            "intent_ranking": [dict(r) for r in self.intent_ranking],
        }
        full_name = self.full_retrieval_intent_name()
        if full_name:
            result["intent"]["full_retrieval_intent_name"] = full_name
        if self.response_selector is not None:
            result["response_selector"] = self.response_selector
        if self.language is not None:
            result["language"] = self.language.as_dict()
        _refuse_non_finite(result)
        return result


def _refuse_non_finite(result: dict[str, Any]) -> None:
    """ValueError when a confidence of the parse result is NaN or infinite: strict JSON has no
    such number (Rasa's own clients refuse it), and only broken weights make one."""
    for where, value in _confidences(result):
        if isinstance(value, float | np.floating) and not math.isfinite(value):
            path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in where)
            raise ValueError(
                f"the parse result holds {value} at {path[1:81]}, which JSON cannot carry; the "
                "model's weights are broken: retrain the model or restore its archive"
            )


def _confidences(result: dict[str, Any]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(where, value) of every confidence of a parse result."""
    yield ("intent", "confidence"), result["intent"]["confidence"]
    if "language" in result:
        yield ("language", "confidence"), result["language"]["confidence"]
    for i, ranked in enumerate(result["intent_ranking"]):
        yield ("intent_ranking", i, "confidence"), ranked.get("confidence")
    for i, entity in enumerate(result["entities"]):
        for key, value in entity.items():
            if key.startswith("confidence"):
                yield ("entities", i, key), value
    for key, selected in (result.get("response_selector") or {}).items():
        if not isinstance(selected, dict):
            continue  # all_retrieval_intents
        where = ("response_selector", key)
        yield (*where, "response", "confidence"), selected.get("response", {}).get("confidence")
        for i, ranked in enumerate(selected.get("ranking", [])):
            yield (*where, "ranking", i, "confidence"), ranked.get("confidence")
