"""The inbox: logged entities checked before they are shown, a group's entities carried to its
near-duplicates, labelled messages out of the inbox."""

from __future__ import annotations

from tests.extras import requires_extra
from tests.review.conftest import default_rows

pytestmark = requires_extra("server", "sqlalchemy")


def test_logged_entities_that_do_not_fit_the_text_are_dropped() -> None:
    from nlu_engine.review.inbox import clean_entities

    text = "fly to Berlin"
    logged = [{"entity": "city", "start": 7, "end": 13, "value": "Berlin", "confidence": 0.9},
              {"entity": "city", "start": 8, "end": 12},  # overlaps the first
              {"entity": "x", "start": 10, "end": 99},  # past the end
              {"entity": ["not", "a", "name"], "start": 0, "end": 3},
              {"entity": "when", "start": True, "end": 3}, "not an entity", None]
    assert clean_entities(text, logged) == [{"entity": "city", "start": 7, "end": 13, "value": "Berlin"}]
    assert clean_entities(text, None) == []


def test_entities_are_carried_to_near_duplicates_where_their_words_occur() -> None:
    from nlu_engine.review.inbox import carry_entities

    source = "wake me at Seven tomorrow"
    entities = [{"entity": "time", "start": 11, "end": 25, "value": "Seven tomorrow"}]
    assert carry_entities(source, entities, "please wake me at seven tomorrow!") == [
        {"entity": "time", "start": 18, "end": 32, "value": "seven tomorrow"}]
    assert carry_entities(source, entities, "wake me up at eight") == []


def test_the_inbox_leaves_labelled_messages_out() -> None:
    from nlu_engine.review.inbox import build_inbox

    rows = default_rows()
    groups = build_inbox(rows, {})
    assert sum(len(g["messages"]) for g in groups) == len(rows)
    decided = {rows[3]["id"]: {"status": "labelled", "version": 1}}
    after = build_inbox(rows, decided)
    assert rows[3]["id"] not in {m["id"] for g in after for m in g["messages"]}
    assert sum(len(g["messages"]) for g in after) == len(rows) - 1
