"""Near-duplicate messages grouped, so that one decision labels all of them.

Two messages are one group when their normalised texts are equal (Unicode NFKC, case folded,
zero-width and format characters and punctuation dropped, whitespace collapsed), or when their
token sets are similar: Jaccard similarity of at least ``threshold`` (default 0.8); groups are
merged transitively (union-find). Candidates are found exactly, without comparing every pair, by
prefix filtering: two token sets of Jaccard >= t share a token among the first ``|A| - ceil(t|A|) + 1``
of each, in one fixed order of tokens (longest first: long words are the rare ones). The order
depends on no other text, so the review's index (:mod:`nlu_engine.review.index`), which adds texts
as they are logged, finds the same pairs as :func:`group_texts` over the whole log.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Sequence

_WORD = re.compile(r"\w+")


def normalise(text: str) -> str:
    """The text two near-identical messages share: NFKC, case folded, format characters
    (zero-width, direction marks) and punctuation dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(_WORD.findall(text))


def group_key(text: str) -> str:
    """The key of a text: its normalised form; a text of no word (emoji, punctuation) keeps its
    stripped self behind a NUL, so it is grouped only with the same text."""
    return normalise(text) or "\0" + text.strip()


def token_set(normalised: str) -> frozenset[str]:
    return frozenset() if normalised.startswith("\0") else frozenset(normalised.split())


def _token_order(token: str) -> tuple[int, bytes]:
    return -len(token), hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def prefix(tokens: frozenset[str], threshold: float) -> list[str]:
    """The tokens of a set any set of Jaccard >= ``threshold`` with it shares one of (the first
    ``|A| - ceil(t|A|) + 1`` in the fixed order); none for an empty set."""
    if not tokens:
        return []
    keep = len(tokens) - math.ceil(threshold * len(tokens) - 1e-9) + 1
    return sorted(tokens, key=_token_order)[:max(1, keep)]


def size_bounds(size: int, threshold: float) -> tuple[float, float]:
    """The sizes a token set of Jaccard >= ``threshold`` with one of ``size`` tokens can have."""
    return threshold * size - 1e-9, size / threshold + 1e-9


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


class _UnionFind:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def group_texts(texts: Sequence[str], threshold: float = 0.8) -> list[list[int]]:
    """The indices of ``texts`` in groups of near-duplicates, each group in the texts' order and
    the groups in the order of their first text."""
    keys: dict[str, list[int]] = defaultdict(list)
    for index, text in enumerate(texts):
        keys[group_key(text)].append(index)
    distinct = list(keys)
    sets = [token_set(key) for key in distinct]
    union = _UnionFind(len(distinct))
    if threshold < 1.0:
        postings: dict[str, list[int]] = defaultdict(list)
        for position, tokens in enumerate(sets):
            low, high = size_bounds(len(tokens), threshold)
            first = prefix(tokens, threshold)
            candidates = {other for token in first for other in postings[token]
                          if low <= len(sets[other]) <= high}
            for other in candidates:
                if jaccard(tokens, sets[other]) >= threshold:
                    union.union(position, other)
            for token in first:
                postings[token].append(position)
    grouped: dict[int, list[int]] = defaultdict(list)
    for position, key in enumerate(distinct):
        grouped[union.find(position)].extend(keys[key])
    return sorted((sorted(members) for members in grouped.values()), key=lambda members: members[0])
