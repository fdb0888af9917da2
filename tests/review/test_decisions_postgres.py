"""The review's decisions in a PostgreSQL message log: two reviewers' stores, a stale or racing
write refused whole, undo, and reviewed.yml written from it (a throwaway cluster, as the message
log's PostgreSQL tests make it, ``tests/postgres.py``; skipped without Debian's postgresql)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.extras import requires_extra
from tests.postgres import Cluster, cluster_fixture, drop_tables  # noqa: F401 - the cluster fixture
from tests.review.conftest import default_rows, make_log

pytestmark = requires_extra("postgres", "psycopg", "sqlalchemy")


@pytest.fixture
def database(cluster: Cluster) -> Iterator[str]:
    yield cluster.url
    from nlu_engine.review.decisions import review_metadata
    from nlu_engine.server.message_store import metadata

    drop_tables(cluster.url, review_metadata, metadata)


def test_two_reviewers_on_postgresql(database: str, tmp_path: Path) -> None:
    from nlu_engine.review.decisions import OPEN, Change, Conflict, open_review
    from nlu_engine.review.writeback import write_reviewed

    rows = default_rows()
    make_log(database, rows)
    ann, bob = open_review(database), open_review(database)
    try:
        first, second = rows[3], rows[4]
        group = [Change(first["id"], 0, first["text"], intent="check_order"),
                 Change(second["id"], 0, second["text"], intent="check_order")]
        assert ann.decide(group, "ann") == {first["id"]: 1, second["id"]: 1}
        with pytest.raises(Conflict):  # bob saw the group undecided
            bob.decide([Change(first["id"], 0, first["text"], intent="greet")], "bob")
        assert bob.decide([Change(first["id"], 1, first["text"], intent="greet")], "bob") == {first["id"]: 2}
        assert ann.undo([(first["id"], 2)], "ann") == {first["id"]: 3}
        assert {d["text"]: d["intent"] for d in bob.labelled()} == {
            first["text"]: "check_order", second["text"]: "check_order"}
        ann.undo([(second["id"], 1)], "ann")
        assert bob.decisions()[second["id"]]["status"] == OPEN
        written = write_reviewed(bob.labelled(), tmp_path / "reviewed.yml")
        assert written.written == 1 and "- where is my order" in (tmp_path / "reviewed.yml").read_text()
    finally:
        ann.close()
        bob.close()
