"""The combiner's members (``combiner.py``): what each is, how it is fitted with its held-out
predictions, and what it predicts at parse.

* a **sentence head** (``sentence_head.SentenceHead``) on each featurizer's dense sentence
  vector the messages carry;
* an **n-gram head** (``sparse_head.SparseHead``) on the sparse counts, its ``C`` the likeliest
  of ``sparse_head.CS`` on its cross-fitted predictions (:func:`likeliest_c`), its log
  probabilities weighed by the share of a message's tokens its vocabulary knows;
* a **recorded scorer** (DIET, any ``CalibratedIntentClassifier``): the raw probabilities it
  recorded (``classifiers/scores.py``) on the examples it held out and on each parsed message.

Each member's held-out predictions come from ``held_out.py``: the heads' by cross-fitting on
its folds, a recorded scorer's from the examples it held out for its own calibration. They are
spread over all examples, with a flag for those predicted: ``(probabilities [M, N], present [M])``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from nlu_engine.classifiers import held_out, scores
from nlu_engine.classifiers.calibration import MIN_HELD_OUT
from nlu_engine.classifiers.sentence_head import SentenceHead, sentence_vectors
from nlu_engine.classifiers.sparse_head import (
    CS,
    SparseHead,
    held_out_coverage,
    sparse_rows,
    tempered,
    token_coverage,
)
from nlu_engine.contract.message import TEXT, Message

#: a member's held-out predictions: probabilities [M, N] and a flag [M] for the examples predicted
HeldOut = tuple[np.ndarray, np.ndarray]
#: the kinds of member
KINDS = ("head", "sparse", "recorded")
#: the n-gram member's name
NGRAMS = "n-grams"


@dataclass
class Member:
    """One scorer: a head on one featurizer's sentence vector, or a recorded scorer."""

    kind: str  # "head", "sparse" or "recorded"
    name: str  # the featurizer's origin, "n-grams", or the scorer's name
    weight: float = 1.0
    head: SentenceHead | SparseHead | None = field(default=None, repr=False)


def head_origins(examples: list[Message], featurizers: Sequence[str]) -> list[str]:
    """The featurizers (of ``featurizers``; all when empty) whose dense sentence vectors every
    example carries."""
    origins: list[str] = []
    for f in examples[0].features:
        if (f.attribute == TEXT and f.kind == "sentence" and not f.is_sparse
                and (not featurizers or f.origin in featurizers) and f.origin not in origins):
            origins.append(f.origin)
    return [o for o in origins if sentence_vectors(examples, [o]) is not None]


def sentence_head(examples: list[Message], origin: str, labels: np.ndarray, n: int,
                  seed: int | None, assignment: np.ndarray) -> tuple[Member, HeldOut]:
    """The head on ``origin``'s vectors, fitted on every example, and its cross-fitted
    predictions on ``assignment``'s folds."""
    vectors = sentence_vectors(examples, [origin])
    assert vectors is not None  # head_origins checked

    def fit_predict(train: np.ndarray, train_labels: np.ndarray, held: np.ndarray) -> np.ndarray:
        return SentenceHead.fit(vectors[train], train_labels, n, seed).predict_proba(vectors[held])

    head = SentenceHead.fit(vectors, labels, n, seed)
    probabilities, rows = held_out.cross_fit(fit_predict, labels, n, assignment)
    return Member("head", origin, head=head), spread(probabilities, rows, len(examples))


def ngram_head(examples: list[Message], labels: np.ndarray, n: int, seed: int | None,
               assignment: np.ndarray, coverage: bool) -> tuple[Member, HeldOut] | None:
    """The n-gram head with the likeliest ``C`` (:func:`likeliest_c`), fitted on every example,
    and its cross-fitted predictions (weighed by each example's tokens' coverage by the other
    folds' vocabulary, with ``coverage``); None without sparse sentence features."""
    counts = sparse_rows(examples)
    if counts is None or counts.shape[1] == 0:
        return None
    idf = SparseHead.fit_idf(counts)
    c, probabilities, rows = likeliest_c(counts, labels, n, idf, seed, assignment)
    head = SparseHead.fit(counts, labels, n, c, idf, seed)
    if coverage:
        probabilities = tempered(probabilities, held_out_coverage(examples, assignment)[rows])
    return Member("sparse", NGRAMS, head=head), spread(probabilities, rows, len(examples))


def likeliest_c(counts: scipy.sparse.csr_matrix, labels: np.ndarray, n: int, idf: np.ndarray,
                seed: int | None, assignment: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The n-gram head's ``C``: of ``sparse_head.CS``, the likeliest on its cross-fitted
    predictions (the first when there are none); returns it with those predictions [H, N] and
    the examples [H] they are for."""
    best: tuple[float, float, np.ndarray, np.ndarray] | None = None
    for c in CS:
        def fit_predict(train: np.ndarray, train_labels: np.ndarray, held: np.ndarray,
                        c: float = c) -> np.ndarray:
            return SparseHead.fit(counts[train], train_labels, n, c, idf, seed).predict_proba(counts[held])

        probabilities, rows = held_out.cross_fit(fit_predict, labels, n, assignment)
        loss = -float(np.mean(np.log(np.maximum(probabilities[np.arange(len(rows)), labels[rows]],
                                                1e-12)))) if len(rows) else 0.0
        if best is None or loss < best[0]:
            best = (loss, c, probabilities, rows)
    assert best is not None
    return best[1], best[2], best[3]


def recorded(examples: list[Message], intents: list[str]) -> tuple[list[tuple[Member, HeldOut]], list[str]]:
    """A member for each recorded scorer with at least ``MIN_HELD_OUT`` held-out predictions,
    and the names (with their counts) of those with fewer."""
    members, left_out = [], []
    for name in scores.scorers_on(examples):
        probabilities, present = scores.gather(examples, name, intents)
        if int(present.sum()) >= MIN_HELD_OUT:
            members.append((Member("recorded", name), (probabilities, present)))
        else:
            left_out.append(f"{name} ({int(present.sum())} held out)")
    return members, left_out


def predict(messages: list[Message], members: list[Member], intents: list[str],
            vectors_of: dict[str, np.ndarray | None], coverage: bool) -> list[np.ndarray]:
    """Each of ``members``' probabilities [B, N] at parse; ``vectors_of``: each sentence head's
    input vectors; ``coverage``: the n-gram head weighs by the messages' token coverage."""
    out = []
    for member in members:
        if isinstance(member.head, SparseHead):
            counts = sparse_rows(messages, width=len(member.head.idf))
            if counts is None:  # messages without the features: an empty row
                counts = scipy.sparse.csr_matrix((len(messages), len(member.head.idf)))
            probabilities = member.head.predict_proba(counts)
            if coverage:
                probabilities = tempered(probabilities, token_coverage(messages))
            out.append(probabilities)
        elif member.head is not None:
            vectors = vectors_of[member.name]
            if vectors is None:  # messages without the features: a blank vector
                vectors = np.zeros((len(messages), member.head.weights.shape[0]), np.float32)
            out.append(member.head.predict_proba(vectors))
        else:
            out.append(scores.gather(messages, member.name, intents)[0])
    return out


def spread(probabilities: np.ndarray, rows: np.ndarray, total: int) -> HeldOut:
    """Out-of-fold probabilities [H, N] of examples ``rows`` [H] spread to all ``total``
    examples [M, N], with a flag [M] for those predicted."""
    out = np.zeros((total, probabilities.shape[1]))
    present = np.zeros(total, bool)
    out[rows] = probabilities
    present[rows] = True
    return out, present
