"""Parse a corpus file with a model: in this process, or in ``--workers`` local processes.

The unit of work is a *group*: up to ``batch_size`` consecutive rows of one chunk, whose
messages are parsed as one ``Model.parse_batch``. The groups are the same whatever runs them
(this process, local processes, Ray actors in :mod:`nlu_engine.distributed.corpus`), and a
message's parse can depend on the batch it is in (padding changes the shapes of the sums), so
every way of running writes the same output, byte for byte, for the same ``--batch-size``.

A row that cannot be parsed gets an ``error`` and the job goes on, also when the model fails
on a message: the group is then parsed message by message and only the failing row carries the
error.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlu_engine.corpus.formats import Chunk, Record, plan_chunks, read_chunk
from nlu_engine.corpus.output import encode_row

logger = logging.getLogger(__name__)

#: rows a worker parses per call (as whole groups), so that hand-offs cost little
ROWS_PER_CALL = 1024

#: called after each group is written: (rows, rows with an error)
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class CorpusJob:
    """What to parse and how: the input (already planned into chunks) and the output's form."""

    chunks: list[Chunk]
    output_format: str
    batch_size: int = 64
    max_chars: int = 2_000

    @classmethod
    def plan(cls, path: str | Path, input_format: str, output_format: str, *, text_field: str = "text",
             batch_size: int = 64, max_chars: int = 2_000) -> CorpusJob:
        """Plan the input file (one pass over it; see :func:`plan_chunks`) in chunks of one
        call's worth of groups (a Parquet row group is one chunk whatever its size)."""
        chunk_rows = batch_size * max(1, ROWS_PER_CALL // batch_size)
        chunks = plan_chunks(path, input_format, text_field, chunk_rows)
        return cls(chunks, output_format, batch_size, max_chars)

    @property
    def rows(self) -> int:
        return sum(chunk.rows for chunk in self.chunks)

    @property
    def groups_per_call(self) -> int:
        return max(1, ROWS_PER_CALL // self.batch_size)


@dataclass(frozen=True)
class GroupOutput:
    """A parsed group: its encoded output rows joined by newlines, and how many rows and errors."""

    lines: str
    rows: int
    errors: int


def chunk_groups(chunk: Chunk, batch_size: int, max_chars: int) -> Iterator[list[Record]]:
    """The chunk's records in groups of ``batch_size`` (the last one may be shorter)."""
    records = read_chunk(chunk, max_chars)
    for start in range(0, len(records), batch_size):
        yield records[start : start + batch_size]


def parse_group(model: Any, records: list[Record], output_format: str) -> GroupOutput:
    """Parse the group's parseable messages as one batch and encode every row."""
    todo = [record for record in records if record.error is None]
    outcomes = iter(_parse_texts(model, todo))
    lines, errors = [], 0
    for record in records:
        result, error = (None, record.error) if record.error is not None else next(outcomes)
        errors += error is not None
        lines.append(encode_row(output_format, record, result, error))
    return GroupOutput("\n".join(lines), len(records), errors)


def _parse_texts(model: Any, records: list[Record]) -> list[tuple[dict[str, Any] | None, str | None]]:
    """(parse, None) per record; when the batch fails, message by message, (None, error) for
    the messages the model fails on."""
    texts = [str(record.text) for record in records]
    if not texts:
        return []
    try:
        return [(result, None) for result in model.parse_batch(texts, batch_size=len(texts))]
    except Exception:  # one bad message must not stop the job: find it
        logger.debug("a batch failed; parsing its messages one by one", exc_info=True)
    outcomes: list[tuple[dict[str, Any] | None, str | None]] = []
    for record, text in zip(records, texts, strict=True):
        try:
            outcomes.append((model.parse_batch([text], batch_size=1)[0], None))
        except Exception as error:
            outcomes.append((None, f"{record.where}: the model failed on this message "
                                   f"({type(error).__name__}: {error})"))
    return outcomes


def job_groups(job: CorpusJob) -> Iterator[list[Record]]:
    for chunk in job.chunks:
        yield from chunk_groups(chunk, job.batch_size, job.max_chars)


def parse_in_process(model: Any, job: CorpusJob) -> Iterator[GroupOutput]:
    """Every group of the job, parsed here, in input order."""
    for records in job_groups(job):
        yield parse_group(model, records, job.output_format)


# --- local processes (--workers N without Ray) -------------------------------------------------
_worker_model: Any = None


def _load_worker_model(archive: str, allow_components: list[str]) -> Any:
    global _worker_model
    if _worker_model is None:
        from nlu_engine.assembly.model import Model

        _worker_model = Model.load(archive, allow_components)
    return _worker_model


def _parse_bundle(archive: str, allow_components: list[str], output_format: str,
                  bundle: list[list[list[Any]]]) -> list[GroupOutput]:
    """In a worker process: parse a few groups with the process's model (loaded once)."""
    model = _load_worker_model(archive, allow_components)
    return [parse_group(model, [Record.from_list(r) for r in group], output_format) for group in bundle]


def bundles(groups: Iterable[list[Record]], size: int) -> Iterator[list[list[list[Any]]]]:
    """Consecutive groups, ``size`` at a time, as plain lists for another process."""
    bundle: list[list[list[Any]]] = []
    for group in groups:
        bundle.append([record.to_list() for record in group])
        if len(bundle) == size:
            yield bundle
            bundle = []
    if bundle:
        yield bundle


def parse_with_processes(archive: Path, allow_components: Iterable[str], job: CorpusJob,
                         workers: int) -> Iterator[GroupOutput]:
    """Every group of the job, parsed by ``workers`` local processes that each load the model
    once, in input order. This process reads the input and keeps at most two calls per worker
    in flight, so memory stays bounded whatever the input's size."""
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    allowed = sorted(allow_components)
    context = multiprocessing.get_context("spawn")  # no fork of a process with threads
    executor = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    pending: deque[Future[list[GroupOutput]]] = deque()
    try:
        for bundle in bundles(job_groups(job), job.groups_per_call):
            pending.append(executor.submit(_parse_bundle, str(archive), allowed, job.output_format, bundle))
            if len(pending) >= 2 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


# --- running a job -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CorpusStats:
    rows: int
    errors: int
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def write_outputs(outputs: Iterable[GroupOutput], writer: Any,
                  progress: Progress | None = None) -> CorpusStats:
    """Write the parsed groups in order; the rows, errors and seconds it took."""
    start = time.perf_counter()
    rows = errors = 0
    for output in outputs:
        writer.write(output.lines, output.rows)
        rows += output.rows
        errors += output.errors
        if progress is not None:
            progress(output.rows, output.errors)
    return CorpusStats(rows, errors, time.perf_counter() - start)


def archive_path(model: str | Path, allow_components: Iterable[str] = ()) -> Path:
    """The archive ``-m`` names (a folder: its newest), checked (members and manifest, without
    importing the pipeline's libraries) before any worker loads it."""
    from nlu_engine.assembly.persistence import extract_archive, newest_archive
    from nlu_engine.assembly.registry import allowed_components

    path = Path(model)
    if path.is_dir():
        path = newest_archive(path)
    elif not path.is_file():
        from nlu_engine.contract.errors import NLUError

        raise NLUError(f"model '{model}' not found: give an archive (.tar.gz) or a folder of archives")
    with tempfile.TemporaryDirectory(prefix="nlu-check-") as tmp:
        extract_archive(path, Path(tmp), allowed_components(list(allow_components)))
    return path.resolve()
