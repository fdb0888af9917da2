"""The inbox's groups kept in the log's database as messages arrive, so a page never rereads the log.

The log queues the id of every row it stores (``nlu_log_unindexed``, written in the row's own
transaction); :func:`index_queued` takes the queued ids in chunks, and in the transaction that
removes them from the queue adds each message to four tables of its own:

- ``nlu_review_keys``: one row a distinct group key (:func:`~nlu_engine.review.grouping.group_key`),
  with its group (the smallest key id of the connected keys);
- ``nlu_review_prefixes``: the key's prefix tokens (:func:`~nlu_engine.review.grouping.prefix`),
  through which a new key finds every key of Jaccard >= the threshold with it, exactly;
- ``nlu_review_entries``: one row a message: its key, its group, its time, its priority and whether
  it is pending (no labelled decision);
- ``nlu_review_groups``: one row a group with pending messages: how many, the highest priority,
  the first pending message and the group's score, which orders the inbox (an index on it).

A new message updates its group's row by combining (a count, a maximum, a minimum); a decision
recomputes the rows of the groups it touched from their entries (:func:`refresh`). The groups are
the connected keys of every logged message, labelled or not, and the inbox shows their pending
messages: what :func:`nlu_engine.review.inbox.build_inbox` computes from the whole log.

Every writer takes the same lock first (:func:`lock`: an update of one row of ``nlu_log_meta``),
so the indexers and decisions of several review processes apply one at a time.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from nlu_engine.review.grouping import group_key, jaccard, prefix, size_bounds, token_set
from nlu_engine.review.ranking import group_score, priority
from nlu_engine.server.message_store import messages_table, meta_table, unindexed_table

#: the review's tables (decisions, history and the index) in the log's database
review_metadata = sa.MetaData()
#: queued ids taken in one transaction
CHUNK = 5_000
#: ids in one IN (...) list
IN_LIST = 2_000
#: the meta row every review writer updates first (the lock) and the threshold the index groups with
LOCK_KEY, THRESHOLD_KEY = "review_version", "review_threshold"

keys_table = sa.Table(
    "nlu_review_keys", review_metadata,
    sa.Column("key_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("digest", sa.String(32), nullable=False, unique=True),
    sa.Column("tokens", sa.Text, nullable=False),  # the key's token set, space-joined ("" for none)
    sa.Column("group_id", sa.Integer, nullable=False, index=True),
)
prefixes_table = sa.Table(
    "nlu_review_prefixes", review_metadata,
    sa.Column("token", sa.Text, primary_key=True),
    sa.Column("key_id", sa.Integer, primary_key=True),
)
entries_table = sa.Table(
    "nlu_review_entries", review_metadata,
    sa.Column("message_id", sa.String(32), primary_key=True),
    sa.Column("key_id", sa.Integer, nullable=False),
    sa.Column("group_id", sa.Integer, nullable=False),
    sa.Column("parsed_at", sa.Float, nullable=False),
    sa.Column("priority", sa.Float, nullable=False),
    sa.Column("pending", sa.Boolean, nullable=False),
    sa.Index("ix_nlu_review_entries_group", "group_id", "pending", "parsed_at", "message_id"),
)
groups_table = sa.Table(
    "nlu_review_groups", review_metadata,
    sa.Column("group_id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("pending", sa.Integer, nullable=False),
    sa.Column("top", sa.Float, nullable=False),
    sa.Column("first_at", sa.Float, nullable=False),
    sa.Column("first_id", sa.String(32), nullable=False),
    sa.Column("score", sa.Float, nullable=False),
)
sa.Index("ix_nlu_review_groups_order", groups_table.c.score.desc(), groups_table.c.first_id)
INDEX_TABLES = (groups_table, entries_table, prefixes_table, keys_table)
#: the log's columns the index reads
_READ = ("id", "parsed_at", "text", "intent", "confidence", "out_of_scope", "intent_ranking")


def lock(connection: Any) -> None:
    """Wait for, then hold until the transaction ends, the review writers' lock (a row lock in
    PostgreSQL, the write lock in SQLite)."""
    connection.execute(sa.update(meta_table).where(meta_table.c.key == LOCK_KEY)
                       .values(value=meta_table.c.value))


def chunks(items: list[Any], size: int = IN_LIST) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def check_threshold(connection: Any, threshold: float) -> None:
    """Start the index again (every logged id queued) when it was built with another threshold."""
    stored = connection.execute(sa.select(meta_table.c.value).where(meta_table.c.key == THRESHOLD_KEY)
                                ).scalar_one_or_none()
    if stored != repr(threshold):
        rebuild(connection, threshold)


def rebuild(connection: Any, threshold: float) -> None:
    """Empty the index and queue every logged id again (the indexer rebuilds it with ``threshold``)."""
    for table in INDEX_TABLES:
        connection.execute(sa.delete(table))
    connection.execute(sa.delete(unindexed_table))
    connection.execute(sa.insert(unindexed_table).from_select(["id"], sa.select(messages_table.c.id)))
    connection.execute(sa.delete(meta_table).where(meta_table.c.key == THRESHOLD_KEY))
    connection.execute(sa.insert(meta_table).values(key=THRESHOLD_KEY, value=repr(threshold)))


def _digest(key: str) -> str:
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class _Groups:
    """Union-find over group ids, the smaller id the root."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, group: int) -> int:
        root = group
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while group != root:
            self.parent[group], group = root, self.parent.get(group, group)
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def index_queued(connection: Any, threshold: float, labelled_of: Any, limit: int = CHUNK) -> int:
    """Index up to ``limit`` queued messages (``labelled_of(connection, ids)``: those of ``ids``
    with a labelled decision); the number of queued ids taken (0: the queue is empty)."""
    ids = list(connection.execute(sa.select(unindexed_table.c.id).limit(limit)).scalars())
    if not ids:
        return 0
    rows: list[dict[str, Any]] = []
    known: set[str] = set()
    for part in chunks(ids):
        query = sa.select(*(messages_table.c[name] for name in _READ)).where(messages_table.c.id.in_(part))
        rows += [dict(row) for row in connection.execute(query).mappings()]
        known.update(connection.execute(sa.select(entries_table.c.message_id)
                                        .where(entries_table.c.message_id.in_(part))).scalars())
    rows = sorted((row for row in rows if row["id"] not in known), key=lambda r: (r["parsed_at"], r["id"]))
    if rows:
        labelled = labelled_of(connection, [row["id"] for row in rows])
        _add(connection, rows, labelled, threshold)
    for part in chunks(ids):
        connection.execute(sa.delete(unindexed_table).where(unindexed_table.c.id.in_(part)))
    return len(ids)


