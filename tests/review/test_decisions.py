"""Decisions in the log's database: versioned (a stale write is refused whole), undone by
restoring the version before, kept when the log is pruned; a database that is not a log is one line."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nlu_engine.contract.errors import NLUError
from tests.extras import requires_extra
from tests.review.conftest import default_rows, make_log

pytestmark = requires_extra("server", "sqlalchemy")


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    from nlu_engine.review.decisions import open_review

    rows = default_rows()
    opened = open_review(str(make_log(tmp_path / "log.db", rows)))
    opened.rows = rows
    yield opened
    opened.close()


def change(row: dict, expected: int, intent: str, entities: tuple = ()):  # type: ignore[no-untyped-def]
    from nlu_engine.review.decisions import Change

    return Change(row["id"], expected, row["text"], intent=intent, entities=entities)


def test_a_decision_is_versioned_and_a_stale_write_is_refused_whole(store) -> None:  # type: ignore[no-untyped-def]
    from nlu_engine.review.decisions import Conflict

    first, second = store.rows[0], store.rows[1]
    assert store.decide([change(first, 0, "greet")], "ann") == {first["id"]: 1}
    # bob saw no decision on either: his write of both is refused, nothing of it stored
    with pytest.raises(Conflict) as refused:
        store.decide([change(second, 0, "book_flight"), change(first, 0, "book_flight")], "bob")
    assert set(refused.value.current) == {first["id"]}
    assert refused.value.current[first["id"]]["reviewer"] == "ann"
    assert second["id"] not in store.decisions()
    assert store.decide([change(first, 1, "book_flight")], "bob") == {first["id"]: 2}
    assert store.decisions()[first["id"]]["intent"] == "book_flight"


def test_two_stores_racing_on_a_first_decision_give_one_conflict(tmp_path: Path) -> None:
    from nlu_engine.review.decisions import Conflict, open_review

    rows = default_rows()
    database = str(make_log(tmp_path / "log.db", rows))
    ann, bob = open_review(database), open_review(database)
    try:
        ann.decide([change(rows[0], 0, "greet")], "ann")
        with pytest.raises(Conflict):
            bob.decide([change(rows[0], 0, "book_flight")], "bob")
        assert bob.decisions()[rows[0]["id"]]["intent"] == "greet"
    finally:
        ann.close()
        bob.close()


def test_undo_restores_the_decision_before_and_then_none(store) -> None:  # type: ignore[no-untyped-def]
    from nlu_engine.review.decisions import OPEN, Conflict

    first = store.rows[0]
    entities = ({"entity": "city", "start": 0, "end": 5, "value": "hello"},)
    store.decide([change(first, 0, "greet", entities)], "ann")
    store.decide([change(first, 1, "book_flight")], "ann")
    with pytest.raises(Conflict):
        store.undo([(first["id"], 1)], "ann")  # not the stored version any more
    assert store.undo([(first["id"], 2)], "ann") == {first["id"]: 3}
    decision = store.decisions()[first["id"]]
    assert (decision["intent"], decision["entities"]) == ("greet", list(entities))
    store.undo([(first["id"], 3)], "ann")  # undoes the undo: book_flight again
    assert store.decisions()[first["id"]]["intent"] == "book_flight"
    second = store.rows[1]
    store.decide([change(second, 0, "greet")], "ann")
    store.undo([(second["id"], 1)], "ann")  # no decision before: open again
    assert store.decisions()[second["id"]]["status"] == OPEN
    assert [d["message_id"] for d in store.labelled()] == [first["id"]]


def test_decisions_keep_their_text_when_the_log_is_pruned(store) -> None:  # type: ignore[no-untyped-def]
    first = store.rows[0]
    store.decide([change(first, 0, "greet")], None)
    store.log.prune(retention_days=None, max_rows=0)
    assert store.messages() == []
    assert [(d["text"], d["intent"]) for d in store.labelled()] == [(first["text"], "greet")]


def test_a_database_that_is_not_a_message_log_is_one_line(tmp_path: Path) -> None:
    from nlu_engine.review.decisions import open_review

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE users (name TEXT)")
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all\n" * 100, encoding="utf-8")
    for target in (other, text, tmp_path / "missing.db"):
        with pytest.raises(NLUError) as error:
            open_review(str(target))
        assert "\n" not in str(error.value) and str(error.value).startswith("--db ")


def test_review_tables_of_another_version_are_refused(tmp_path: Path) -> None:
    from nlu_engine.review.decisions import open_review

    database = make_log(tmp_path / "log.db", default_rows())
    open_review(str(database)).close()
    with sqlite3.connect(database) as connection:
        connection.execute("UPDATE nlu_log_meta SET value = '99' WHERE key = 'review_version'")
    with pytest.raises(NLUError, match="review decisions of version 99"):
        open_review(str(database))
