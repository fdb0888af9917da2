"""``serve --log-messages``: every parse stored, off the parse path, under several workers.

The writer, the store and the redaction are tested in process (fast, no server); the rest starts
a real ``nlu-engine serve`` (:class:`~nlu_engine.server.process.ServerProcess`) with a tiny
logistic-regression model whose regex / lookup extractor finds ``city`` and ``order_id``
entities. Every loop is bounded; each server test stays well under 30 s.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.contract.errors import NLUError
from nlu_engine.server.message_log import (
    LogSettings,
    MessageLog,
    RowsRefused,
    StoreUnavailable,
    clean,
    identifier,
)
from nlu_engine.server.process import ServerProcess
from nlu_engine.server.redaction import Redactor
from tests.extras import requires_extra

pytestmark = requires_extra("server", "starlette", "uvicorn", "httpx", "sqlalchemy")

PIPELINE = {
    "language": "en",
    "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
        {"name": "RegexEntityExtractor"},
    ],
}
RESULT = {
    "text": "fly from Berlin to Paris, order 12345 now",
    "intent": {"name": "book_flight", "confidence": 0.9},
    "entities": [
        {"entity": "city", "start": 9, "end": 15, "value": "Berlin", "role": "from"},
        {"entity": "city", "start": 19, "end": 24, "value": "Paris", "additional_info": {"v": "Paris"}},
        {"entity": "order_id", "start": 32, "end": 37, "value": "12345"},
        {"entity": "when", "start": 38, "end": 41, "value": "now"},
    ],
    "text_tokens": [[0, 3], [4, 8], [9, 15], [16, 18], [19, 24], [26, 31], [32, 37], [38, 41]],
    "intent_ranking": [{"name": "book_flight", "confidence": 0.9}, {"name": "greet", "confidence": 0.1}],
}


# --- fixtures and helpers ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Path:
    from nlu_engine.assembly.model import train

    out = tmp_path_factory.mktemp("log-models")
    return train(PIPELINE, tiny_data_path, out=out, fixed_model_name="tiny", log=None)


def rows_of(database: Path) -> list[dict[str, Any]]:
    from nlu_engine.server.message_store import open_store

    store = open_store(str(database), create=False)
    try:
        return store.rows()
    finally:
        store.close()


def client(server: ServerProcess) -> Any:
    import httpx

    return httpx.Client(base_url=server.url, timeout=30, trust_env=False)


class FakeStore:
    """A store in memory that can be made unavailable, or to refuse rows holding a word."""

    description = "fake"

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.down = False
        self.refuse = "\x01never"
        self.inserts = 0

    def insert(self, rows: list[dict[str, Any]]) -> None:
        self.inserts += 1
        if self.down:
            raise StoreUnavailable("database or disk is full")
        if any(self.refuse in row["text"] for row in rows):
            raise RowsRefused("value too long")
        for row in rows:
            self.rows.setdefault(row["id"], row)

    def prune(self, retention_days: float | None, max_rows: int | None) -> int:
        return 0

    def close(self) -> None:
        pass


def wait_for(condition: Any, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def fake_log(store: FakeStore, **settings: Any) -> MessageLog:
    log = MessageLog(LogSettings("fake", **{"retry_every": 0.1, **settings}), lambda _target: store, "w")
    log.start()
    return log


# --- redaction ---------------------------------------------------------------------------------
def test_redaction_masks_entity_types_and_patterns_and_moves_offsets() -> None:
    redactor = Redactor.from_rules(["city", r"re:\d{5}"])
    original = {**RESULT, "entities": [dict(e) for e in RESULT["entities"]]}
    out = redactor.redact(original)
    assert original == RESULT  # the response's dict is never touched
    assert out["text"] == "fly from [city] to [city], order [redacted] now"
    text = out["text"]
    spans = [(e["entity"], text[e["start"]:e["end"]], e["value"]) for e in out["entities"]]
    assert spans == [("city", "[city]", "[city]"), ("city", "[city]", "[city]"),
                     ("order_id", "[redacted]", "[redacted]"), ("when", "now", "now")]
    assert out["entities"][0]["role"] == "from" and "additional_info" not in out["entities"][1]
    assert [text[a:b] for a, b in out["text_tokens"]] == \
        ["fly", "from", "[city]", "to", "[city]", "order", "[redacted]", "now"]
    assert out["intent"] == RESULT["intent"] and out["intent_ranking"] == RESULT["intent_ranking"]
    assert "Berlin" not in str(out) and "Paris" not in str(out) and "12345" not in str(out)


def test_redaction_of_overlaps_values_elsewhere_and_no_rules() -> None:
    result = {"text": '/inform{"email": "a@b.c"} a@b.c', "intent": {"name": "inform", "confidence": 1.0},
              "entities": [{"entity": "email", "value": "a@b.c"}]}
    out = Redactor.from_rules(["email"]).redact(result)
    assert "a@b.c" not in str(out) and out["entities"] == [{"entity": "email", "value": "[email]"}]
    # an entity and a pattern over the same characters: one mask
    both = Redactor.from_rules(["order_id", r"re:order \d+"]).redact(RESULT)
    assert both["text"] == "fly from Berlin to Paris, [redacted] now" and "12345" not in str(both)
    order = both["entities"][2]
    assert both["text"][order["start"]:order["end"]] == "[redacted]" and order["value"] == "[order_id]"
    assert not Redactor.from_rules([]) and Redactor.from_rules([]).redact(RESULT) == RESULT


@pytest.mark.parametrize("rules, words", [(["re:("], "not a regular expression"), ([" "], "entity type")])
def test_bad_redaction_rules_are_one_line_errors(rules: list[str], words: str) -> None:
    with pytest.raises(NLUError, match=words) as error:
        LogSettings("x.db", redact=tuple(rules))
    assert "\n" not in str(error.value)


def test_identifiers_and_cleaning() -> None:
    assert identifier("u1") == "u1" and identifier(7) == "7" and identifier("x" * 300) == "x" * 255
    assert identifier(None) is None and identifier({"a": 1}) is None and identifier(True) is None
    assert clean({"text": "a\x00b\ud800", "n": float("nan"), "t": (1, 2)}) == \
        {"text": "a\ufffdb\ufffd", "n": None, "t": [1, 2]}


# --- the store ---------------------------------------------------------------------------------
def test_store_creates_checks_and_refuses(tmp_path: Path) -> None:
    from nlu_engine.server.message_store import SCHEMA_VERSION, open_store

    database = tmp_path / "log.db"
    open_store(str(database)).close()
    assert sqlite3.connect(database).execute("PRAGMA journal_mode").fetchone() == ("wal",)
    open_store(str(database)).close()  # a log of this version opens again
    (tmp_path / "notes.txt").write_text("hello, not a database " * 50)
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE users (name TEXT)")
    other.commit()
    newer = sqlite3.connect(database)
    newer.execute("UPDATE nlu_log_meta SET value = ? WHERE key = 'version'", (str(SCHEMA_VERSION + 1),))
    newer.commit()
    cases = {
        "notes.txt": "is not an nlu-engine message log (file is not a database)",
        "other.db": "is not an nlu-engine message log (it holds other tables)",
        "log.db": f"schema version {SCHEMA_VERSION + 1}, newer than this nlu-engine's ({SCHEMA_VERSION}): "
                  "upgrade nlu-engine",
        "missing/log.db": "does not exist",
        ".": "is a folder",
    }
    for name, words in cases.items():
        with pytest.raises(NLUError) as error:
            open_store(str(tmp_path / name))
        assert words in str(error.value) and "\n" not in str(error.value), str(error.value)
    for url, words in [("mysql://u@h/db", "not supported"), ("postgresql://u:secret@127.0.0.1:1/x", "")]:
        with pytest.raises(NLUError) as error:
            open_store(url)
        assert words in str(error.value) and "secret" not in str(error.value)


def test_store_insert_is_idempotent_and_prunes(tmp_path: Path) -> None:
    from nlu_engine.server.message_log import to_row
    from nlu_engine.server.message_store import open_store

    store = open_store(str(tmp_path / "log.db"))
    now = time.time()
    items = [(f"{i:032x}", now - (10 - i) * 86400, "parse", "m", "m.tar.gz", None, None, RESULT)
             for i in range(10)]  # one a day, the newest today
    rows = [to_row(item, Redactor(), "w") for item in items]
    store.insert(rows[:6])
    store.insert(rows)  # the first six again: skipped, not doubled
    assert store.count() == 10
    assert store.prune(retention_days=3.5, max_rows=None) == 7
    assert [r["id"] for r in store.rows()] == [row["id"] for row in rows[7:]]
    assert store.prune(retention_days=None, max_rows=2) == 1
    assert [r["id"] for r in store.rows()] == [row["id"] for row in rows[8:]]
    stored = store.rows()[0]
    assert stored["parse_result"] == RESULT and stored["entities"] == RESULT["entities"]
    assert (stored["intent"], stored["confidence"], stored["out_of_scope"]) == ("book_flight", 0.9, None)
    store.close()


# --- the writer --------------------------------------------------------------------------------
def test_writer_batches_and_close_flushes_everything() -> None:
    store = FakeStore()
    log = fake_log(store, batch_rows=100)
    for i in range(1000):
        log.record("parse", [{**RESULT, "text": f"m{i}"}], None, "s", str(i))
    log.close()
    assert len(store.rows) == 1000 and log.written == 1000 and log.dropped == 0
    assert store.inserts < 1000  # batched
    assert {row["message_id"] for row in store.rows.values()} == {str(i) for i in range(1000)}


def test_an_unwritable_store_is_one_warning_and_drops_are_counted(caplog: pytest.LogCaptureFixture) -> None:
    store = FakeStore()
    store.down = True
    caplog.set_level(logging.WARNING, logger="nlu_engine.server")
    log = fake_log(store, queue_size=50, batch_rows=10)
    start = time.perf_counter()
    for i in range(300):
        log.record("parse", [{**RESULT, "text": f"m{i}"}])
    assert time.perf_counter() - start < 1.0  # recording never waits for the database
    assert wait_for(lambda: store.inserts >= 3)  # it tried, and tries again
    cannot = [r for r in caplog.records if "cannot write to fake" in r.getMessage()]
    assert len(cannot) == 1 and "database or disk is full" in cannot[0].getMessage()
    assert len([r for r in caplog.records if "queue of 50 rows is full" in r.getMessage()]) == 1
    assert log.status()["writing"] is False and log.status()["error"] == "database or disk is full"
    dropped = log.dropped
    assert dropped >= 300 - 50 - 10  # what neither the queue nor the batch in hand could hold
    store.down = False
    assert wait_for(lambda: log.available)
    log.close()
    again = [r.getMessage() for r in caplog.records if "writing to fake again" in r.getMessage()]
    assert again == [f"message log: writing to fake again; {dropped} rows were dropped while it could not"]
    assert len(store.rows) == 300 - dropped and log.written == len(store.rows)
    assert len([r for r in caplog.records if "cannot write" in r.getMessage()]) == 1


def test_a_store_still_down_at_shutdown_counts_what_it_drops(caplog: pytest.LogCaptureFixture) -> None:
    store = FakeStore()
    store.down = True
    caplog.set_level(logging.WARNING, logger="nlu_engine.server")
    log = fake_log(store)
    for i in range(20):
        log.record("parse", [{**RESULT, "text": f"m{i}"}])
    log.close()
    assert log.dropped == 20 and log.written == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any("could not be written at shutdown" in m and "20 rows were dropped" in m for m in messages)


def test_rows_the_database_refuses_are_dropped_one_by_one(caplog: pytest.LogCaptureFixture) -> None:
    store = FakeStore()
    store.refuse = "bad"
    caplog.set_level(logging.WARNING, logger="nlu_engine.server")
    log = fake_log(store)
    log.record("batch", [{**RESULT, "text": text} for text in ("good 1", "bad 1", "good 2", "bad 2")])
    log.close()
    assert sorted(row["text"] for row in store.rows.values()) == ["good 1", "good 2"]
    assert log.dropped == 2 and log.written == 2
    assert len([r for r in caplog.records if "refused a row" in r.getMessage()]) == 1


# --- through the server ------------------------------------------------------------------------
def test_single_and_batch_parses_are_logged(archive: Path, tmp_path: Path) -> None:
    database = tmp_path / "log.db"
    args = ["-m", str(archive), "--log-messages", str(database)]
    with ServerProcess(args) as server, client(server) as http:
        single = http.post("/model/parse", json={"text": "fly from Madrid to Paris", "sender_id": "u1",
                                                  "message_id": "m-1"})
        batch = http.post("/model/parse/batch", json={"texts": ["hi there", "check order 12345"],
                                                       "sender_id": 42})
        listed = http.post("/model/parse/batch", json=["hello"])
        assert single.status_code == batch.status_code == listed.status_code == 200
        assert wait_for(lambda: http.get("/status").json()["message_log"]["rows_written"] == 4)
        status = http.get("/status").json()
    assert status["message_log"]["enabled"] is True and status["message_log"]["rows_dropped"] == 0
    assert status["message_log"]["database"] == str(database)
    rows = {row["text"]: row for row in rows_of(database)}
    assert len(rows) == 4 and len({row["id"] for row in rows.values()}) == 4
    first = rows["fly from Madrid to Paris"]
    answer = single.json()
    assert first["parse_result"] == answer and first["entities"] == answer["entities"]
    assert [e["entity"] for e in first["entities"]] == ["city", "city"]
    intent = answer["intent"]
    assert (first["intent"], first["confidence"]) == (intent["name"], intent["confidence"])
    assert first["intent_ranking"] == answer["intent_ranking"]
    assert (first["sender_id"], first["message_id"], first["endpoint"]) == ("u1", "m-1", "parse")
    assert first["model_id"] == status["model_id"] and first["model_file"] == "tiny.tar.gz"
    assert first["worker"] == status["worker_id"] and abs(first["parsed_at"] - time.time()) < 60
    order = rows["check order 12345"]
    assert (order["sender_id"], order["message_id"], order["endpoint"]) == ("42", None, "batch")
    assert order["parse_result"] == batch.json()[1]
    assert rows["hello"]["sender_id"] is None and rows["hello"]["endpoint"] == "batch"


def test_status_says_logging_is_off(archive: Path) -> None:
    with ServerProcess(["-m", str(archive)]) as server, client(server) as http:
        assert http.get("/status").json()["message_log"] == {"enabled": False}


def test_redaction_and_retention_through_the_server(archive: Path, tmp_path: Path) -> None:
    from nlu_engine.server.message_log import to_row
    from nlu_engine.server.message_store import open_store

    database = tmp_path / "log.db"
    store = open_store(str(database))  # two old rows, past any retention
    store.insert([to_row((f"{i:032x}", time.time() - 30 * 86400, "parse", None, None, None, None, RESULT),
                         Redactor(), None) for i in range(2)])
    store.close()
    args = ["-m", str(archive), "--log-messages", str(database), "--log-redact", "city",
            "--log-redact", r"re:\b\d{5}\b", "--log-retention-days", "7", "--log-max-rows", "5"]
    with ServerProcess(args) as server, client(server) as http:
        answer = http.post("/model/parse", json={"text": "fly from Madrid to Paris"}).json()
        assert [e["value"] for e in answer["entities"]] == ["Madrid", "Paris"]  # the answer is untouched
        http.post("/model/parse", json={"text": "check order 12345 please"})
        for i in range(6):
            assert http.post("/model/parse", json={"text": f"hello number {i}"}).status_code == 200
    rows = rows_of(database)
    texts = [row["text"] for row in rows]
    assert texts == [f"hello number {i}" for i in range(1, 6)]  # the newest 5; the old ones went
    # the redacted rows, before --log-max-rows pruned them, as a second server writes them
    with ServerProcess(args[:-4]) as server, client(server) as http:
        http.post("/model/parse", json={"text": "fly from Madrid to Paris", "message_id": "r1"})
        http.post("/model/parse", json={"text": "check order 12345 please", "message_id": "r2"})
    rows = {row["message_id"]: row for row in rows_of(database)}
    flight, order = rows["r1"], rows["r2"]
    assert flight["text"] == "fly from [city] to [city]"
    assert [(flight["text"][e["start"]:e["end"]], e["value"]) for e in flight["entities"]] == \
        [("[city]", "[city]"), ("[city]", "[city]")]
    assert order["text"] == "check order [redacted] please" and "12345" not in str(order)
    assert "Madrid" not in str(flight) and "Paris" not in str(flight)


def test_a_database_locked_mid_run_is_one_warning_and_parses_go_on(archive: Path, tmp_path: Path) -> None:
    database = tmp_path / "log.db"
    args = ["-m", str(archive), "--log-messages", str(database)]
    with ServerProcess(args) as server, client(server) as http:
        assert http.post("/model/parse", json={"text": "hi", "message_id": "before"}).status_code == 200
        assert wait_for(lambda: http.get("/status").json()["message_log"]["rows_written"] == 1)
        lock = sqlite3.connect(database, isolation_level=None)
        lock.execute("BEGIN EXCLUSIVE")  # another process holds the write lock: nothing can be written
        try:
            for i in range(40):
                start = time.perf_counter()
                response = http.post("/model/parse", json={"text": f"hi {i}", "message_id": f"m{i}"})
                assert response.status_code == 200 and time.perf_counter() - start < 2.0
                time.sleep(0.2)  # 8 s: past the 5 s busy timeout
            assert wait_for(lambda: http.get("/status").json()["message_log"]["writing"] is False)
            status = http.get("/status").json()["message_log"]
            assert status["error"] == "database is locked"
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert wait_for(lambda: http.get("/status").json()["message_log"]["writing"] is True)
    log = server.log()
    assert log.count("message log: cannot write to") == 1, log
    assert log.count("database is locked") == 1
    assert f"message log: writing to {database} again; 0 rows were dropped" in log
    # kept while the database was locked, and written once it was free
    expected = ["before", *[f"m{i}" for i in range(40)]]
    assert sorted(row["message_id"] for row in rows_of(database)) == sorted(expected)


def test_two_workers_write_every_row_once(archive: Path, tmp_path: Path) -> None:
    database = tmp_path / "log.db"
    clients, each = 6, 50
    sent: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        with client(server) as http:
            for i in range(each):
                message_id = f"c{n}-{i}"
                response = http.post("/model/parse", json={"text": f"book a flight to Paris {i}",
                                                           "sender_id": f"c{n}", "message_id": message_id})
                with lock:
                    (sent if response.status_code == 200 else errors).append(message_id)

    with ServerProcess(["-m", str(archive), "--workers", "2", "--log-messages", str(database)]) as server:
        threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        with client(server) as http:
            batch = http.post("/model/parse/batch", json={"texts": [f"hi {i}" for i in range(20)]})
    assert server.process is None  # stopped: every worker flushed its queue on the way out
    assert not errors and len(sent) == clients * each and batch.status_code == 200
    rows = rows_of(database)
    assert len(rows) == clients * each + 20
    assert len({row["id"] for row in rows}) == len(rows)
    logged = [row["message_id"] for row in rows if row["endpoint"] == "parse"]
    assert sorted(logged) == sorted(sent)  # every parse once, none twice
    assert "message log:" not in server.log()  # no warning of any kind
