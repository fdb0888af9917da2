"""``serve --log-messages postgresql://...``: the log in a real PostgreSQL server.

A throwaway cluster is made with Debian's ``initdb`` / ``pg_ctl`` (``make test-deps`` installs
the ``postgresql`` package) on a free loopback port, and stopped after; the tests are skipped
when neither is installed. The server is stopped and started again mid-run: a lost database
is one warning, parses go on, and the log writes again when it is back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nlu_engine.contract.errors import NLUError
from nlu_engine.server.message_log import LogSettings, MessageLog
from nlu_engine.server.process import ServerProcess
from nlu_engine.server.redaction import Redactor
from tests.extras import requires_extra
from tests.postgres import Cluster, cluster_fixture, drop_tables  # noqa: F401 - the cluster fixture
from tests.server.test_message_log import PIPELINE, RESULT, client, wait_for

pytestmark = requires_extra("postgres", "psycopg", "sqlalchemy", "starlette", "uvicorn", "httpx")


@pytest.fixture
def database(cluster: Cluster) -> Iterator[str]:
    """The cluster's URL, its log tables dropped after each test."""
    yield cluster.url
    from nlu_engine.server.message_store import metadata

    drop_tables(cluster.url, metadata)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Path:
    from nlu_engine.assembly.model import train

    out = tmp_path_factory.mktemp("pg-models")
    return train(PIPELINE, tiny_data_path, out=out, fixed_model_name="tiny", log=None)


def test_the_store_in_postgresql(database: str) -> None:
    import sqlalchemy as sa

    from nlu_engine.server.message_log import to_row
    from nlu_engine.server.message_store import meta_table, open_store

    store = open_store(database)
    assert store.description == database  # no driver name, and no password to hide
    now = time.time()
    hostile = {**RESULT, "text": "nul \x00 and a lone \ud800 surrogate"}
    items = [(f"{i:032x}", now - (10 - i) * 86400, "parse", "m", None, "s", None,
              hostile if i == 9 else RESULT) for i in range(10)]
    rows = [to_row(item, Redactor(), "w") for item in items]
    store.insert(rows[:4])
    store.insert(rows)  # the first four again: skipped
    assert store.count() == 10
    assert store.prune(retention_days=3.5, max_rows=None) == 7
    assert store.prune(retention_days=None, max_rows=2) == 1
    kept = store.rows()
    assert [row["id"] for row in kept] == [row["id"] for row in rows[8:]]
    assert kept[0]["parse_result"] == RESULT and kept[1]["text"] == "nul \ufffd and a lone \ufffd surrogate"
    with store.engine.begin() as connection:
        connection.execute(sa.update(meta_table).where(meta_table.c.key == "version").values(value="99"))
    store.close()
    with pytest.raises(NLUError, match="schema version 99"):
        open_store(database)


def test_writer_to_postgresql_flushes_on_close(database: str) -> None:
    from nlu_engine.server.message_store import open_store

    log = MessageLog(LogSettings(database, redact=("city",)), open_store, "w")
    log.start()
    for i in range(300):
        log.record("parse", [{**RESULT, "text": f"fly from Berlin to Paris {i}"}], None, "s", str(i))
    log.close()
    assert log.written == 300 and log.dropped == 0
    store = open_store(database)
    rows = store.rows()
    store.close()
    assert len(rows) == 300 and all(row["text"].startswith("fly from [city] to [city]") for row in rows)


def test_two_workers_and_a_lost_database(archive: Path, database: str, cluster: Cluster) -> None:
    """``--workers 2`` on PostgreSQL; the database stopped and started again mid-run."""
    sent: list[str] = []
    failed: list[str] = []
    lock = threading.Lock()

    def work(n: int, count: int) -> None:
        with client(server) as http:
            for i in range(count):
                message_id = f"c{n}-{i}"
                body = {"text": f"hi {i}", "message_id": message_id}
                status = http.post("/model/parse", json=body).status_code
                with lock:
                    (sent if status == 200 else failed).append(message_id)

    def burst(first: int, clients: int = 4, count: int = 40) -> None:
        threads = [threading.Thread(target=work, args=(first + n, count), daemon=True)
                   for n in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)

    args = ["-m", str(archive), "--workers", "2", "--log-messages", database]
    with ServerProcess(args) as server:
        burst(0)
        cluster.stop()  # the database is lost
        try:
            burst(10)  # parses go on
            assert wait_for(lambda: server.log().count("message log: cannot write to") >= 1, 20)
        finally:
            cluster.start()
        burst(20)
        assert wait_for(lambda: server.log().count("writing to") >= server.log().count("cannot write to"), 20)
    assert not failed and len(sent) == 12 * 40
    log = server.log()
    assert log.count("message log: cannot write to") <= 2  # one warning a worker at most
    from nlu_engine.server.message_store import open_store

    store = open_store(database)
    stored = [row["message_id"] for row in store.rows()]
    store.close()
    assert len(stored) == len(set(stored))  # none twice
    assert set(stored) <= set(sent)
    dropped = sum(int(word) for line in log.splitlines() if "rows were dropped" in line
                  for word in [line.split("; ")[-1].split()[0]])
    assert len(stored) + dropped == len(sent), log  # every parse stored once or counted as dropped
