"""The inbox's index kept as messages arrive: the same groups as the whole log regrouped, after
random inserts, decisions and undos; a log of the last round migrated and indexed with nothing
lost; two reviewers deciding one group at once: one wins, the other gets the conflict (409)."""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.extras import requires_extra
from tests.review.conftest import row

pytestmark = requires_extra("server", "starlette", "httpx", "sqlalchemy")

WORDS = ["where", "is", "my", "order", "book", "a", "table", "for", "two", "hi", "please", "now"]
INTENTS = ["greet", "book_table", "check_order", "nlu_fallback"]


def random_row(rng: random.Random) -> dict[str, Any]:
    """A message of few words from a small vocabulary (many near-duplicates and chains), now and
    then in another case, with punctuation, or of no word at all; logged at a random time."""
    if rng.random() < 0.05:
        text = rng.choice(["😀", "👍", "?!", "😀 "])
    else:
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 7))]
        text = " ".join(words)
        text = text.upper() if rng.random() < 0.1 else text + rng.choice(["", "", "?", "!!"])
    intent = rng.choice(INTENTS)
    confidence = round(rng.random(), 3)
    second = rng.choice([i for i in INTENTS if i != intent])
    return row(text, intent, confidence, [(intent, confidence), (second, round(1 - confidence, 3))],
               parsed_at=float(rng.randint(1, 50)), out_of_scope=rng.choice([None, round(rng.random(), 2)]))


def inbox_of(store: Any, threshold: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the inbox from the index, caught up; the inbox regrouped from the whole log)."""
    from nlu_engine.review.inbox import build_inbox, group_view

    store.catch_up()
    total, messages, shown = store.inbox(0, 100_000)
    decisions = store.decisions()
    indexed = [group_view(rows, decisions) for rows, _, _ in shown]
    expected = build_inbox(store.messages(), decisions, threshold)
    assert (total, messages) == (len(expected), sum(len(g["messages"]) for g in expected))
    head = store.head(100_000)  # the coverage's pool: each group's oldest pending message
    assert [(row["id"], size, score) for _, row, size, score in head] == \
        [(rows[0]["id"], size, score) for rows, size, score in shown]
    chosen = [group for group, _, _, _ in head][::-1]  # the groups asked for by id, in that order
    assert store.inbox(0, 0, None, group_ids=chosen)[2] == shown[::-1]
    return indexed, expected


def decide_some(store: Any, groups: list[dict[str, Any]], rng: random.Random) -> None:
    """Label part of a random group, or undo a random labelled message."""
    from nlu_engine.review.decisions import Change

    labelled = store.labelled()
    if labelled and rng.random() < 0.3:
        decision = rng.choice(labelled)
        store.undo([(decision["message_id"], decision["version"])], "ann")
    elif groups:
        messages = rng.choice(groups)["messages"]
        chosen = rng.sample(messages, rng.randint(1, len(messages)))
        store.decide([Change(m["id"], m["version"], m["text"], intent="greet") for m in chosen], "ann")


def check_random_traffic(target: str, threshold: float, seed: int, rounds: int = 30) -> None:
    from nlu_engine.review.decisions import open_review
    from nlu_engine.review.inbox import group_view
    from nlu_engine.server.message_store import open_store

    rng = random.Random(seed)
    log = open_store(target)
    store = open_review(target, threshold)
    try:
        for _ in range(rounds):
            log.insert([random_row(rng) for _ in range(rng.randint(0, 25))])
            if rng.random() < 0.5:  # decisions between inserts, the new rows not indexed yet
                decisions = store.decisions()
                decide_some(store, [group_view(rows, decisions) for rows, _, _ in store.inbox(0, 50)[2]], rng)
            indexed, expected = inbox_of(store, threshold)
            assert indexed == expected
        assert store.decisions() and len(expected) > 1  # the traffic made decisions and groups
    finally:
        store.close()
        log.close()


@pytest.mark.parametrize(("threshold", "seed"), [(0.8, 1), (0.5, 2), (1.0, 3)])
def test_the_index_equals_the_whole_log_regrouped(tmp_path: Path, threshold: float, seed: int) -> None:
    check_random_traffic(str(tmp_path / "log.db"), threshold, seed)


def test_another_threshold_builds_the_index_again(tmp_path: Path) -> None:
    from nlu_engine.review.decisions import open_review

    target = str(tmp_path / "log.db")
    check_random_traffic(target, 0.8, seed=4, rounds=12)
    store = open_review(target, 0.5)
    try:
        indexed, expected = inbox_of(store, 0.5)
        assert indexed == expected
    finally:
        store.close()


def v1_log(target: str, rows: list[dict[str, Any]]) -> None:
    """A message log as the last round wrote it (schema version 1): its two tables, defined here
    as they were then, so the test keeps making an old log when the code's tables change."""
    import sqlalchemy as sa

    from nlu_engine.server.message_store import database_url

    old = sa.MetaData()
    meta = sa.Table("nlu_log_meta", old, sa.Column("key", sa.String(64), primary_key=True),
                    sa.Column("value", sa.String(255), nullable=False))
    messages = sa.Table(
        "nlu_log_messages", old,
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("parsed_at", sa.Float, nullable=False, index=True),
        sa.Column("endpoint", sa.String(16), nullable=False),
        *(sa.Column(name, sa.String(255)) for name in ("worker", "model_id", "model_file")),
        sa.Column("sender_id", sa.String(255), index=True),
        sa.Column("message_id", sa.String(255)),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("intent", sa.String(255), index=True),
        sa.Column("confidence", sa.Float),
        sa.Column("out_of_scope", sa.Float),
        *(sa.Column(name, sa.JSON) for name in ("intent_ranking", "entities", "parse_result")),
    )
    engine = sa.create_engine(database_url(target))
    with engine.begin() as connection:
        old.create_all(connection)
        connection.execute(sa.insert(meta), [{"key": "format", "value": "nlu-engine message log"},
                                             {"key": "version", "value": "1"},
                                             {"key": "created_at", "value": "1.000"}])
        if rows:
            connection.execute(sa.insert(messages), rows)
    engine.dispose()


