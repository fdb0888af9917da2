"""CountVectorsFeaturizer: bag of word or character n-grams (Rasa's, sklearn-compatible).

For each token a *processed token* is built: the lemma (if ``use_lemma`` and a tokenizer set
one) or the text, runs of digits ``\\b[0-9]+\\b`` replaced by ``__NUMBER__``, lowercased, and
``OOV_words`` replaced by ``OOV_token``. The vocabulary is fitted on the training sentences
(processed tokens joined by spaces), exactly as sklearn's ``CountVectorizer`` would with
``token_pattern=r"(?u)\\b\\w+\\b"``: features sorted alphabetically, ``min_df`` / ``max_df``
as document counts (int) or fractions of documents (float), ``max_features`` by corpus
frequency. Features:

* ``sequence`` ``(n_tokens × V)``: each processed token analysed as its own document;
* ``sentence`` ``(1 × V)``: the joined processed tokens analysed as one document
  (for ``text`` and ``response`` only).

``char`` and ``char_wb`` analyzers featurize ``text`` and ``response``. The ``word`` analyzer
also featurizes the label attributes ``intent`` and ``intent_response_key`` (DIET's label
features): each label token is one feature, kept as written (not lowercased, no number
replacement, no frequency pruning), sequence features only. ``use_shared_vocab`` puts all
attributes into one vocabulary.

At inference a token that yields no known feature is replaced by ``OOV_token`` when the
vocabulary knows it (Rasa compares the whole token string with the vocabulary, which also
sent known words such as ``don't`` -> ``don``, ``t`` to OOV; we only do so when the token
would give an all-zero row).

In unspaced scripts (Chinese, Japanese, Thai) a tokenizer's words sit side by side with nothing
between them. For the ``char`` and ``char_wb`` sentence features, words that touch in the text
with such characters on both sides are joined without a space before the analysis, as the text
writes them, so character n-grams cross word boundaries there as they do in the raw text
(``周杰伦|的|歌`` gives ``伦的`` and ``的歌``; sklearn on ``" ".join(tokens)`` would not).
Text in spaced scripts has no such neighbours, so its features are unchanged.

The n-gram analysis is done here in plain Python (sklearn's algorithms, re-implemented) with a
cache of feature ids per distinct token, so repeated words cost one dict lookup.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

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
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import LABEL_ATTRIBUTES, TEXT_ATTRIBUTES, Features, Message, Token
from nlu_engine.contract.training_data import TrainingData

logger = logging.getLogger(__name__)

#: the word pattern of Rasa 3's word analyzer (fixed there: its ``token_pattern`` is not read)
RASA_TOKEN_PATTERN = r"(?u)\b\w+\b"

NUMBER_TOKEN = "__NUMBER__"
VOCABULARIES_FILE = "vocabularies.json"
SHARED = "shared"

_NUMBER = re.compile(r"\b[0-9]+\b")
_WORD = re.compile(r"(?u)\b\w+\b")
_WHITE_SPACES = re.compile(r"\s\s+")
# characters of scripts written without spaces between words: CJK punctuation, kana, Han (and
# its extensions and compatibility forms), full-width forms, Thai, Lao
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]"
)
_CACHE_LIMIT = 200_000  # distinct tokens kept per attribute before the cache is reset

_EMPTY_IDS = np.zeros(0, dtype=np.int32)
_EMPTY_COUNTS = np.zeros(0, dtype=np.float32)

Analyzer = Literal["word", "char", "char_wb"]


# --- sklearn's analysis, re-implemented ---------------------------------------------------------
def strip_accents_unicode(s: str) -> str:
    try:
        s.encode("ascii", errors="strict")
        return s
    except UnicodeEncodeError:
        normalized = unicodedata.normalize("NFKD", s)
        return "".join(c for c in normalized if not unicodedata.combining(c))


def strip_accents_ascii(s: str) -> str:
    return unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode("ascii")


def word_ngrams(words: list[str], min_n: int, max_n: int) -> list[str]:
    """sklearn ``CountVectorizer._word_ngrams`` (stop words already removed)."""
    if max_n == 1:
        return list(words)
    grams = list(words) if min_n == 1 else []
    start_n = max(min_n, 2)
    count = len(words)
    for n in range(start_n, min(max_n + 1, count + 1)):
        for i in range(count - n + 1):
            grams.append(" ".join(words[i : i + n]))
    return grams


def char_ngrams(doc: str, min_n: int, max_n: int) -> list[str]:
    """sklearn ``CountVectorizer._char_ngrams``."""
    doc = _WHITE_SPACES.sub(" ", doc)
    length = len(doc)
    grams = list(doc) if min_n == 1 else []
    for n in range(max(min_n, 2), min(max_n + 1, length + 1)):
        for i in range(length - n + 1):
            grams.append(doc[i : i + n])
    return grams


def char_wb_ngrams(doc: str, min_n: int, max_n: int) -> list[str]:
    """sklearn ``CountVectorizer._char_wb_ngrams``: n-grams inside space-padded words."""
    grams: list[str] = []
    for word in _WHITE_SPACES.sub(" ", doc).split():
        padded = f" {word} "
        length = len(padded)
        for n in range(min_n, max_n + 1):
            if n >= length:  # a short word is counted once, whole
                grams.append(padded)
                break
            for i in range(length - n + 1):
                grams.append(padded[i : i + n])
    return grams


# --- the component ------------------------------------------------------------------------------
class CountVectorsFeaturizer(Featurizer):
    """Sparse bag-of-n-grams features for tokens and sentences (see the module doc)."""

    provides = (SPARSE_FEATURES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(Featurizer.Config):
        analyzer: Analyzer = "word"
        min_ngram: int = param(1, low=1)
        max_ngram: int = param(1, low=1)
        lowercase: bool = True
        strip_accents: Literal["ascii", "unicode"] | None = None
        stop_words: str | list[str] | None = None
        min_df: int | float = param(1, low=0)
        max_df: int | float = param(1.0, low=0)
        max_features: int | None = param(None, low=1)
        OOV_token: str | None = None
        OOV_words: list[str] = param([])
        use_shared_vocab: bool = False
        use_lemma: bool = True
        alias: str | None = None
        #: Rasa 1's parameter, still in configs written for it (Rasa's own demo bot has it):
        #: Rasa 3 ignores it and always splits words with ``RASA_TOKEN_PATTERN``, as this does
        token_pattern: str | None = None

        def validate(self) -> None:
            super().validate()
            if self.token_pattern is not None and self.token_pattern != RASA_TOKEN_PATTERN:
                logger.warning("CountVectorsFeaturizer: token_pattern %r is ignored, as Rasa 3 ignores it: "
                               "words are always %r", self.token_pattern[:80], RASA_TOKEN_PATTERN)
            if self.min_ngram > self.max_ngram:
                raise ConfigError(
                    f"min_ngram ({self.min_ngram}) must not exceed max_ngram ({self.max_ngram})"
                )
            counts = isinstance(self.min_df, int) and isinstance(self.max_df, int)
            fractions = all(isinstance(v, float) and v <= 1.0 for v in (self.min_df, self.max_df))
            if (counts or fractions) and self.max_df < self.min_df:
                raise ConfigError(
                    f"max_df ({self.max_df}) must not be lower than min_df ({self.min_df})"
                )
            if isinstance(self.stop_words, str) and self.stop_words != "english":
                raise ConfigError(
                    f"stop_words '{self.stop_words}' is not supported: use 'english' or a list "
                    "of words"
                )

    config: Config

    def _text_attributes(self) -> tuple[str, ...]:
        return TEXT_ATTRIBUTES

    def _label_attributes(self) -> tuple[str, ...]:
        return LABEL_ATTRIBUTES if self.config.analyzer == "word" else ()

    def _stop_word_set(self) -> frozenset[str]:
        if self.config.analyzer != "word" or not self.config.stop_words:
            return frozenset()
        if isinstance(self.config.stop_words, str):
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

            return frozenset(ENGLISH_STOP_WORDS)
        return frozenset(self.config.stop_words)

    def _oov_token(self) -> str | None:
        if not self.config.OOV_token or self.config.analyzer != "word":
            return None
        return self.config.OOV_token.lower() if self.config.lowercase else self.config.OOV_token

    def _prepare(self) -> None:
        """Derived, unpersisted state: settings resolved once and empty caches."""
        self._stop_set = self._stop_word_set()
        self._oov = self._oov_token()
        words = self.config.OOV_words or []
        self._oov_words = frozenset(w.lower() if self.config.lowercase else w for w in words)
        self._accents = {"ascii": strip_accents_ascii, "unicode": strip_accents_unicode}.get(
            self.config.strip_accents or ""
        )
        self._processed: dict[str, str] = {}
        self._analysed: dict[str, tuple[list[str], list[str]]] = {}
        self._ids: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}

    # --- analysis -----------------------------------------------------------------------------
    def _process_token(self, raw: str) -> str:
        """The processed token: numbers replaced, lowercased, OOV_words replaced."""
        processed = self._processed.get(raw)
        if processed is None:
            processed = _NUMBER.sub(NUMBER_TOKEN, raw)
            if self.config.lowercase:
                processed = processed.lower()
            if self._oov and processed in self._oov_words:
                processed = self._oov
            if len(self._processed) > _CACHE_LIMIT:
                self._processed.clear()
            self._processed[raw] = processed
        return processed

    def _processed_tokens(self, tokens: list[Token]) -> list[str]:
        raw = [t.lemma or t.text for t in tokens] if self.config.use_lemma else [t.text for t in tokens]
        cache = self._processed
        return [cache.get(r) or self._process_token(r) for r in raw]

    def _sentence_tokens(self, tokens: list[Token], processed: list[str]) -> list[str]:
        """The processed tokens a sentence is analysed from: for the character analyzers,
        neighbours that touch in unspaced script are joined (see the module doc)."""
        if self.config.analyzer == "word" or len(tokens) < 2:
            return processed
        pieces = [processed[0]]
        for before, token, text in zip(tokens, tokens[1:], processed[1:], strict=False):
            touching = before.end == token.start and before.text and token.text
            if touching and _UNSPACED.match(before.text[-1]) and _UNSPACED.match(token.text[0]):
                pieces[-1] += text
            else:
                pieces.append(text)
        return pieces

    def _preprocess(self, doc: str) -> str:
        """sklearn's preprocessing of a document: lowercase, then strip accents."""
        if self.config.lowercase:
            doc = doc.lower()
        if self._accents is not None:
            doc = self._accents(doc)
        return doc

    def _analyse(self, token: str) -> tuple[list[str], list[str]]:
        """(n-grams of the token as a document, its words after stop-word removal)."""
        cached = self._analysed.get(token)
        if cached is not None:
            return cached
        doc = self._preprocess(token)
        words: list[str] = []
        if self.config.analyzer == "word":
            words = [w for w in _WORD.findall(doc) if w not in self._stop_set]
            grams = word_ngrams(words, self.config.min_ngram, self.config.max_ngram)
        elif self.config.analyzer == "char_wb":
            grams = char_wb_ngrams(doc, self.config.min_ngram, self.config.max_ngram)
        else:
            grams = char_ngrams(doc, self.config.min_ngram, self.config.max_ngram)
        if len(self._analysed) > _CACHE_LIMIT:
            self._analysed.clear()
        self._analysed[token] = (grams, words)
        return grams, words

    def _sentence_ngrams(self, tokens: list[str]) -> list[str]:
        """The n-grams of the joined tokens, as sklearn analyses ``" ".join(tokens)``."""
        config = self.config
        if config.analyzer == "char":
            return char_ngrams(self._preprocess(" ".join(tokens)), config.min_ngram, config.max_ngram)
        if config.analyzer == "char_wb" or config.max_ngram == 1:
            # no n-gram crosses a token boundary: the sentence is the sum of its tokens
            return [gram for token in tokens for gram in self._analyse(token)[0]]
        words = [word for token in tokens for word in self._analyse(token)[1]]
        return word_ngrams(words, config.min_ngram, config.max_ngram)

    # --- training -----------------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        self._prepare()
        documents: dict[str, list[list[str]]] = {}
        for attribute in self._text_attributes():
            documents[attribute] = [
                self._sentence_tokens(m.tokens[attribute], self._processed_tokens(m.tokens[attribute]))
                for m in data.messages
                if m.tokens.get(attribute)
            ]
        labels: dict[str, set[str]] = {
            attribute: {t.text for m in data.messages for t in m.tokens.get(attribute, [])}
            for attribute in self._label_attributes()
        }
        if self._oov:
            self._warn_if_oov_missing(documents)

        vocabularies: dict[str, dict[str, int]] = {}
        if self.config.use_shared_vocab:
            all_documents = [doc for docs in documents.values() for doc in docs]
            items = set(self._fit_ngrams(all_documents, SHARED))
            items.update(*labels.values())
            shared = _index(items)
            for attribute in (*documents, *labels):
                if documents.get(attribute) or labels.get(attribute):
                    vocabularies[attribute] = shared
        else:
            for attribute, docs in documents.items():
                if docs:
                    vocabularies[attribute] = _index(self._fit_ngrams(docs, attribute))
            for attribute, names in labels.items():
                if names:
                    vocabularies[attribute] = _index(names)
        self.vocabularies_ = {a: v for a, v in vocabularies.items() if v}

    def _fit_ngrams(self, documents: list[list[str]], attribute: str) -> list[str]:
        """The kept n-grams of the documents (sklearn's min_df / max_df / max_features)."""
        if not documents:
            return []
        doc_freq: Counter[str] = Counter()
        term_freq: Counter[str] = Counter()
        for tokens in documents:
            grams = self._sentence_ngrams(tokens)
            doc_freq.update(set(grams))
            if self.config.max_features is not None:
                term_freq.update(grams)

        n_docs = len(documents)
        high = _doc_count(self.config.max_df, n_docs)
        low = _doc_count(self.config.min_df, n_docs)
        # (with max_df < min_df on this data nothing is kept: a warning, as in Rasa)
        kept = sorted(g for g, df in doc_freq.items() if low <= df <= high)
        if self.config.max_features is not None and len(kept) > self.config.max_features:
            # the same (unstable) argsort as sklearn, so ties are broken alike
            frequencies = np.array([term_freq[g] for g in kept], dtype=np.int64)
            best = (-frequencies).argsort()[: self.config.max_features]
            kept = [kept[i] for i in sorted(best)]
        if not kept:
            logger.warning(
                "%s: no %s features are left after pruning (min_df=%s, max_df=%s); this "
                "attribute gets no features. Try a lower min_df or a higher max_df.",
                self.component_name(),
                attribute,
                self.config.min_df,
                self.config.max_df,
            )
        return kept

    def finetune(
        self, data: TrainingData, previous: Component, options: FinetuneOptions
    ) -> None:
        """Grow the stored vocabularies by what ``data`` adds: the n-grams this data keeps (the
        same rules as ``train``) that a vocabulary lacks are appended, alphabetically, so every
        stored feature column keeps its id. N-grams no longer in the data keep their columns.
        With ``max_features`` a vocabulary grows only up to that size."""
        stored = getattr(previous, "vocabularies_", None)
        if not isinstance(previous, CountVectorsFeaturizer) or stored is None:
            raise CannotResume("no stored vocabulary")
        self.train(data)  # what this data alone keeps
        fitted = self.vocabularies_
        attributes = sorted({*stored, *fitted})
        if self.config.use_shared_vocab:
            shared = self._grown(next(iter(stored.values()), {}), next(iter(fitted.values()), {}))
            grown = dict.fromkeys(attributes, shared)
        else:
            grown = {a: self._grown(stored.get(a, {}), fitted.get(a, {})) for a in attributes}
        self.vocabularies_ = {a: v for a, v in grown.items() if v}
        self._prepare()

    def data_fingerprint(self, data: TrainingData) -> str:
        """The examples only: it learns nothing from the synonym, regex or lookup sections."""
        return data.fingerprint(sections=False)

    def _grown(self, stored: dict[str, int], fitted: dict[str, int]) -> dict[str, int]:
        """``stored`` with the n-grams of ``fitted`` it lacks appended (ids unchanged)."""
        vocabulary = dict(stored)
        new = sorted(gram for gram in fitted if gram not in vocabulary)
        limit = self.config.max_features
        room = len(new) if limit is None else max(0, limit - len(vocabulary))
        for gram in new[:room]:
            vocabulary[gram] = len(vocabulary)
        if len(new) > room:
            logger.warning(
                "%s: the vocabulary is full (max_features=%s): %d new n-grams of the data are "
                "left out; train from scratch to choose the vocabulary again",
                self.component_name(), limit, len(new) - room,
            )
        return vocabulary

    def _warn_if_oov_missing(self, documents: dict[str, list[list[str]]]) -> None:
        if not any(self._oov in doc for docs in documents.values() for doc in docs):
            logger.warning(
                "%s: OOV_token '%s' was set, but it does not appear in the training data; "
                "add it to some examples or list words in OOV_words, otherwise unknown words "
                "are ignored.",
                self.component_name(),
                self.config.OOV_token,
            )

    # --- featurization ------------------------------------------------------------------------
    def _token_ids(self, attribute: str, token: str) -> tuple[np.ndarray, np.ndarray]:
        """Sorted vocabulary ids of a processed token and their counts (cached)."""
        cache = self._ids.setdefault(attribute, {})
        entry = cache.get(token)
        if entry is None:
            entry = self._ngram_ids(self.vocabularies_[attribute], self._analyse(token)[0])
            if len(cache) > _CACHE_LIMIT:
                cache.clear()
            cache[token] = entry
        return entry

    @staticmethod
    def _ngram_ids(vocabulary: dict[str, int], grams: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        counts: Counter[int] = Counter()
        for gram in grams:
            index = vocabulary.get(gram)
            if index is not None:
                counts[index] += 1
        if not counts:
            return _EMPTY_IDS, _EMPTY_COUNTS
        ids = sorted(counts)
        return (
            np.array(ids, dtype=np.int32),
            np.array([counts[i] for i in ids], dtype=np.float32),
        )

    def process(self, messages: list[Message]) -> None:
        if not hasattr(self, "vocabularies_"):
            raise RuntimeError(f"{self.component_name()} must be trained or loaded before use.")
        if not hasattr(self, "_ids"):
            self._prepare()
        origin = self.origin()
        for attribute in self._text_attributes():
            if attribute in self.vocabularies_:
                for message in messages:
                    tokens = message.tokens.get(attribute)
                    if tokens:
                        self._featurize_text(message, attribute, tokens, origin)
        for attribute in self._label_attributes():
            vocabulary = self.vocabularies_.get(attribute)
            if vocabulary:
                for message in messages:
                    tokens = message.tokens.get(attribute)
                    if tokens:
                        matrix = _one_hot([vocabulary.get(t.text) for t in tokens], len(vocabulary))
                        message.add_features(Features(matrix, "sequence", attribute, origin))

    def _featurize_text(
        self, message: Message, attribute: str, tokens: list[Token], origin: str
    ) -> None:
        size = len(self.vocabularies_[attribute])
        processed = self._processed_tokens(tokens)
        cache = self._ids.get(attribute, {})
        entries = [cache.get(token) or self._token_ids(attribute, token) for token in processed]
        if self._oov is not None:
            oov_entry = self._token_ids(attribute, self._oov)
            if len(oov_entry[0]):
                for i, entry in enumerate(entries):
                    if not len(entry[0]):
                        entries[i] = oov_entry
                        processed[i] = self._oov

        lengths = np.fromiter((len(e[0]) for e in entries), dtype=np.int32, count=len(entries))
        indptr = np.zeros(len(entries) + 1, dtype=np.int32)
        np.cumsum(lengths, out=indptr[1:])
        if indptr[-1]:
            indices = np.concatenate([e[0] for e in entries])
            data = np.concatenate([e[1] for e in entries])
        else:
            indices, data = _EMPTY_IDS, _EMPTY_COUNTS
        sequence = scipy.sparse.csr_matrix(
            (data, indices, indptr), shape=(len(entries), size), dtype=np.float32
        )
        message.add_features(Features(sequence, "sequence", attribute, origin))

        analyzer = self.config.analyzer
        pieces = self._sentence_tokens(tokens, processed)
        if (analyzer == "char_wb" and len(pieces) == len(processed)) or (
            analyzer == "word" and self.config.max_ngram == 1
        ):
            ids, inverse = np.unique(indices, return_inverse=True)
            counts = np.bincount(inverse, weights=data, minlength=len(ids)).astype(np.float32)
        else:
            ids, counts = self._ngram_ids(self.vocabularies_[attribute], self._sentence_ngrams(pieces))
        sentence = scipy.sparse.csr_matrix(
            (counts, ids.astype(np.int32), np.array([0, len(ids)], dtype=np.int32)),
            shape=(1, size),
            dtype=np.float32,
        )
        message.add_features(Features(sentence, "sentence", attribute, origin))

    # --- persistence --------------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        vocabularies = getattr(self, "vocabularies_", {})
        payload: dict[str, Any] = {"shared": self.config.use_shared_vocab, "vocabularies": {}}
        for attribute, vocabulary in vocabularies.items():
            key = SHARED if self.config.use_shared_vocab else attribute
            payload["vocabularies"][key] = sorted(vocabulary, key=vocabulary.__getitem__)
        if self.config.use_shared_vocab:
            payload["attributes"] = sorted(vocabularies)
        with open(Path(directory) / VOCABULARIES_FILE, "w", encoding="utf-8") as f:
            json.dump(payload, f, ensure_ascii=False)

    @classmethod
    def load(cls, directory: Path, config: CountVectorsFeaturizer.Config) -> CountVectorsFeaturizer:
        featurizer = cls(config)
        with open(Path(directory) / VOCABULARIES_FILE, encoding="utf-8") as f:
            payload = json.load(f)
        stored = {
            key: {gram: i for i, gram in enumerate(grams)}
            for key, grams in payload["vocabularies"].items()
        }
        if payload.get("shared"):
            shared = stored.get(SHARED, {})
            featurizer.vocabularies_ = {a: shared for a in payload.get("attributes", [])}
        else:
            featurizer.vocabularies_ = stored
        featurizer._prepare()
        return featurizer


# --- helpers ------------------------------------------------------------------------------------
def _index(items: Iterable[str]) -> dict[str, int]:
    """Alphabetical feature indices, as sklearn orders its vocabulary."""
    return {item: i for i, item in enumerate(sorted(items))}


def _doc_count(value: float, n_docs: int) -> float:
    """sklearn's rule: an int is a number of documents, a float in [0, 1] a fraction."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"document frequency {value!r} must be a number")
    if isinstance(value, int) or value > 1.0:
        return value
    return value * n_docs


def _one_hot(ids: list[int | None], size: int) -> scipy.sparse.csr_matrix:
    """One row per label token, a 1 at its vocabulary index (an unknown one gives a zero row)."""
    indptr = [0]
    indices = []
    for index in ids:
        if index is not None:
            indices.append(index)
        indptr.append(len(indices))
    return scipy.sparse.csr_matrix(
        (
            np.ones(len(indices), dtype=np.float32),
            np.array(indices, dtype=np.int32),
            np.array(indptr, dtype=np.int32),
        ),
        shape=(len(ids), size),
        dtype=np.float32,
    )
