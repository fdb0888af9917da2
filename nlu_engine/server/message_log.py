"""``serve --log-messages``: every parse recorded, off the parse path.

A parse endpoint hands its results to :meth:`MessageLog.record`, which stamps each with a uuid
and the time and puts it on a bounded queue without waiting: that is all a parse pays. One
writer thread a worker process takes the queue in batches (lingering ``linger`` seconds after a
first row for others to join it), masks what ``--log-redact`` names
(:mod:`~nlu_engine.server.redaction`), and inserts each batch in one transaction through a
:class:`Store` (:mod:`~nlu_engine.server.message_store`: SQLite or PostgreSQL). It also deletes
what ``--log-retention-days`` / ``--log-max-rows`` no longer keep, at start, every
``prune_every`` seconds and at shutdown.

Writes never fail a parse:

- A full queue (the database slower than the traffic) drops the new rows and counts them, with
  one warning until it drains.
- A store that cannot be written (a full disk, a lost or locked database) is one warning; the
  writer keeps the batch it holds and tries again every ``retry_every`` seconds while the queue
  fills (and then drops and counts), and says how many rows were dropped when it writes again or
  stops.
- Rows the database refuses (a value it cannot hold) are dropped and counted, one warning.

:meth:`MessageLog.close` (the app's shutdown) writes what is queued before it returns. The
uuid made at parse time keys the row, so a batch written again after an error is stored once.
"""

from __future__ import annotations

import contextlib
import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from nlu_engine.contract.errors import NLUError
from nlu_engine.server.redaction import Redactor

logger = logging.getLogger("nlu_engine.server")

#: a parse waiting for the writer: id, time, endpoint, model id, model file, sender, message id, result
Item = tuple[str, float, str, str | None, str | None, str | None, str | None, dict[str, Any]]
IDENTIFIER_CHARS = 255


class StoreUnavailable(Exception):
    """The database cannot be written now (lost, full, locked, read-only): try again later."""


class RowsRefused(Exception):
    """The database refused these rows themselves (a value it cannot hold): drop them."""


class Store(Protocol):
    """What the writer needs of a store: ``insert`` rows (dicts of the log's columns; a row whose
    id is stored already is skipped), ``prune`` to the retention, and ``close``. ``insert`` and
    ``prune`` raise :class:`StoreUnavailable` or :class:`RowsRefused`."""

    description: str

    def insert(self, rows: list[dict[str, Any]]) -> None: ...

    def prune(self, retention_days: float | None, max_rows: int | None) -> int: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LogSettings:
    """The ``--log-*`` options; a plain dict of them travels to the worker processes."""

    target: str
    redact: tuple[str, ...] = ()
    retention_days: float | None = None
    max_rows: int | None = None
    queue_size: int = 10_000
    batch_rows: int = 500
    prune_every: float = 60.0
    retry_every: float = 2.0
    linger: float = 0.05

    def __post_init__(self) -> None:
        if not self.target:
            raise NLUError("--log-messages needs a database file or a postgresql:// URL")
        days = self.retention_days
        if days is not None and not (days > 0 and math.isfinite(days)):
            raise NLUError("--log-retention-days must be a positive number of days")
        if self.max_rows is not None and self.max_rows < 1:
            raise NLUError("--log-max-rows must be at least 1")
        if self.queue_size < 1 or self.batch_rows < 1 or self.prune_every <= 0 or self.retry_every <= 0 \
                or not 0 <= self.linger <= 1:
            raise NLUError("the message log's queue, batch and periods must be positive")
        Redactor.from_rules(self.redact)  # a bad pattern is a one-line error here, at startup

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "redact": list(self.redact)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> LogSettings:
        return cls(**{**values, "redact": tuple(values.get("redact") or ())})