def check_migration(target: str) -> None:
    """A version 1 log opens as version 2 with every row kept and queued; the review indexes all
    of them; a version 0 log (or any older one this code cannot migrate) is refused in one line."""
    import sqlalchemy as sa

    from nlu_engine.review.decisions import open_review
    from nlu_engine.server.message_store import SCHEMA_VERSION, meta_table, open_store, unindexed_table

    rng = random.Random(5)
    rows = [random_row(rng) for _ in range(300)]
    v1_log(target, rows)
    log = open_store(target, create=False)
    try:
        assert sorted(log.rows(), key=lambda r: r["id"]) == sorted(rows, key=lambda r: r["id"])
        with log.engine.connect() as connection:
            meta = dict(connection.execute(sa.select(meta_table.c.key, meta_table.c.value)).tuples().all())
            queued = connection.execute(sa.select(sa.func.count()).select_from(unindexed_table)).scalar_one()
        assert meta["version"] == str(SCHEMA_VERSION) and "migrated_at" in meta and queued == len(rows)
        log.insert([random_row(rng)])  # the migrated log takes new rows
    finally:
        log.close()
    store = open_review(target)
    try:
        indexed, expected = inbox_of(store, 0.8)
        assert indexed == expected and sum(len(g["messages"]) for g in indexed) == len(rows) + 1
    finally:
        store.close()


def test_a_log_of_the_last_round_is_migrated_in_place(tmp_path: Path) -> None:
    check_migration(str(tmp_path / "log.db"))


def test_a_log_of_an_unknown_older_version_is_refused_in_one_line(tmp_path: Path) -> None:
    import sqlite3

    from nlu_engine.contract.errors import NLUError
    from nlu_engine.server.message_store import open_store

    target = tmp_path / "log.db"
    v1_log(str(target), [])
    with sqlite3.connect(target) as connection:
        connection.execute("UPDATE nlu_log_meta SET value = '0' WHERE key = 'version'")
    connection.close()
    with pytest.raises(NLUError) as error:
        open_store(str(target))
    assert "schema version 0; this nlu-engine reads and writes version 2" in str(error.value)
    assert "\n" not in str(error.value)


def race_on_one_group(target: str) -> None:
    """Two reviewers decide the same group at the same moment (a barrier, then both write): one
    wins, the other gets Conflict, which the page answers 409; the index counts the group once."""
    from nlu_engine.review.decisions import Change, Conflict, open_review
    from nlu_engine.server.message_store import open_store

    rng = random.Random(6)
    log = open_store(target)
    log.insert([row("where is my order", "check_order", 0.4, parsed_at=float(i)) for i in range(3)]
               + [random_row(rng) for _ in range(20)])
    log.close()
    stores = [open_review(target), open_review(target)]
    try:
        stores[0].catch_up()
        indexed, _ = inbox_of(stores[0], 0.8)
        group = next(g for g in indexed if g["messages"][0]["text"] == "where is my order")
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def decide(store: Any, intent: str) -> None:
            changes = [Change(m["id"], m["version"], m["text"], intent=intent) for m in group["messages"]]
            barrier.wait()
            try:
                store.decide(changes, intent)
                outcomes.append("won")
            except Conflict:
                outcomes.append("conflict")

        threads = [threading.Thread(target=decide, args=(store, intent))
                   for store, intent in zip(stores, ("check_order", "greet"), strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(outcomes) == ["conflict", "won"]
        indexed, expected = inbox_of(stores[1], 0.8)
        assert indexed == expected and group["id"] not in {g["id"] for g in indexed}
    finally:
        for store in stores:
            store.close()


def test_two_reviewers_deciding_one_group_at_once(tmp_path: Path) -> None:
    race_on_one_group(str(tmp_path / "log.db"))


def test_the_page_answers_the_losing_reviewer_409(project: dict) -> None:
    from starlette.testclient import TestClient

    from nlu_engine.review.app import ReviewSettings, create_app

    app = create_app(ReviewSettings(db=str(project["db"]), data=project["data"]))
    client = TestClient(app, base_url="http://127.0.0.1")
    group = client.get("/api/inbox").json()["groups"][0]
    targets = [{"id": m["id"], "version": m["version"]} for m in group["messages"]]
    body = {"intent": "greet", "messages": targets}
    first, second = client.post("/api/decide", json=body), client.post("/api/decide", json=body)
    assert (first.status_code, second.status_code) == (200, 409)
    assert group["id"] not in {g["id"] for g in client.get("/api/inbox").json()["groups"]}
