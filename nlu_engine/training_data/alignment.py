"""Tokens that fit the annotations: training examples split a token an annotation cuts.

In unspaced text (Chinese, Japanese, Thai) an annotation often starts or ends inside a word the
tokenizer found: jieba reads ``去北京的`` as ``去`` ``北京的`` while ``[北京](city)`` is annotated.
Rasa then skips the annotation, or, with a language model, crashes (RasaHQ/rasa #10578, #7689).
Here the training example's token is split at the annotation's edges instead (``北京`` ``的``),
so every annotation falls on token boundaries and no example loses an entity. The split pieces
keep the token's data; their lemma is their text. Only training examples are changed: parsing
sees the tokenizer's own tokens, and an entity is predicted over whole tokens, whose character
offsets are exact.

This runs after every tokenizer, whichever it is (the pipeline calls
:func:`split_tokens_at_annotations`), and one notice counts the splits.

A tokenizer that learns from the data can do better at parse time: :func:`learn_word_splits`
gives, for each word the annotations cut, where they cut it most often (jieba's ``今天天气``
when ``[今天](date)`` is annotated), and :func:`apply_word_splits` cuts that word the same way
in any text, so parsing sees the tokens training saw (JiebaTokenizer's
``split_annotated_words``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from typing import Any

from nlu_engine.contract.message import TEXT, Message, Token

#: how many of the split annotations a notice quotes
SHOWN = 3


def cut_points(tokens: Sequence[Token], entities: Iterable[Mapping[str, Any]]) -> set[int]:
    """The annotations' edges that fall strictly inside a token."""
    edges = {int(e[key]) for e in entities for key in ("start", "end")}
    return {edge for edge in edges for t in tokens if t.start < edge < t.end}


def split_tokens(tokens: Sequence[Token], cuts: set[int], text: str) -> list[Token]:
    """``tokens`` (of ``text``) with each one cut at the offsets in ``cuts`` that fall inside it."""
    result: list[Token] = []
    for token in tokens:
        inside = sorted(c for c in cuts if token.start < c < token.end)
        if not inside:
            result.append(token)
            continue
        bounds = [token.start, *inside, token.end]
        for start, end in pairwise(bounds):
            piece = text[start:end]
            result.append(Token(piece, start, end, lemma=piece, data=dict(token.data)))
    return result


def split_tokens_at_annotations(messages: Sequence[Message]) -> str | None:
    """Split every training example's text token that an annotation cuts (see the module doc);
    one notice counting the splits, or None when every annotation already fits."""
    splits = changed = 0
    examples: list[str] = []
    for message in messages:
        tokens = message.tokens.get(TEXT)
        if not tokens or not message.entities or not isinstance(message.text, str):
            continue
        cuts = cut_points(tokens, message.entities)
        if not cuts:
            continue
        new_tokens = split_tokens(tokens, cuts, message.text)
        splits += len(new_tokens) - len(tokens)
        changed += 1
        message.tokens[TEXT] = new_tokens
        if len(examples) < SHOWN:
            examples.append(f"'{message.text}'")
    if not splits:
        return None
    return (
        f"{splits} split(s) of tokens in {changed} training example(s) where an entity annotation "
        f"starts or ends inside a token, so that no annotation is lost (e.g. {', '.join(examples)}); "
        "parsing keeps the tokenizer's tokens"
    )


def learn_word_splits(
    examples: Iterable[tuple[str, Sequence[Token], Sequence[Mapping[str, Any]]]],
) -> tuple[dict[str, list[int]], str | None]:
    """For each token text the annotations cut, the cut offsets inside it (relative to its
    start) seen most often; and one notice counting the splits (None without any).
    ``examples`` are (text, tokens, entities)."""
    seen: defaultdict[str, Counter[tuple[int, ...]]] = defaultdict(Counter)
    splits = changed = 0
    shown: list[str] = []
    for text, tokens, entities in examples:
        cuts = cut_points(tokens, entities)
        for token in tokens:
            inside = tuple(sorted(c - token.start for c in cuts if token.start < c < token.end))
            if inside:
                seen[token.text][inside] += 1
        splits += len(cuts)
        changed += bool(cuts)
        if cuts and len(shown) < SHOWN:
            shown.append(f"'{text}'")
    learned = {word: list(counts.most_common(1)[0][0]) for word, counts in sorted(seen.items())}
    if not splits:
        return learned, None
    word, cuts = next(iter(learned.items()))
    pieces = " ".join(word[a:b] for a, b in pairwise([0, *cuts, len(word)]))
    notice = (
        f"{splits} split(s) of tokens in {changed} training example(s) where an entity annotation "
        f"starts or ends inside a token (e.g. {', '.join(shown)}); the {len(learned)} word(s) cut "
        f"are cut the same way when parsing (e.g. {word} -> {pieces})"
    )
    return learned, notice


def apply_word_splits(tokens: Sequence[Token], splits: Mapping[str, Sequence[int]], text: str) -> list[Token]:
    """``tokens`` with every token whose text ``splits`` names cut at its offsets."""
    if not splits:
        return list(tokens)
    cuts = {t.start + offset for t in tokens for offset in splits.get(t.text, ())}
    return split_tokens(tokens, cuts, text) if cuts else list(tokens)
