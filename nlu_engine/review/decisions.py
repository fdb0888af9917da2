"""The review's decisions, kept in the message log's own database (SQLAlchemy Core, no SQL strings).

Two tables beside ``serve --log-messages``'s: ``nlu_review_decisions``, the current decision of
each message (keyed by the log row's id), and ``nlu_review_history``, every version of it, so a
decision can be undone and a review resumed by anyone. A decision holds the message's text too: the
write-back does not depend on the log keeping the row (``--log-max-rows`` may prune it).

Each decision carries a version. A write names the version it saw (0: none yet) and is applied
only if that is still the stored one, all of a request's messages in one transaction; otherwise
nothing is written and :class:`Conflict` names the messages another reviewer decided meanwhile (the
page answers 409). An undo is a new version that restores the one before it, under the same rule.
A write takes the review writers' lock first (:func:`nlu_engine.review.index.lock`), so of two
reviewers deciding the same group at once the second reads the first's versions and gets the 409.

The inbox is read from the index the store keeps in the same database
(:mod:`nlu_engine.review.index`): :meth:`ReviewStore.catch_up` indexes the messages logged since,
a decision updates the groups it touches in its own transaction, and :meth:`ReviewStore.inbox`
reads one page of groups without reading the log.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from nlu_engine.contract.errors import NLUError
from nlu_engine.review import index
from nlu_engine.review.index import review_metadata
from nlu_engine.server.message_store import (
    SQLStore,
    describe,
    first_line,
    messages_table,
    meta_table,
    open_store,
)

REVIEW_VERSION = 1
#: a decision's states: labelled (an intent, maybe entities) or open (undone, not yet decided)
LABELLED, OPEN = "labelled", "open"


def _decision_columns() -> list[sa.Column]:
    return [
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("intent", sa.String(255)),
        sa.Column("entities", sa.JSON),
        sa.Column("reviewer", sa.String(255)),
        sa.Column("decided_at", sa.Float, nullable=False),
    ]


decisions_table = sa.Table(
    "nlu_review_decisions", review_metadata,
    sa.Column("message_id", sa.String(32), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    *_decision_columns(),
)
history_table = sa.Table(
    "nlu_review_history", review_metadata,
    sa.Column("message_id", sa.String(32), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    *_decision_columns(),
)
#: the log's columns the review reads (not the whole parse result)
MESSAGE_COLUMNS = ("id", "parsed_at", "text", "intent", "confidence", "out_of_scope",
                   "intent_ranking", "entities", "model_id")


@dataclass(frozen=True)
class Change:
    """One message's new decision: ``expected`` is the version the reviewer saw (0: none)."""

    message_id: str
    expected: int
    text: str
    status: str = LABELLED
    intent: str | None = None
    entities: tuple[dict[str, Any], ...] = ()


class Conflict(Exception):
    """Another reviewer changed these messages' decisions first: ``current`` maps each id to its
    stored decision (None: none)."""

    def __init__(self, current: dict[str, dict[str, Any] | None]) -> None:
        super().__init__(f"{len(current)} messages were decided by someone else meanwhile")
        self.current = current


