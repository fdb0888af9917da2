"""Ranking: the fallback, a low confidence, a small margin and out-of-scope-like come first."""

from __future__ import annotations

from nlu_engine.review.ranking import group_priority, priority, top_two
from tests.review.conftest import row


def test_top_two_leaves_the_fallback_out() -> None:
    assert top_two([{"name": "nlu_fallback", "confidence": 0.9}, {"name": "a", "confidence": 0.3},
                    {"name": "b", "confidence": 0.2}]) == (0.3, 0.2)
    assert top_two(None) == (0.0, 0.0)


def test_unsure_messages_rank_above_sure_ones_with_their_reasons() -> None:
    sure = row("hi", "greet", 0.98, [("greet", 0.98), ("bye", 0.02)])
    close = row("fly", "book", 0.52, [("book", 0.52), ("greet", 0.48)])
    fallback = row("???", "nlu_fallback", 0.3, [("nlu_fallback", 0.3), ("greet", 0.25), ("book", 0.2)])
    strange = row("the moon", "greet", 0.9, [("greet", 0.9), ("bye", 0.1)], out_of_scope=0.95)
    scores = {name: priority(r) for name, r in
              (("sure", sure), ("close", close), ("fallback", fallback), ("strange", strange))}
    order = sorted(scores, key=lambda name: -scores[name][0])
    assert order == ["fallback", "close", "strange", "sure"]
    assert scores["fallback"][1] == ["fallback", "low confidence", "small margin"]
    assert scores["close"][1] == ["small margin"]
    assert scores["strange"][1] == ["out-of-scope-like"]
    assert scores["sure"][1] == []


def test_a_group_takes_its_most_unsure_member_raised_with_its_size() -> None:
    sure = row("hi", "greet", 0.98, [("greet", 0.98), ("bye", 0.02)])
    close = row("hi!", "greet", 0.52, [("greet", 0.52), ("bye", 0.48)])
    alone, _ = priority(close)
    score, reasons = group_priority([sure, close, sure, sure])
    assert score == round(alone * 1.5, 4) and reasons == ["small margin"]
