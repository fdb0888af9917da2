"""Near-duplicates: one group for texts equal once normalised or of similar token sets."""

from __future__ import annotations

from nlu_engine.review.grouping import group_texts, jaccard, normalise, token_set


def test_normalise_drops_case_punctuation_zero_width_and_direction_marks() -> None:
    assert normalise("Where is my ORDER??") == "where is my order"
    assert normalise("where\u200b is\u202e my\ufeff order") == "where is my order"
    assert normalise("ｗｈｅｒｅ  is\tmy order") == "where is my order"  # NFKC full width


def test_groups_equal_and_similar_texts_and_keeps_others_apart() -> None:
    texts = ["where is my order", "book a table for two", "Where is my order?", "hi",
             "book a table for two please", "where is my parcel", "😀", "👍", "😀"]
    groups = group_texts(texts)
    assert groups == [[0, 2], [1, 4], [3], [5], [6, 8], [7]]
    # 1 joins only equal normalised texts
    assert group_texts(texts, threshold=1.0) == [[0, 2], [1], [3], [4], [5], [6, 8], [7]]


def test_similarity_is_jaccard_of_token_sets() -> None:
    a, b = token_set("book a table for two"), token_set("book a table for two please")
    assert jaccard(a, b) == 5 / 6


def test_grouping_is_transitive_and_ordered_by_first_text() -> None:
    texts = ["a b c d e f g h", "x y", "a b c d e f g h i", "a b c d e f g h i j"]
    assert group_texts(texts) == [[0, 2, 3], [1]]


def test_prefix_filtering_finds_every_pair_all_pairs_would() -> None:
    import random

    rng = random.Random(0)
    words = ["a", "bb", "ccc", "dddd", "e", "ff", "ggg", "hhhh", "i"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(300)]
    for threshold in (0.5, 0.8, 0.9):
        sets = [token_set(normalise(text)) for text in texts]
        parent = list(range(len(texts)))
        for i in range(len(texts)):  # every pair compared
            for j in range(i):
                if jaccard(sets[i], sets[j]) >= threshold:
                    parent[max(_root(parent, i), _root(parent, j))] = min(_root(parent, i), _root(parent, j))
        expected: dict[int, list[int]] = {}
        for i in range(len(texts)):
            expected.setdefault(_root(parent, i), []).append(i)
        assert group_texts(texts, threshold) == sorted(expected.values())


def _root(parent: list[int], i: int) -> int:
    while parent[i] != i:
        i = parent[i]
    return i
