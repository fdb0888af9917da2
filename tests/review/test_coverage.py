"""The inbox's head spread over regions of sentence space: one unsure group of each region before a
second of any, the vectors cached by message id, and the page's window across the pool's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.review.coverage import Spreader, pool_size, spread
from tests.extras import requires_extra
from tests.review.conftest import make_log, row


def two_topics() -> tuple[list[float], np.ndarray]:
    """Six groups: the four most unsure about one thing (vectors near e1), two about another (e2)."""
    scores = [0.9, 0.85, 0.8, 0.75, 0.5, 0.4]
    vectors = np.array([[1, 0.01 * i, 0] for i in range(4)] + [[0, 1, 0.01], [0, 1, 0.02]], float)
    return scores, vectors


def test_spread_takes_each_region_s_most_unsure_before_a_second_of_any() -> None:
    scores, vectors = two_topics()
    order = spread(scores, vectors, regions=2)
    assert order[:2] == [0, 4]  # the best of each topic, the topics by their best
    assert sorted(order) == list(range(6))
    assert order[2:4] == [1, 5]  # then each region's second


def test_spread_with_no_more_groups_than_regions_is_the_priority_order() -> None:
    scores, vectors = two_topics()
    assert spread(scores, vectors, regions=6) == [0, 1, 2, 3, 4, 5]
    assert spread([0.2, 0.7, 0.7], np.eye(3), regions=0) == [1, 2, 0]


class Counting:
    """An encoder placing texts about flights on one axis and the rest on another; counts texts."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.encoded += texts
        return np.array([[1.0, len(t) / 100, 0] if "fl" in t else [0, 1.0, len(t) / 100] for t in texts])


def test_vectors_are_encoded_once_per_message_id() -> None:
    encoder = Counting()
    spreader = Spreader(regions=1, encode=encoder)
    spreader.vectors([("a", "fly to Rome"), ("b", "hello")])
    vectors = spreader.vectors([("b", "hello"), ("c", "hi"), ("c", "hi")])
    assert encoder.encoded == ["fly to Rome", "hello", "hi"]
    assert vectors.shape == (3, 3) and np.allclose(vectors[1], vectors[2])


class Store:
    """The inbox a ReviewStore answers: groups in priority order, one message each."""

    def __init__(self, texts: list[str]) -> None:
        self.groups = [(i, [{"id": str(i), "text": text}], 1, round(1 - i / 100, 4))
                       for i, text in enumerate(texts)]
        self.asked: list[tuple[int, int]] = []

    def head(self, limit: int) -> list[tuple[int, dict[str, Any], int, float]]:
        return [(group, rows[0], size, score) for group, rows, size, score in self.groups[:limit]]

    def inbox(self, offset: int, limit: int, members: int | None = None,
              group_ids: list[int] | None = None) -> tuple[int, int, list[Any]]:
        self.asked.append((offset, limit))
        chosen = (self.groups[offset:offset + limit] if group_ids is None
                  else [next(g for g in self.groups if g[0] == i) for i in group_ids])
        return len(self.groups), len(self.groups), [(rows, size, score) for _, rows, size, score in chosen]


def test_the_page_spreads_the_pool_and_keeps_the_priority_order_after_it() -> None:
    texts = ["fly to Rome", "flights to Oslo", "flying to Paris", "hello", "good morning", "fly", "bye"]
    store = Store(texts)
    spreader = Spreader(regions=2, encode=Counting())
    assert pool_size(2) == 4
    _, _, shown = spreader.page(store, 0, 7)
    ids = [rows[0]["id"] for rows, _, _ in shown]
    assert ids[:2] == ["0", "3"]  # the pool (0-3): a flight, then a greeting, before a second flight
    assert sorted(ids[:4]) == ["0", "1", "2", "3"] and ids[4:] == ["4", "5", "6"]
    _, _, window = spreader.page(store, 3, 2)  # across the pool's end
    assert [rows[0]["id"] for rows, _, _ in window] == [ids[3], "4"]
    store.asked.clear()
    spreader.page(store, 5, 2)
    assert store.asked == [(5, 2)]  # past the pool: the index's own order, nothing encoded


@requires_extra("server", "starlette", "httpx", "sqlalchemy")
def test_the_review_page_s_inbox_spreads_its_head_with_the_sentence_encoder(tmp_path: Path) -> None:
    """Through the app, with the Universal Sentence Encoder: three unsure weather questions rank
    above two unsure flight requests; with two regions the page shows a flight second."""
    from starlette.testclient import TestClient

    from nlu_engine.review.app import ReviewSettings, create_app

    texts = ["what's the weather tomorrow", "will it rain today", "is it going to be sunny",
             "book me a flight to Berlin", "I need a plane ticket to Madrid"]
    rows = [row(text, "x", 0.2 + i / 20, [("x", 0.2 + i / 20), ("y", 0.15)], parsed_at=i)
            for i, text in enumerate(texts)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "nlu.yml").write_text('version: "3.1"\nnlu:\n- intent: x\n  examples: |\n'
                                               "    - a\n", encoding="utf-8")
    make_log(tmp_path / "log.db", rows)

    def first_texts(regions: int) -> list[str]:
        settings = ReviewSettings(db=str(tmp_path / "log.db"), data=tmp_path / "data", regions=regions,
                                  hosts=None)
        groups = TestClient(create_app(settings)).get("/api/inbox").json()["groups"]
        return [group["messages"][0]["text"] for group in groups]

    assert first_texts(0) == texts  # priority order: the most unsure first
    spread_texts = first_texts(2)
    assert spread_texts[0] == texts[0] and spread_texts[1] == texts[3]
    assert sorted(spread_texts) == sorted(texts)


def test_the_order_is_computed_again_only_when_the_pool_changes() -> None:
    texts = ["fly to Rome", "hello", "flights to Oslo", "good morning", "bye"]
    store = Store(texts)
    encoder = Counting()
    spreader = Spreader(regions=2, encode=encoder)
    calls: list[int] = []
    original = spreader.order
    spreader.order = lambda groups: calls.append(len(groups)) or original(groups)  # type: ignore[method-assign]
    first = spreader.page(store, 0, 2)[2]
    assert spreader.page(store, 0, 2)[2] == first and spreader.page(store, 2, 2)[2] and calls == [4]
    store.groups.pop(0)  # a decision: the pool changes
    spreader.page(store, 0, 2)
    assert calls == [4, 4] and encoder.encoded.count("hello") == 1


def test_the_encoder_is_warmed_only_when_the_inbox_needs_it() -> None:
    encoder = Counting()
    Spreader(regions=3, encode=encoder).warm(Store(["a", "b", "c"]))
    Spreader(regions=0, encode=encoder).warm(Store(["a", "b", "c", "d"]))
    assert encoder.encoded == []
    Spreader(regions=3, encode=encoder).warm(Store(["a", "b", "c", "d"]))
    assert encoder.encoded == ["warm"]
