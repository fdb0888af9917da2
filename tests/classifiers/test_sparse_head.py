"""The n-gram head's coverage: the share of a message's tokens its vocabularies know, at parse
and held out (against the other folds' columns), and the tempering that weighs the head by it."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from nlu_engine.classifiers.sparse_head import held_out_coverage, tempered, token_coverage
from nlu_engine.contract.message import Features, Message


def with_tokens(words: list[list[int]], chars: list[list[int]] | None = None, width: int = 20) -> Message:
    """A message whose tokens have the given word (and char) column ids (an empty list: a word
    the vocabulary does not know)."""
    message = Message(text=" ".join(f"w{i}" for i in range(len(words))))
    for origin, rows in (("words", words), ("chars", chars)):
        if rows is None:
            continue
        indptr = np.cumsum([0] + [len(r) for r in rows])
        indices = np.array([c for r in rows for c in r], np.int32)
        matrix = scipy.sparse.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(rows), width))
        message.features.append(Features(matrix, "sequence", "text", origin))
    return message


def test_coverage_is_the_share_of_tokens_every_vocabulary_knows() -> None:
    known_chars = [[1, 2], [3], [4, 5]]
    messages = [
        with_tokens([[7], [], [8]], known_chars),  # one word unknown
        with_tokens([[7], [9], [8]], [[1], [], [2]]),  # a token without known characters
        with_tokens([], []),  # no tokens
        Message(text="only sentence features"),
    ]
    np.testing.assert_allclose(token_coverage(messages), [2 / 3, 2 / 3, 0.0, 1.0])


def test_held_out_coverage_counts_only_the_other_folds_columns() -> None:
    messages = [
        with_tokens([[1], [2]]),  # fold 0: word 1 only here, word 2 also in fold 1
        with_tokens([[3], [1]]),  # fold 0: word 3 also in fold 1; word 1 only in fold 0
        with_tokens([[2], [3]]),  # fold 1
        with_tokens([[4]]),  # never held out: word 4 nowhere else
    ]
    assignment = np.array([0, 0, 1, -1])
    np.testing.assert_allclose(held_out_coverage(messages, assignment), [0.5, 0.5, 1.0, 0.0])
    # at parse the same messages are measured against the whole vocabulary they built
    np.testing.assert_allclose(token_coverage(messages), [1.0, 1.0, 1.0, 1.0])


def test_tempering_by_coverage_keeps_a_known_message_and_flattens_a_foreign_one() -> None:
    p = np.array([[0.7, 0.2, 0.1], [0.7, 0.2, 0.1]])
    out = tempered(p, np.array([1.0, 0.0]))
    np.testing.assert_allclose(out[0], p[0])
    np.testing.assert_allclose(out[1], [1 / 3] * 3)
    half = tempered(p, np.array([0.5, 0.5]))[0]
    np.testing.assert_allclose(half, np.sqrt(p[0]) / np.sqrt(p[0]).sum())
