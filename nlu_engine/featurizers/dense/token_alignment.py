"""Sub-token states of an encoder aligned to the engine's tokens: the one place every dense
featurizer that has them (a language model's word pieces, the sentence encoder's SentencePiece
pieces) turns them into one row per token.

A token's rows are a span ``(start, end)`` of the encoder's rows (empty: none, a zero vector):

* ``word_spans``: the encoder split each token on its own (a language model's WordPiece), so a
  token's rows follow one another, from the lengths of its pieces;
* ``overlap_spans``: the encoder split the whole text (SentencePiece), and each row stands for
  some characters of it; a token's rows are those from the first to the last that share a
  character with it (a piece across two tokens belongs to both);
* ``pool``: each token's row, the mean of its span's rows (or the first of them);
* ``span_weights``: the same mean as a row -> (token, weight) table, for a network that pools
  inside its graph (a fine-tuned language model's layer).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Span = tuple[int, int]


def word_spans(lengths: Sequence[int], first_row: int = 0) -> list[Span]:
    """Spans of rows of tokens whose pieces follow one another from ``first_row``, each token
    ``lengths[i]`` pieces long."""
    spans = []
    start = first_row
    for length in lengths:
        spans.append((start, start + length))
        start += length
    return spans


def overlap_spans(pieces: np.ndarray, tokens: Sequence[Span]) -> list[Span]:
    """For each token's characters ``(start, end)``, the span of ``pieces`` (the characters of
    each row, [P, 2], in the text's order) from the first to the last that overlaps it; (0, 0)
    when none does."""
    pieces = np.asarray(pieces, np.int64).reshape(-1, 2)
    real = pieces[:, 1] > pieces[:, 0]  # a piece of no character (an encoder's mark) overlaps nothing
    spans = []
    for start, end in tokens:
        (rows,) = np.nonzero(real & (pieces[:, 0] < end) & (pieces[:, 1] > start))
        spans.append((int(rows[0]), int(rows[-1]) + 1) if len(rows) else (0, 0))
    return spans


def pool(states: np.ndarray, spans: Sequence[Span], first: bool = False) -> np.ndarray:
    """One float32 row per span [len(spans), H]: the mean of its rows of ``states`` [L, H] (the
    first of them with ``first``), zeros for an empty span."""
    out = np.zeros((len(spans), states.shape[1]), dtype=np.float32)
    for token, (start, end) in enumerate(spans):
        if end > start:
            out[token] = states[start] if first else states[start:end].mean(axis=0)
    return out


def span_weights(spans: Sequence[Span], rows: int, first: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``pool`` as a table over ``rows`` rows: each row's token (int32) and weight (float32, 1 /
    the span's length, or 1 for a span's first row with ``first``; 0 for a row of no token)."""
    token = np.zeros(rows, np.int32)
    weight = np.zeros(rows, np.float32)
    for index, (start, end) in enumerate(spans):
        if end > start and first:
            token[start], weight[start] = index, 1.0
        elif end > start:
            token[start:end], weight[start:end] = index, 1.0 / (end - start)
    return token, weight