class ReviewStore:
    """The message log of ``--db`` and the review's tables in it."""

    def __init__(self, target: str, threshold: float = 0.8) -> None:
        self.threshold = threshold
        try:
            self.log: SQLStore = open_store(target, create=False)
        except NLUError as error:
            raise NLUError(str(error).replace("--log-messages", "--db", 1)) from None
        self.engine = self.log.engine
        self.description = describe(self.log.url)
        try:
            self._check_tables()
        except sa_exc.SQLAlchemyError as error:
            self.close()
            raise NLUError(f"--db {self.description}: {first_line(error)}") from None

    def _check_tables(self) -> None:
        with self.engine.begin() as connection:
            stored = connection.execute(
                sa.select(meta_table.c.value).where(meta_table.c.key == "review_version")
            ).scalar_one_or_none()
            if stored is not None and stored != str(REVIEW_VERSION):
                self.close()
                raise NLUError(f"--db {self.description} holds review decisions of version {stored}; "
                               f"this nlu-engine reads version {REVIEW_VERSION}: use a matching nlu-engine")
            review_metadata.create_all(connection)
            if stored is None:
                connection.execute(sa.insert(meta_table).values(key="review_version",
                                                                value=str(REVIEW_VERSION)))
            index.check_threshold(connection, self.threshold)

    # --- the index --------------------------------------------------------------------------------
    def catch_up(self, limit: int | None = None) -> int:
        """Index the messages logged since the last call (at most about ``limit``): how many."""
        done = 0
        while limit is None or done < limit:
            with self.engine.begin() as connection:
                index.lock(connection)
                taken = index.index_queued(connection, self.threshold, _labelled_of,
                                           index.CHUNK if limit is None else min(index.CHUNK, limit - done))
            if not taken:
                break
            done += taken
        return done

    def inbox(self, offset: int, limit: int, members: int | None = None,
              group_ids: list[int] | None = None
              ) -> tuple[int, int, list[tuple[list[dict[str, Any]], int, float]]]:
        """(groups, pending messages, for the groups ``offset`` to ``offset + limit``, or for the
        group ids ``group_ids`` in their order: the rows of their pending messages, oldest first (the
        first ``members``), their size and score), from the index: rows the log no longer holds
        (pruned) are left out, their entries dropped."""
        with self.engine.connect() as connection:
            groups, messages, page = index.page(connection, offset, limit, members, group_ids)
        rows = self.messages_by_id([message_id for ids, _, _ in page for message_id in ids])
        gone = [message_id for ids, _, _ in page for message_id in ids if message_id not in rows]
        if gone:
            with self.engine.begin() as connection:
                index.lock(connection)
                index.forget(connection, gone)
        shown = [([rows[mid] for mid in ids if mid in rows], size, score) for ids, size, score in page]
        return groups, messages - len(gone), [group for group in shown if group[0]]

    def head(self, limit: int) -> list[tuple[int, dict[str, Any], int, float]]:
        """The first ``limit`` groups of the inbox: (group id, its oldest pending message's row,
        its size, its score); a group whose row the log no longer holds is left out."""
        with self.engine.connect() as connection:
            first = index.head(connection, limit)
        rows = self.messages_by_id([message_id for _, message_id, _, _ in first])
        return [(group, rows[message_id], size, score) for group, message_id, size, score in first
                if message_id in rows]

    # --- reading ----------------------------------------------------------------------------------
    def messages(self) -> list[dict[str, Any]]:
        """The logged messages (the columns the review needs), oldest first."""
        columns = [messages_table.c[name] for name in MESSAGE_COLUMNS]
        query = sa.select(*columns).order_by(messages_table.c.parsed_at, messages_table.c.id)
        with self.engine.connect() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]

    def messages_by_id(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The logged messages of ``ids`` that the log holds."""
        columns = [messages_table.c[name] for name in MESSAGE_COLUMNS]
        found: dict[str, dict[str, Any]] = {}
        with self.engine.connect() as connection:
            for part in index.chunks(ids):
                query = sa.select(*columns).where(messages_table.c.id.in_(part))
                found.update((row["id"], dict(row)) for row in connection.execute(query).mappings())
        return found

    def decisions_of(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The current decisions of ``ids`` (those that have one), by message id."""
        with self.engine.connect() as connection:
            return self._current(connection, ids)

    def decisions(self) -> dict[str, dict[str, Any]]:
        """Every message's current decision (open ones too), by message id."""
        with self.engine.connect() as connection:
            rows = connection.execute(sa.select(decisions_table)).mappings()
            return {row["message_id"]: dict(row) for row in rows}

    def labelled(self) -> list[dict[str, Any]]:
        """The labelled decisions, in the order they were first made."""
        table = decisions_table
        query = sa.select(table).where(table.c.status == LABELLED).order_by(table.c.decided_at,
                                                                            table.c.message_id)
        with self.engine.connect() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]

    # --- writing ----------------------------------------------------------------------------------
    def decide(self, changes: list[Change], reviewer: str | None) -> dict[str, int]:
        """Apply ``changes`` together, or none of them (:class:`Conflict`); the new versions."""
        now = time.time()
        try:
            return self._decide(changes, reviewer, now)
        except sa_exc.IntegrityError:  # another reviewer inserted the first decision meanwhile
            raise Conflict({change.message_id: None for change in changes}) from None

    def _decide(self, changes: list[Change], reviewer: str | None, now: float) -> dict[str, int]:
        with self.engine.begin() as connection:
            index.lock(connection)
            current = self._current(connection, [change.message_id for change in changes])
            stale = {change.message_id: current.get(change.message_id) for change in changes
                     if _version(current.get(change.message_id)) != change.expected}
            if stale:
                raise Conflict(stale)
            versions: dict[str, int] = {}
            for change in changes:
                versions[change.message_id] = self._write(connection, change, reviewer, now)
            index.refresh(connection, {change.message_id: change.status != LABELLED for change in changes})
            return versions

    def undo(self, items: list[tuple[str, int]], reviewer: str | None) -> dict[str, int]:
        """Restore, for each ``(message_id, version)``, the decision before that version (none:
        the message is open again), if ``version`` is still the stored one; else :class:`Conflict`."""
        now = time.time()
        pending: dict[str, bool] = {}
        with self.engine.begin() as connection:
            index.lock(connection)
            current = self._current(connection, [message_id for message_id, _ in items])
            stale = {message_id: current.get(message_id) for message_id, version in items
                     if version < 1 or _version(current.get(message_id)) != version}
            if stale:
                raise Conflict(stale)
            versions: dict[str, int] = {}
            for message_id, version in items:
                before = connection.execute(sa.select(history_table).where(
                    history_table.c.message_id == message_id, history_table.c.version == version - 1
                )).mappings().one_or_none()
                text = current[message_id]["text"]  # type: ignore[index]
                change = (Change(message_id, version, text, before["status"], before["intent"],
                                 tuple(before["entities"] or ()))
                          if before is not None else Change(message_id, version, text, OPEN))
                versions[message_id] = self._write(connection, change, reviewer, now)
                pending[message_id] = change.status != LABELLED
            index.refresh(connection, pending)
            return versions

    def _current(self, connection: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for part in index.chunks(ids):
            query = sa.select(decisions_table).where(decisions_table.c.message_id.in_(part))
            found.update((row["message_id"], dict(row)) for row in connection.execute(query).mappings())
        return found

    def _write(self, connection: Any, change: Change, reviewer: str | None, now: float) -> int:
        version = change.expected + 1
        values = {"status": change.status, "text": change.text, "intent": change.intent,
                  "entities": list(change.entities), "reviewer": reviewer, "decided_at": now}
        if change.expected == 0:
            connection.execute(sa.insert(decisions_table).values(
                message_id=change.message_id, version=version, **values))
        else:
            updated = connection.execute(sa.update(decisions_table).where(
                decisions_table.c.message_id == change.message_id,
                decisions_table.c.version == change.expected,
            ).values(version=version, **values))
            if updated.rowcount != 1:  # another transaction won the race after our read
                raise Conflict({change.message_id: None})
        connection.execute(sa.insert(history_table).values(
            message_id=change.message_id, version=version, **values))
        return version

    def close(self) -> None:
        self.log.close()


def _version(decision: dict[str, Any] | None) -> int:
    return 0 if decision is None else int(decision["version"])


def _labelled_of(connection: Any, ids: list[str]) -> set[str]:
    """Those of ``ids`` whose current decision labels them."""
    found: set[str] = set()
    for part in index.chunks(ids):
        found.update(connection.execute(sa.select(decisions_table.c.message_id).where(
            decisions_table.c.message_id.in_(part), decisions_table.c.status == LABELLED)).scalars())
    return found


def open_review(target: str, threshold: float = 0.8) -> ReviewStore:
    """The review store of ``--db TARGET`` (its inbox grouping texts of Jaccard >= ``threshold``):
    a one-line :class:`NLUError` when it is not a message log of this version (or its review
    tables are of another); a log of the previous version is migrated in place."""
    return ReviewStore(target, threshold)