def identifier(value: Any) -> str | None:
    """A request's ``sender_id`` / ``message_id`` as stored: a string or number, else None."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return str(value)[:IDENTIFIER_CHARS]


def clean(value: Any) -> Any:
    """A JSON value whose strings every database takes: NUL and lone surrogates (from JSON's
    ``\\ud800`` escapes) become U+FFFD."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\ufffd")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {clean(str(key)): clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [clean(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) else None


def out_of_scope_score(result: dict[str, Any]) -> float | None:
    """The parse result's out-of-scope score, when it carries one (``out_of_scope`` or
    ``out_of_scope_score``, at the top or in ``intent``); None otherwise."""
    intent = result.get("intent")
    for where in (result, intent if isinstance(intent, dict) else {}):
        for key in ("out_of_scope_score", "out_of_scope"):
            score = number(where.get(key))
            if score is not None:
                return score
    return None


def to_row(item: Item, redactor: Redactor, worker: str | None) -> dict[str, Any]:
    """The stored row of a queued parse: redacted, cleaned, the columns pulled out."""
    row_id, parsed_at, endpoint, model_id, model_file, sender_id, message_id, result = item
    result = clean(redactor.redact(result) if redactor else result)
    intent = result.get("intent") if isinstance(result.get("intent"), dict) else {}
    name = intent.get("name")
    return {
        "id": row_id,
        "parsed_at": parsed_at,
        "endpoint": endpoint,
        "worker": worker,
        "model_id": model_id,
        "model_file": model_file,
        "sender_id": sender_id,
        "message_id": message_id,
        "text": result.get("text") if isinstance(result.get("text"), str) else "",
        "intent": name[:IDENTIFIER_CHARS] if isinstance(name, str) else None,
        "confidence": number(intent.get("confidence")),
        "out_of_scope": out_of_scope_score(result),
        "intent_ranking": result.get("intent_ranking"),
        "entities": result.get("entities"),
        "parse_result": result,
    }


class MessageLog:
    """The queue and writer thread of one worker process (see the module's docstring)."""

    def __init__(
        self, settings: LogSettings, open_store: Callable[[str], Store], worker: str | None = None
    ) -> None:
        self.settings = settings
        self.redactor = Redactor.from_rules(settings.redact)
        self.worker = worker
        self._open_store = open_store
        self.store: Store | None = None
        self.queue: queue.Queue[Item | None] = queue.Queue(maxsize=settings.queue_size)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # counters: each is written by one thread only (overflowed by the event loop)
        self.written = 0
        self.pruned = 0
        self.overflowed = 0
        self.lost = 0
        self.available = True
        self.error: str | None = None
        self._overflow_warned = False
        self._refused_warned = False
        self._dropped_at_write = 0  # rows dropped up to the last successful write
        self._retry_at = 0.0

    @property
    def dropped(self) -> int:
        return self.overflowed + self.lost

    def start(self) -> None:
        """Open the store and start the writer thread."""
        if self._thread is not None:
            return
        self.store = self._open_store(self.settings.target)
        self._thread = threading.Thread(target=self._run, name="nlu-message-log", daemon=True)
        self._thread.start()

    def record(self, endpoint: str, results: list[dict[str, Any]], model: Any = None,
               sender_id: str | None = None, message_id: str | None = None) -> None:
        """Queue parse ``results`` for the writer, never waiting (on the event loop)."""
        now = time.time()
        model_id = getattr(model, "model_id", None)
        path = getattr(model, "path", None)
        model_file = getattr(path, "name", None)
        for result in results:
            try:
                self.queue.put_nowait(
                    (uuid.uuid4().hex, now, endpoint, model_id, model_file, sender_id, message_id, result))
            except queue.Full:
                self.overflowed += 1
                if not self._overflow_warned:
                    self._overflow_warned = True
                    logger.warning("message log: the queue of %d rows is full (%s cannot keep up); "
                                   "new rows are dropped and counted until it drains",
                                   self.settings.queue_size, self._where())
                continue
            if self._overflow_warned and self.queue.qsize() < self.settings.queue_size // 2:
                self._overflow_warned = False

    def status(self) -> dict[str, Any]:
        """What ``/status`` shows of this worker's log."""
        return {
            "enabled": True,
            "database": self._where(),
            "rows_written": self.written,
            "rows_dropped": self.dropped,
            "rows_queued": self.queue.qsize(),
            "rows_pruned": self.pruned,
            "writing": self.available,
            "error": self.error,
        }

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued (within ``timeout`` seconds), then stop the writer and close the store."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait(None)  # wakes the writer at once
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("message log: %d rows were still queued after %.0f s; they are dropped",
                           self.queue.qsize(), timeout)
        elif self.store is not None:
            self.store.close()

    def _where(self) -> str:
        return self.store.description if self.store is not None else self.settings.target

    # --- the writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        pending: list[dict[str, Any]] = []
        next_prune = 0.0
        while True:
            stopping = self._stop.is_set()
            if self.available or stopping:
                self._fill(pending, block=not stopping)
            elif self._stop.wait(max(0.0, self._retry_at - time.monotonic())):
                continue  # stopping: one last try, below, on the next round
            else:
                self._fill(pending, block=False)
            if pending:
                self._write(pending)
            if self.available and time.monotonic() >= next_prune:
                self._prune()
                next_prune = time.monotonic() + self.settings.prune_every
            if stopping and (not self.available or (not pending and self.queue.empty())):
                break
        self._finish(pending)

    def _fill(self, pending: list[dict[str, Any]], block: bool) -> None:
        """Take queued parses into ``pending`` as rows, up to a batch. With ``block``, wait a
        little for the first one, then ``linger`` seconds for more to join it: one wake-up and
        one transaction for a run of parses, instead of one each."""
        deadline = None
        while len(pending) < self.settings.batch_rows:
            try:
                if not block:
                    item = self.queue.get_nowait()
                elif deadline is None:
                    item = self.queue.get(timeout=0.25)
                else:
                    item = self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if item is None or self._stop.is_set():  # close(): no more waiting
                block = False
            if deadline is None:
                deadline = time.monotonic() + self.settings.linger
            if item is None:
                continue
            try:
                pending.append(to_row(item, self.redactor, self.worker))
            except Exception:  # a bug in building the row: drop it, parsing goes on
                self.lost += 1
                logger.exception("message log: a row could not be built; dropped")

    def _write(self, pending: list[dict[str, Any]]) -> None:
        assert self.store is not None
        try:
            self.store.insert(pending)
        except StoreUnavailable as error:
            self._down(str(error))
            return
        except RowsRefused:
            self._insert_one_by_one(pending)
        else:
            self.written += len(pending)
        pending.clear()
        if not self.available:
            self._up()
        self._dropped_at_write = self.dropped

    def _insert_one_by_one(self, rows: list[dict[str, Any]]) -> None:
        """After a refused batch: store the rows the database takes, drop and count the others."""
        assert self.store is not None
        for row in rows:
            try:
                self.store.insert([row])
                self.written += 1
            except (StoreUnavailable, RowsRefused) as error:
                self.lost += 1
                if not self._refused_warned:
                    self._refused_warned = True
                    logger.warning("message log: %s refused a row (%s); such rows are dropped and "
                                   "counted in /status", self._where(), error)

    def _down(self, reason: str) -> None:
        self._retry_at = time.monotonic() + self.settings.retry_every
        self.error = reason
        if self.available:
            self.available = False
            logger.warning("message log: cannot write to %s (%s); parsing goes on, and the log "
                           "tries again every %g s, dropping and counting the rows the queue of %d "
                           "cannot hold", self._where(), reason, self.settings.retry_every,
                           self.settings.queue_size)

    def _up(self) -> None:
        self.available = True
        self.error = None
        logger.warning("message log: writing to %s again; %d rows were dropped while it could not",
                       self._where(), self.dropped - self._dropped_at_write)

    def _prune(self) -> None:
        settings = self.settings
        if settings.retention_days is None and settings.max_rows is None:
            return
        assert self.store is not None
        try:
            self.pruned += self.store.prune(settings.retention_days, settings.max_rows)
        except StoreUnavailable as error:
            self._down(str(error))

    def _finish(self, pending: list[dict[str, Any]]) -> None:
        """At shutdown: prune a last time, or count what could not be written."""
        if self.available and not pending:
            self._prune()
        left = len(pending) + sum(1 for item in self._drain() if item is not None)
        if left or not self.available:
            self.lost += left
            logger.warning("message log: %s could not be written at shutdown (%s); %d rows were "
                           "dropped while it could not", self._where(), self.error,
                           self.dropped - self._dropped_at_write)

    def _drain(self) -> list[Item | None]:
        items: list[Item | None] = []
        while True:
            try:
                items.append(self.queue.get_nowait())
            except queue.Empty:
                return items