def _add(connection: Any, rows: list[dict[str, Any]], labelled: set[str], threshold: float) -> None:
    """Add ``rows`` (not indexed yet, oldest first): their keys, groups merged, entries, groups' rows."""
    keys = {row["id"]: group_key(row["text"]) for row in rows}
    digests = {key: _digest(key) for key in dict.fromkeys(keys.values())}
    stored: dict[str, tuple[int, int]] = {}  # digest -> (key id, group id)
    for part in chunks(list(digests.values())):
        query = sa.select(keys_table.c.digest, keys_table.c.key_id, keys_table.c.group_id)
        found = connection.execute(query.where(keys_table.c.digest.in_(part)))
        stored.update((digest, (key_id, group)) for digest, key_id, group in found)
    groups = _Groups()
    next_id = int(connection.execute(sa.select(sa.func.coalesce(sa.func.max(keys_table.c.key_id), 0)))
                  .scalar_one()) + 1
    new_keys = [key for key, digest in digests.items() if digest not in stored]
    for offset, key in enumerate(new_keys):
        stored[digests[key]] = (next_id + offset, next_id + offset)
    if threshold < 1.0 and new_keys:
        _link(connection, new_keys, digests, stored, groups, threshold)
    if new_keys:
        connection.execute(sa.insert(keys_table), [
            {"key_id": stored[digests[key]][0], "digest": digests[key],
             "tokens": " ".join(sorted(token_set(key))), "group_id": groups.find(stored[digests[key]][1])}
            for key in new_keys])
        connection.execute(sa.insert(prefixes_table), [
            {"token": token, "key_id": stored[digests[key]][0]}
            for key in new_keys for token in prefix(token_set(key), threshold)])
    touched = {group for _, group in stored.values()} | set(groups.parent) | set(groups.parent.values())
    merged = _merge(connection, groups, touched)
    entries = []
    for row in rows:
        key_id, group = stored[digests[keys[row["id"]]]]
        entries.append({"message_id": row["id"], "key_id": key_id, "group_id": groups.find(group),
                        "parsed_at": row["parsed_at"], "priority": priority(row)[0],
                        "pending": row["id"] not in labelled})
    connection.execute(sa.insert(entries_table), entries)
    _combine(connection, merged, [entry for entry in entries if entry["pending"]])


