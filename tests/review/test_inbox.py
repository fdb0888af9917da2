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


def test_enter_never_accepts_a_guess_of_the_fallback_or_below_its_threshold() -> None:
    from nlu_engine.review.inbox import acceptable, build_inbox
    from tests.review.conftest import row

    caught = row("where is my parcel", "nlu_fallback", 0.3, [("nlu_fallback", 0.3), ("greet", 0.08)])
    # a ranking holding the fallback's entry: caught, whatever the intent field says
    entry_only = row("parcel?", "greet", 0.9, [("greet", 0.9), ("nlu_fallback", 0.95)])
    low = row("hm", "greet", 0.08, [("greet", 0.08), ("book_flight", 0.05)])  # a model with no fallback
    sure = row("hello there", "greet", 0.97, [("greet", 0.97)])
    assert acceptable(caught) == (None, "the fallback caught this message")
    assert acceptable(entry_only)[0] is None
    assert acceptable(low) == (None, "the model's intent greet (0.080) is below the fallback threshold (0.3)")
    assert acceptable(low, threshold=0.05) == ("greet", None)
    assert acceptable(sure) == ("greet", None)
    assert acceptable(sure, threshold=0.98)[0] is None
    assert acceptable(row("x", None, 0.0, []))[0] is None

    groups = {g["messages"][0]["text"]: g for g in build_inbox([caught, low, sure], {})}
    assert groups["where is my parcel"]["accept"] is None
    assert groups["where is my parcel"]["guard"] == "the fallback caught this message"
    assert groups["hm"]["accept"] is None and groups["hello there"]["accept"] == "greet"
    assert build_inbox([low], {}, fallback_threshold=0.05)[0]["accept"] == "greet"
    # one guarded message guards its whole group (one decision labels all of it)
    near = [row("where is my order", "check_order", 0.9, [("check_order", 0.9)], parsed_at=1),
            row("where is my order ?", "nlu_fallback", 0.3, [("nlu_fallback", 0.3)], parsed_at=2)]
    (group,) = build_inbox(near, {})
    assert len(group["messages"]) == 2
    assert group["accept"] is None and group["guard"] == "the fallback caught this message"
