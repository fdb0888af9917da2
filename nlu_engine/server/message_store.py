"""Where ``serve --log-messages`` keeps the parses: one small store over SQLAlchemy Core.

``--log-messages FILE`` is an embedded SQLite database (WAL mode and a busy timeout, so the
worker processes of ``serve --workers N`` write to it side by side); ``--log-messages
postgresql://user@host/db`` a PostgreSQL database (psycopg 3), for several workers or hosts. Every
statement is built with SQLAlchemy's expression language, never from strings.

The schema (version 2) is three tables: ``nlu_log_meta`` (``key`` → ``value``: the format's name
and its version), ``nlu_log_messages``, one row a parse, keyed by a uuid made when the message was
parsed, so a batch written again after an error adds nothing twice, and ``nlu_log_unindexed``, the
ids of the rows no reader has indexed yet (written in the same transaction as the rows: the review's
grouping, :mod:`nlu_engine.review`, takes them from there, so it reads each row once and misses none,
whatever order the workers' transactions commit in). A log of version 1 (no ``nlu_log_unindexed``)
is migrated in place when it opens: the table is made and every stored row's id queued. A log of a
newer version, or a file that is not a log, is refused with one line when the store opens.

:class:`SQLStore` is the writer's :class:`~nlu_engine.server.message_log.Store`: ``insert``,
``prune`` and ``close``, a failure being ``StoreUnavailable`` (the database is down, full or
locked: try again later) or ``RowsRefused`` (these rows cannot be stored: drop them).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from nlu_engine.contract.errors import NLUError
from nlu_engine.server.message_log import RowsRefused, StoreUnavailable

FORMAT_NAME = "nlu-engine message log"
SCHEMA_VERSION = 2
#: the older schema versions :meth:`SQLStore._check_schema` migrates in place
MIGRATES_FROM = ("1",)
#: seconds an SQLite write waits for another process's lock before it counts as unavailable
BUSY_TIMEOUT = 5.0

metadata = sa.MetaData()
meta_table = sa.Table(
    "nlu_log_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(255), nullable=False),
)
messages_table = sa.Table(
    "nlu_log_messages",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),  # uuid4 hex, made when the text was parsed
    sa.Column("parsed_at", sa.Float, nullable=False, index=True),  # seconds since the epoch (UTC)
    sa.Column("endpoint", sa.String(16), nullable=False),  # "parse" or "batch"
    sa.Column("worker", sa.String(255)),
    sa.Column("model_id", sa.String(255)),
    sa.Column("model_file", sa.String(255)),
    sa.Column("sender_id", sa.String(255), index=True),
    sa.Column("message_id", sa.String(255)),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("intent", sa.String(255), index=True),
    sa.Column("confidence", sa.Float),
    sa.Column("out_of_scope", sa.Float),
    sa.Column("intent_ranking", sa.JSON),
    sa.Column("entities", sa.JSON),
    sa.Column("parse_result", sa.JSON),
)
#: the ids of the rows no reader has indexed yet (version 2): a queue the review's grouping empties
unindexed_table = sa.Table(
    "nlu_log_unindexed",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
)
#: the columns a row carries, in the table's order
COLUMNS = tuple(column.name for column in messages_table.columns)


def database_url(target: str) -> sa.URL:
    """The SQLAlchemy URL of ``--log-messages``: a file path (SQLite) or a database URL."""
    if "://" not in target:
        path = Path(target).expanduser()
        if path.is_dir():
            raise NLUError(f"--log-messages '{target}' is a folder; name a database file in it")
        if not path.parent.is_dir():
            raise NLUError(f"--log-messages '{target}': folder '{path.parent}' does not exist")
        return sa.URL.create("sqlite+pysqlite", database=str(path.resolve()))
    try:
        url = sa.make_url(target)
    except sa_exc.ArgumentError:
        raise NLUError(f"--log-messages: '{target}' is not a database URL") from None
    backend = url.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg")
    if backend == "sqlite" and url.database:
        return url
    raise NLUError(
        f"--log-messages: '{url.drivername}' databases are not supported; give a file (SQLite) "
        "or a postgresql:// URL"
    )


def describe(url: sa.URL) -> str:
    """The database, for messages: a file's path, or the URL without its password."""
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=True)


