"""SpacyFeaturizer: spaCy token vectors as dense features (Rasa's, aligned by character spans).

* ``sequence`` ``(n_tokens × D)``: spaCy's ``token.vector`` for each token: the static word
  vector (300-d for ``en_core_web_md``; zeros for a word without one) or, for a pipeline
  without static vectors such as ``en_core_web_sm``, its contextual ``tok2vec`` row (96-d).
  Tokens are matched to spaCy's by character span, so a ``token_pattern`` or another
  tokenizer still gets one row per token (the mean of the spaCy tokens it overlaps).
* ``sentence`` ``(1 × D)``: ``pooling`` (``mean`` or ``max``) over the non-zero token vectors,
  or zeros when there are none.

Needs SpacyNLP (the doc) and a tokenizer (the tokens), usually SpacyTokenizer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from nlu_engine.contract.component import SPACY_DOC, TOKENS, DenseFeaturizer
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import TEXT_ATTRIBUTES, Features, Message, Token
from nlu_engine.loaders.spacy_nlp import get_doc

logger = logging.getLogger(__name__)
_WARNED_NO_VECTORS: set[int] = set()  # id(vocab) of pipelines already warned about


def doc_vectors(doc: Any) -> np.ndarray:
    """``token.vector`` for every token of a doc: float32 ``(len(doc), D)``."""
    vocab = doc.vocab
    if vocab.vectors.size == 0 and doc.tensor is not None and getattr(doc.tensor, "ndim", 0) == 2:
        width = doc.tensor.shape[1]
        if len(doc) == 0:
            return np.zeros((0, width), dtype=np.float32)
        return np.asarray(doc.tensor, dtype=np.float32)
    width = vocab.vectors_length
    if len(doc) == 0:
        return np.zeros((0, width), dtype=np.float32)
    return np.stack([np.asarray(t.vector, dtype=np.float32) for t in doc])


def align(doc: Any, vectors: np.ndarray, tokens: list[Token]) -> np.ndarray:
    """One row per token: the mean vector of the spaCy tokens whose spans overlap it
    (spaCy's whitespace tokens are never used)."""
    starts = np.array([t.idx for t in doc], dtype=np.int64)
    ends = starts + np.array([len(t.text) for t in doc], dtype=np.int64)
    words = np.array([bool(t.text.strip()) for t in doc], dtype=bool)
    rows = np.zeros((len(tokens), vectors.shape[1]), dtype=np.float32)
    for i, token in enumerate(tokens):
        hits = np.nonzero(words & (starts < token.end) & (ends > token.start))[0]
        if len(hits) == 1:
            rows[i] = vectors[hits[0]]
        elif len(hits) > 1:
            rows[i] = vectors[hits].mean(axis=0)
    return rows


def pool_non_zero(sequence: np.ndarray, pooling: str) -> np.ndarray:
    """Mean or max over the rows that are not all zero: ``(1, D)`` (zeros if none)."""
    nonzero = sequence[np.any(sequence != 0, axis=1)]
    if len(nonzero) == 0:
        return np.zeros((1, sequence.shape[1]), dtype=np.float32)
    pooled = nonzero.max(axis=0) if pooling == "max" else nonzero.mean(axis=0)
    return pooled[np.newaxis, :].astype(np.float32)


class SpacyFeaturizer(DenseFeaturizer):
    """spaCy word vectors per token and their pooled sentence vector (see the module doc)."""

    requires = (SPACY_DOC, TOKENS)
    learns_from_data = False

    @dataclass(frozen=True, kw_only=True)
    class Config(DenseFeaturizer.Config):
        pooling: Literal["mean", "max"] = "mean"
        alias: str | None = None

    config: Config

    def process(self, messages: list[Message]) -> None:
        origin = self.origin()
        for message in messages:
            for attribute in TEXT_ATTRIBUTES:
                tokens = message.tokens.get(attribute)
                if not tokens:
                    continue
                doc = get_doc(message, attribute)
                if doc is None:
                    raise ConfigError(
                        "SpacyFeaturizer: a message has no spaCy doc; put SpacyNLP before it"
                    )
                if doc.vocab.vectors.size == 0 and id(doc.vocab) not in _WARNED_NO_VECTORS:
                    _WARNED_NO_VECTORS.add(id(doc.vocab))
                    logger.warning(
                        "SpacyFeaturizer: the spaCy model has no word vectors; using its "
                        "contextual tok2vec tensors instead (a model such as en_core_web_md "
                        "has 300-d vectors)"
                    )
                sequence = align(doc, doc_vectors(doc), tokens)
                message.add_features(Features(sequence, "sequence", attribute, origin))
                message.add_features(
                    Features(pool_non_zero(sequence, self.config.pooling), "sentence", attribute, origin)
                )
