"""token_alignment: sub-token rows to the engine's tokens, for split-per-token encoders (word
pieces) and split-per-text ones (SentencePiece with character offsets), and the pooling table
a network applies in its graph, the same mean as ``pool``."""

from __future__ import annotations

import numpy as np

from nlu_engine.featurizers.dense.token_alignment import overlap_spans, pool, span_weights, word_spans


def test_word_spans_follow_one_another_after_the_first_row() -> None:
    assert word_spans([2, 1, 0, 3], first_row=1) == [(1, 3), (3, 4), (4, 4), (4, 7)]
    assert word_spans([]) == []


def test_a_token_takes_every_piece_that_shares_a_character_with_it() -> None:
    # "▁wake" "▁7" "am" "▁x" over "wake 7am x" (each word piece holds the space before it)
    pieces = np.array([[0, 4], [4, 6], [6, 8], [8, 10]])
    tokens = [(0, 4), (5, 8), (9, 10)]
    assert overlap_spans(pieces, tokens) == [(0, 1), (1, 3), (3, 4)]
    # tokens that split a piece both take it; a token between pieces or past the text takes none
    assert overlap_spans(pieces, [(5, 6), (6, 7), (7, 8), (12, 13)]) == [(1, 2), (2, 3), (2, 3), (0, 0)]


def test_a_piece_of_no_character_overlaps_no_token() -> None:
    pieces = np.array([[0, 0], [0, 5], [5, 5], [5, 6]])  # BEGIN-like marks have (0, 0)
    assert overlap_spans(pieces, [(0, 5), (5, 6), (0, 0)]) == [(1, 2), (3, 4), (0, 0)]
    assert overlap_spans(np.zeros((0, 2), np.int64), [(0, 3)]) == [(0, 0)]


def test_pool_means_or_takes_the_first_row_and_leaves_an_empty_span_zero() -> None:
    states = np.arange(12, dtype=np.float32).reshape(4, 3)
    spans = [(0, 2), (2, 2), (2, 4)]
    mean = pool(states, spans)
    assert mean.dtype == np.float32 and mean.shape == (3, 3)
    np.testing.assert_array_equal(mean, [[1.5, 2.5, 3.5], [0, 0, 0], [7.5, 8.5, 9.5]])
    np.testing.assert_array_equal(pool(states, spans, first=True), [[0, 1, 2], [0, 0, 0], [6, 7, 8]])
    assert pool(states, []).shape == (0, 3)


def test_span_weights_are_the_pool_as_a_table() -> None:
    rng = np.random.default_rng(0)
    states = rng.normal(size=(7, 5)).astype(np.float32)
    spans = [(1, 3), (3, 3), (3, 6)]  # row 0 ([CLS]) and row 6 ([SEP]) belong to no token
    for first in (False, True):
        token, weight = span_weights(spans, len(states), first)
        assert token.dtype == np.int32 and weight.dtype == np.float32
        assert weight[0] == 0 and weight[6] == 0
        pooled = np.zeros((len(spans), 5), np.float32)
        np.add.at(pooled, token, weight[:, None] * states)
        np.testing.assert_allclose(pooled, pool(states, spans, first), rtol=1e-6, atol=1e-6)