def _sqlite_settings(connection: Any, _record: Any) -> None:
    """Each SQLite connection: WAL (readers never block the writers of other workers) and
    commits synced at checkpoints; the busy timeout (writers wait their turn for
    :data:`BUSY_TIMEOUT`) is the driver's ``timeout``."""
    cursor = connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _create_engine(url: sa.URL) -> sa.Engine:
    if url.get_backend_name() == "sqlite":
        engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT})
        sa.event.listen(engine, "connect", _sqlite_settings)
        return engine
    # psycopg's own line on a connection lost mid-batch would repeat the writer's one warning
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    try:
        return sa.create_engine(url, pool_pre_ping=True, connect_args={"connect_timeout": 10})
    except ModuleNotFoundError:
        raise NLUError(
            "--log-messages with PostgreSQL needs psycopg: pip install 'nlu-engine[postgres]'"
        ) from None


def first_line(error: BaseException) -> str:
    """An error's first line without SQLAlchemy's background link: what a log line can hold."""
    original = getattr(error, "orig", None)
    text = str(original if original is not None else error) or type(error).__name__
    return text.strip().splitlines()[0][:300] if text.strip() else type(error).__name__


class SQLStore:
    """The message log in an SQLite file or a PostgreSQL database (see the module's docstring)."""

    def __init__(self, target: str, create: bool = True) -> None:
        self.url = database_url(target)
        self.description = describe(self.url)
        self.dialect = self.url.get_backend_name()
        self.engine = _create_engine(self.url)
        try:
            self._check_schema(create)
        except sa_exc.SQLAlchemyError as error:
            self.engine.dispose()
            if self.dialect == "sqlite" and not isinstance(error, sa_exc.OperationalError):
                raise NLUError(f"--log-messages {self.description} is not an nlu-engine message log "
                               f"({first_line(error)})") from None
            raise NLUError(f"--log-messages {self.description}: {first_line(error)}") from None
        except BaseException:
            self.engine.dispose()
            raise

    def _check_schema(self, create: bool) -> None:
        """Refuse a database that is not a log of this version; create the tables in one that
        holds none of them (an SQLite file: one that holds no table at all)."""
        with self.engine.begin() as connection:
            tables = set(sa.inspect(connection).get_table_names())
            if meta_table.name in tables:
                query = sa.select(meta_table.c.key, meta_table.c.value)
                stored = dict(connection.execute(query).tuples().all())
                self._check_version(stored)
                if stored.get("version") in MIGRATES_FROM:
                    _migrate(connection)
                return
            if messages_table.name in tables or (self.dialect == "sqlite" and tables):
                raise NLUError(f"--log-messages {self.description} is not an nlu-engine message log "
                               "(it holds other tables); name a new file or an empty database")
            if not create:
                raise NLUError(f"--log-messages {self.description} holds no message log")
            metadata.create_all(connection)
            connection.execute(sa.insert(meta_table), [
                {"key": "format", "value": FORMAT_NAME},
                {"key": "version", "value": str(SCHEMA_VERSION)},
                {"key": "created_at", "value": f"{time.time():.3f}"},
            ])

    def _check_version(self, stored: dict[str, str]) -> None:
        if stored.get("format") != FORMAT_NAME:
            raise NLUError(f"--log-messages {self.description} is not an nlu-engine message log "
                           f"(its nlu_log_meta names no '{FORMAT_NAME}')")
        version = stored.get("version")
        if version is not None and version.isdigit() and int(version) > SCHEMA_VERSION:
            raise NLUError(
                f"--log-messages {self.description} is a message log of schema version {version}, "
                f"newer than this nlu-engine's ({SCHEMA_VERSION}): upgrade nlu-engine to open it"
            )
        if version != str(SCHEMA_VERSION) and version not in MIGRATES_FROM:
            raise NLUError(
                f"--log-messages {self.description} is a message log of schema version "
                f"{stored.get('version')}; this nlu-engine reads and writes version {SCHEMA_VERSION}: "
                "name a new file or database"
            )

    def _insert_statement(self, table: sa.Table = messages_table) -> Any:
        """INSERT ... ON CONFLICT (id) DO NOTHING, in the database's dialect."""
        from sqlalchemy.dialects import postgresql, sqlite

        dialect = sqlite if self.dialect == "sqlite" else postgresql
        return dialect.insert(table).on_conflict_do_nothing(index_elements=["id"])

    def insert(self, rows: list[dict[str, Any]]) -> None:
        """Store ``rows`` in one transaction, their ids queued for the readers that index the log
        (:data:`unindexed_table`); a row whose id is stored already is skipped."""
        if not rows:
            return
        try:
            with self.engine.begin() as connection:
                connection.execute(self._insert_statement(), rows)
                queued = [{"id": row["id"]} for row in rows]
                connection.execute(self._insert_statement(unindexed_table), queued)
        except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.DisconnectionError,
                sa_exc.TimeoutError, sa_exc.ResourceClosedError, OSError) as error:
            raise StoreUnavailable(first_line(error)) from None
        except (sa_exc.SQLAlchemyError, ValueError, TypeError) as error:
            raise RowsRefused(first_line(error)) from None

    def prune(self, retention_days: float | None, max_rows: int | None, now: float | None = None) -> int:
        """Delete the rows older than ``retention_days`` and all but the newest ``max_rows``;
        returns how many went."""
        table = messages_table
        deleted = 0
        try:
            with self.engine.begin() as connection:
                if retention_days is not None:
                    cutoff = (time.time() if now is None else now) - retention_days * 86400
                    deleted += connection.execute(sa.delete(table).where(table.c.parsed_at < cutoff)).rowcount
                if max_rows is not None:
                    older = (sa.select(table.c.id).order_by(table.c.parsed_at.desc(), table.c.id.desc())
                             .offset(max_rows).scalar_subquery())
                    deleted += connection.execute(sa.delete(table).where(table.c.id.in_(older))).rowcount
                if deleted:  # the queued ids of rows pruned before any reader indexed them
                    kept = sa.select(table.c.id).where(table.c.id == unindexed_table.c.id).exists()
                    connection.execute(sa.delete(unindexed_table).where(~kept))
        except (sa_exc.SQLAlchemyError, OSError) as error:
            raise StoreUnavailable(first_line(error)) from None
        return max(deleted, 0)

    def count(self) -> int:
        with self.engine.connect() as connection:
            query = sa.select(sa.func.count()).select_from(messages_table)
            return int(connection.execute(query).scalar_one())

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The stored rows, oldest first (``limit``: the first ones only)."""
        query = sa.select(messages_table).order_by(messages_table.c.parsed_at, messages_table.c.id)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]

    def close(self) -> None:
        self.engine.dispose()


def _migrate(connection: Any) -> None:
    """A version 1 log made version 2 in the open transaction: the unindexed queue made and every
    stored row's id put on it (nothing of the log is rewritten)."""
    unindexed_table.create(connection, checkfirst=True)
    connection.execute(sa.insert(unindexed_table).from_select(["id"], sa.select(messages_table.c.id)))
    connection.execute(sa.update(meta_table).where(meta_table.c.key == "version")
                       .values(value=str(SCHEMA_VERSION)))
    connection.execute(sa.insert(meta_table).values(key="migrated_at", value=f"{time.time():.3f}"))


def open_store(target: str, create: bool = True) -> SQLStore:
    """The store of ``--log-messages TARGET``, its schema checked (and created when ``create``
    and the database holds none); a one-line :class:`NLUError` when it is not a usable log."""
    return SQLStore(target, create)