def _link(connection: Any, new_keys: list[str], digests: dict[str, str],
          stored: dict[str, tuple[int, int]], groups: _Groups, threshold: float) -> None:
    """Union every new key's group with those of the keys of Jaccard >= ``threshold`` with it: the
    stored ones and the new ones before it, found through their shared prefix tokens."""
    prefixes = {key: prefix(token_set(key), threshold) for key in new_keys}
    postings: dict[str, list[tuple[str, int]]] = defaultdict(list)  # token -> (tokens, group)
    wanted = sorted({token for tokens in prefixes.values() for token in tokens})
    for part in chunks(wanted):
        query = (sa.select(prefixes_table.c.token, keys_table.c.tokens, keys_table.c.group_id)
                 .join(keys_table, keys_table.c.key_id == prefixes_table.c.key_id)
                 .where(prefixes_table.c.token.in_(part)))
        for token, tokens, group in connection.execute(query):
            postings[token].append((tokens, group))
    sets: dict[str, frozenset[str]] = {}  # a key's space-joined tokens -> the set
    for key in new_keys:
        tokens = token_set(key)
        low, high = size_bounds(len(tokens), threshold)
        group = stored[digests[key]][1]
        for token in prefixes[key]:
            for other, other_group in postings[token]:
                other_set = sets.get(other)
                if other_set is None:
                    other_set = sets[other] = frozenset(other.split())
                if low <= len(other_set) <= high and groups.find(other_group) != groups.find(group) \
                        and jaccard(tokens, other_set) >= threshold:
                    groups.union(group, other_group)
        for token in prefixes[key]:
            postings[token].append((" ".join(sorted(tokens)), group))


def _merge(connection: Any, groups: _Groups, touched: set[int]) -> dict[int, dict[str, Any]]:
    """Relabel the stored groups merged into another (keys, entries) and combine their rows; the
    rows of the groups now holding ``touched`` (by root id; those with no pending message absent)."""
    roots = {group: groups.find(group) for group in touched}
    rows: dict[int, dict[str, Any]] = {}
    for part in chunks(sorted(touched)):
        query = sa.select(groups_table).where(groups_table.c.group_id.in_(part))
        for row in connection.execute(query).mappings():
            root = roots[row["group_id"]]
            rows[root] = _combined(rows.get(root), dict(row, group_id=root))
        connection.execute(sa.delete(groups_table).where(groups_table.c.group_id.in_(part)))
    for group, root in roots.items():
        if group != root:
            connection.execute(sa.update(keys_table).where(keys_table.c.group_id == group)
                               .values(group_id=root))
            connection.execute(sa.update(entries_table).where(entries_table.c.group_id == group)
                               .values(group_id=root))
    return rows


def _combined(row: dict[str, Any] | None, other: dict[str, Any]) -> dict[str, Any]:
    if row is None:
        return other
    first = min((row["first_at"], row["first_id"]), (other["first_at"], other["first_id"]))
    return {"group_id": row["group_id"], "pending": row["pending"] + other["pending"],
            "top": max(row["top"], other["top"]), "first_at": first[0], "first_id": first[1]}


def _combine(connection: Any, rows: dict[int, dict[str, Any]], pending: list[dict[str, Any]]) -> None:
    """Write the groups' rows: ``rows`` (already taken out of the table) with ``pending`` entries added."""
    for entry in pending:
        mine = {"group_id": entry["group_id"], "pending": 1, "top": entry["priority"],
                "first_at": entry["parsed_at"], "first_id": entry["message_id"]}
        rows[entry["group_id"]] = _combined(rows.get(entry["group_id"]), mine)
    values = [{**row, "score": group_score(row["top"], row["pending"])} for row in rows.values()]
    if values:
        connection.execute(sa.insert(groups_table), values)


