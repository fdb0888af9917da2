"""Near-duplicate messages grouped, so that one decision labels all of them.

Two messages are one group when their normalised texts are equal (Unicode NFKC, case folded,
zero-width and format characters and punctuation dropped, whitespace collapsed), or when their
token sets are similar: Jaccard similarity of at least ``threshold`` (default 0.8). Candidates are
found through an index of the tokens, skipping the tokens that many texts share, so a large log
is grouped without comparing every pair; groups are merged transitively (union-find).
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Sequence

#: a token that more texts than this share finds no candidates (it would make grouping quadratic)
COMMON_TOKEN_TEXTS = 200
_WORD = re.compile(r"\w+")


def normalise(text: str) -> str:
    """The text two near-identical messages share: NFKC, case folded, format characters
    (zero-width, direction marks) and punctuation dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(_WORD.findall(text))


def token_set(normalised: str) -> frozenset[str]:
    return frozenset() if normalised.startswith("\0") else frozenset(normalised.split())


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
        # a text of no word (emoji, punctuation) is grouped only with the same text
        keys[normalise(text) or "\0" + text.strip()].append(index)
    distinct = list(keys)
    sets = [token_set(key) for key in distinct]
    union = _UnionFind(len(distinct))
    if threshold < 1.0:
        postings: dict[str, list[int]] = defaultdict(list)
        for position, tokens in enumerate(sets):
            for token in tokens:
                postings[token].append(position)
        for position, tokens in enumerate(sets):
            candidates: set[int] = set()
            for token in tokens:
                shared = postings[token]
                if len(shared) <= COMMON_TOKEN_TEXTS:
                    candidates.update(other for other in shared if other > position)
            for other in candidates:
                if jaccard(tokens, sets[other]) >= threshold:
                    union.union(position, other)
    grouped: dict[int, list[int]] = defaultdict(list)
    for position, key in enumerate(distinct):
        grouped[union.find(position)].extend(keys[key])
    return sorted((sorted(members) for members in grouped.values()), key=lambda members: members[0])