def refresh(connection: Any, pending: dict[str, bool]) -> None:
    """After decisions: set the entries' ``pending`` (message id -> pending) and recompute their
    groups' rows from the entries; ids not indexed yet are left to the indexer."""
    for state in (True, False):
        ids = [message_id for message_id, value in pending.items() if value is state]
        for part in chunks(ids):
            connection.execute(sa.update(entries_table).where(entries_table.c.message_id.in_(part))
                               .values(pending=state))
    touched: set[int] = set()
    for part in chunks(list(pending)):
        touched.update(connection.execute(sa.select(entries_table.c.group_id)
                                          .where(entries_table.c.message_id.in_(part))).scalars())
    recompute(connection, touched)


def recompute(connection: Any, touched: set[int]) -> None:
    """The rows of the ``touched`` groups, from their pending entries."""
    entries = entries_table
    for group in sorted(touched):
        connection.execute(sa.delete(groups_table).where(groups_table.c.group_id == group))
        mine = sa.and_(entries.c.group_id == group, entries.c.pending == sa.true())
        count, top = connection.execute(sa.select(sa.func.count(), sa.func.max(entries.c.priority))
                                        .where(mine)).one()
        if not count:
            continue
        oldest = (sa.select(entries.c.parsed_at, entries.c.message_id).where(mine)
                  .order_by(entries.c.parsed_at, entries.c.message_id).limit(1))
        first_at, first_id = connection.execute(oldest).one()
        connection.execute(sa.insert(groups_table).values(
            group_id=group, pending=count, top=top, first_at=first_at, first_id=first_id,
            score=group_score(top, count)))


def forget(connection: Any, message_ids: list[str]) -> None:
    """Drop the entries of messages the log no longer holds (pruned) and recompute their groups."""
    touched: set[int] = set()
    for part in chunks(message_ids):
        touched.update(connection.execute(sa.select(entries_table.c.group_id)
                                          .where(entries_table.c.message_id.in_(part))).scalars())
        connection.execute(sa.delete(entries_table).where(entries_table.c.message_id.in_(part)))
    recompute(connection, touched)


def page(connection: Any, offset: int, limit: int, members: int | None = None,
         groups: list[int] | None = None) -> tuple[int, int, list[tuple[list[str], int, float]]]:
    """(groups with pending messages, pending messages, for the groups ``offset`` to ``offset +
    limit`` in the inbox's order, or for ``groups`` (ids, in their order) when given: the ids of
    their pending messages, oldest first, the first ``members`` only when given, with the group's
    size and score)."""
    count, messages = connection.execute(sa.select(sa.func.count(), sa.func.coalesce(
        sa.func.sum(groups_table.c.pending), 0))).one()
    if groups is None:
        order = (sa.select(groups_table.c.group_id, groups_table.c.pending, groups_table.c.score)
                 .order_by(groups_table.c.score.desc(), groups_table.c.first_id).offset(offset).limit(limit))
        chosen = [tuple(row) for row in connection.execute(order).all()]
    else:
        found: dict[int, tuple[Any, ...]] = {}
        for part in chunks(groups):
            query = sa.select(groups_table.c.group_id, groups_table.c.pending, groups_table.c.score)
            found.update((row[0], tuple(row)) for row in connection.execute(
                query.where(groups_table.c.group_id.in_(part))))
        chosen = [found[group] for group in groups if group in found]
    shown = []
    for group, size, score in chosen:
        query = (sa.select(entries_table.c.message_id)
                 .where(entries_table.c.group_id == group, entries_table.c.pending == sa.true())
                 .order_by(entries_table.c.parsed_at, entries_table.c.message_id).limit(members))
        shown.append((list(connection.execute(query).scalars()), int(size), float(score)))
    return int(count), int(messages), shown


def head(connection: Any, limit: int) -> list[tuple[int, str, int, float]]:
    """The first ``limit`` groups in the inbox's order, in one query: (group id, its oldest
    pending message's id, its size, its score)."""
    query = (sa.select(groups_table.c.group_id, groups_table.c.first_id, groups_table.c.pending,
                       groups_table.c.score)
             .order_by(groups_table.c.score.desc(), groups_table.c.first_id).limit(limit))
    return [(int(group), first, int(size), float(score))
            for group, first, size, score in connection.execute(query)]
