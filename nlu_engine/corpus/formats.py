"""Corpus files: which format, how a file is cut into chunks, and the records a chunk holds.

Formats (from the extension, or ``--input-format``):

- ``text``: one message a line;
- ``jsonl``: one JSON object a line, the message in a ``text`` field, other fields carried through;
- ``csv``: a header row with a ``text`` column, other columns carried through (as strings);
- ``parquet``: a string ``text`` column (needs pyarrow), other columns carried through.

A file is planned as :class:`Chunk` s, runs of consecutive rows that can be read anywhere, in any
order: byte ranges cut at record ends for the line formats (a CSV record ends at a newline outside
quotes), row groups for Parquet. Planning reads the file once (or Parquet's metadata) and so also
counts the rows. Reading a chunk yields :class:`Record` s; a row that cannot be parsed (an empty
line, a line that is not UTF-8 or not JSON, no text, a message over the length limit) is still a
record, with an ``error``, so the output keeps one row per input row.
"""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import json
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nlu_engine.contract.errors import DataError, NLUError

FORMATS = ("text", "jsonl", "csv", "parquet")
EXTENSIONS = {
    ".txt": "text", ".text": "text", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv",
    ".parquet": "parquet", ".pq": "parquet",
}
#: rows per chunk of a line format, by default
CHUNK_ROWS = 1024
BOM = b"\xef\xbb\xbf"
PYARROW_MISSING = "needs pyarrow: pip install 'nlu-engine[distributed]' (or pip install pyarrow)"


def format_of(path: str | Path, given: str | None, allowed: tuple[str, ...], flag: str) -> str:
    """The format ``given`` (``--input-format``), or the one the extension names."""
    if given:
        if given not in allowed:
            raise NLUError(f"{flag} must be one of {', '.join(allowed)}, not '{given}'")
        return given
    suffix = Path(path).suffix.lower()
    found = EXTENSIONS.get(suffix)
    if found is None or found not in allowed:
        raise NLUError(f"{path}: cannot tell the format from the extension '{suffix}'; "
                       f"pass {flag} {'|'.join(allowed)}")
    return found


def require_pyarrow(what: str) -> Any:
    """``pyarrow.parquet``, or a one-line error naming the extra to install."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise NLUError(f"{what} {PYARROW_MISSING}") from None
    return pq


@dataclass(frozen=True)
class Chunk:
    """Rows ``first_row .. first_row + rows - 1`` (0-based) of a corpus file.

    Line formats: bytes ``start .. end`` of the file, starting at physical line ``first_line``.
    Parquet: row group ``start``.
    """

    path: str
    format: str
    index: int
    first_row: int
    rows: int
    start: int
    end: int = 0
    first_line: int = 1
    text_field: str = "text"
    #: the CSV header's column names
    columns: tuple[str, ...] = field(default=())

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Chunk:
        values = json.loads(text)
        values["columns"] = tuple(values["columns"])
        return cls(**values)


@dataclass
class Record:
    """One input row: where it is (``line 7``, ``row 7``), its text (None when there is none),
    the fields carried through (JSON values), and why it cannot be parsed (None when it can)."""

    where: str
    text: str | None
    fields: dict[str, Any]
    error: str | None = None

    def to_list(self) -> list[Any]:
        return [self.where, self.text, self.fields, self.error]

    @classmethod
    def from_list(cls, values: list[Any]) -> Record:
        return cls(*values)


# --- planning ----------------------------------------------------------------------------------
def plan_chunks(path: str | Path, fmt: str, text_field: str = "text",
                chunk_rows: int = CHUNK_ROWS) -> list[Chunk]:
    """Cut the file into chunks (see the module docstring); a missing or unreadable file, or a
    CSV / Parquet file without the text column, is a one-line error."""
    path = Path(path)
    if not path.is_file():
        raise NLUError(f"{path}: no such file")
    if chunk_rows < 1:
        raise ValueError("chunk_rows must be at least 1")
    if fmt == "parquet":
        return _plan_parquet(path, text_field)
    with path.open("rb") as stream:
        columns: tuple[str, ...] = ()
        offset = line = 0
        if fmt == "csv":
            header, offset, line = _header(stream, path)
            columns = _columns(header, path, text_field)
        elif stream.read(len(BOM)) == BOM:  # not a row's bytes: a file of a BOM alone has no rows
            offset = len(BOM)
        return list(_plan_lines(stream, path, fmt, text_field, columns, offset, line, chunk_rows))


def _records_spans(stream: Any, csv_quotes: bool) -> Iterator[tuple[int, int]]:
    """(bytes, physical lines) of each record from the stream's position: a line, or for CSV
    the lines up to one that leaves no quote open (quotes escape by doubling, so parity tells)."""
    size = lines = 0
    open_quotes = False
    for raw in stream:
        size += len(raw)
        lines += 1
        if csv_quotes:
            open_quotes ^= raw.count(b'"') % 2 == 1
            if open_quotes:
                continue
        yield size, lines
        size = lines = 0
    if size:
        yield size, lines


def _header(stream: Any, path: Path) -> tuple[str, int, int]:
    """The CSV header record's text, and the byte offset and line count after it."""
    for size, lines in _records_spans(stream, csv_quotes=True):
        stream.seek(0)
        raw = stream.read(size).removeprefix(BOM)
        try:
            return raw.decode("utf-8"), size, lines
        except UnicodeDecodeError:
            raise DataError(f"{path}: the CSV header is not valid UTF-8") from None
    raise DataError(f"{path}: the file is empty; a CSV needs a header row with a 'text' column")


def _columns(header: str, path: Path, text_field: str) -> tuple[str, ...]:
    rows = list(csv.reader(io.StringIO(header, newline="")))
    columns = tuple(rows[0]) if rows else ()
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise DataError(f"{path}: the CSV header names {', '.join(duplicates)} more than once")
    if text_field not in columns:
        raise DataError(f"{path}: no '{text_field}' column in the CSV header (columns: "
                        f"{', '.join(columns)[:200]}); name the message column '{text_field}' "
                        "or pass --text-field")
    return columns


def _plan_lines(stream: Any, path: Path, fmt: str, text_field: str, columns: tuple[str, ...],
                offset: int, line: int, chunk_rows: int) -> Iterator[Chunk]:
    stream.seek(offset)
    start, first_line, rows, row = offset, line + 1, 0, 0
    index = 0
    for size, lines in _records_spans(stream, csv_quotes=fmt == "csv"):
        offset += size
        line += lines
        rows += 1
        if rows == chunk_rows:
            yield Chunk(str(path), fmt, index, row, rows, start, offset, first_line, text_field, columns)
            index, row = index + 1, row + rows
            start, first_line, rows = offset, line + 1, 0
    if rows:
        yield Chunk(str(path), fmt, index, row, rows, start, offset, first_line, text_field, columns)


def _plan_parquet(path: Path, text_field: str) -> list[Chunk]:
    pq = require_pyarrow("Parquet input")
    import pyarrow as pa

    try:
        metadata = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as error:
        raise DataError(f"{path}: not a readable Parquet file ({error})") from None
    schema = metadata.schema_arrow
    if text_field not in schema.names:
        raise DataError(f"{path}: no '{text_field}' column (columns: {', '.join(schema.names)[:200]}); "
                        f"name the message column '{text_field}' or pass --text-field")
    kind = schema.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DataError(f"{path}: column '{text_field}' holds {kind}, not strings")
    chunks, row = [], 0
    for group in range(metadata.num_row_groups):
        rows = metadata.metadata.row_group(group).num_rows
        if rows:
            chunks.append(Chunk(str(path), "parquet", len(chunks), row, rows, group,
                                text_field=text_field))
            row += rows
    return chunks


# --- reading -----------------------------------------------------------------------------------
def read_chunk(chunk: Chunk, max_chars: int) -> list[Record]:
    """The chunk's records, exactly ``chunk.rows`` of them, in file order."""
    if chunk.format == "parquet":
        records = _read_parquet(chunk, max_chars)
    else:
        with open(chunk.path, "rb") as stream:
            stream.seek(chunk.start)
            data = stream.read(chunk.end - chunk.start)
        if chunk.start == 0:
            data = data.removeprefix(BOM)
        records = _read_lines(chunk, data, max_chars)
    if len(records) != chunk.rows:  # the file changed since it was planned
        raise DataError(f"{chunk.path}: changed while it was read ({len(records)} rows where "
                        f"{chunk.rows} were counted); run again on a file that stays put")
    return records


def _read_lines(chunk: Chunk, data: bytes, max_chars: int) -> list[Record]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if chunk.format == "csv":
        return _read_csv(chunk, lines, max_chars)
    records = []
    for number, raw in enumerate(lines, start=chunk.first_line):
        where = f"line {number}"
        try:
            text = raw.removesuffix(b"\r").decode("utf-8")
        except UnicodeDecodeError:
            records.append(Record(where, raw.decode("utf-8", "replace").rstrip("\r"), {},
                                  f"{where}: not valid UTF-8"))
            continue
        if chunk.format == "text":
            records.append(Record(where, text, {}, text_error(text, where, max_chars)))
        else:
            records.append(_json_record(text, where, chunk.text_field, max_chars))
    return records


def _json_record(line: str, where: str, text_field: str, max_chars: int) -> Record:
    if not line.strip():
        return Record(where, None, {}, f"{where}: empty line")
    try:
        value = json.loads(line, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        return Record(where, None, {}, f"{where}: not valid JSON ({error.msg} at column {error.colno})")
    if not isinstance(value, dict):
        return Record(where, None, {}, f"{where}: not a JSON object")
    text = value.pop(text_field, None)
    if text is None:
        return Record(where, None, value, f"{where}: no '{text_field}' field")
    if not isinstance(text, str):
        return Record(where, None, {**value, text_field: text}, f"{where}: '{text_field}' is not a string")
    return Record(where, text, value, text_error(text, where, max_chars))


def _no_constant(name: str) -> None:
    """NaN and Infinity, which JSON does not have, read as null."""
    return None


def _read_csv(chunk: Chunk, lines: list[bytes], max_chars: int) -> list[Record]:
    """One record per CSV record; its lines are grouped as planning grouped them."""
    records = []
    number = chunk.first_line
    pending: list[bytes] = []
    open_quotes = False
    for raw in lines:
        pending.append(raw)
        open_quotes ^= raw.count(b'"') % 2 == 1
        if open_quotes:
            continue
        records.append(_csv_record(b"\n".join(pending), f"line {number}", chunk, max_chars))
        number += len(pending)
        pending = []
    if pending:
        records.append(_csv_record(b"\n".join(pending), f"line {number}", chunk, max_chars))
    return records


def _csv_record(raw: bytes, where: str, chunk: Chunk, max_chars: int) -> Record:
    text = raw.decode("utf-8", "surrogateescape")
    if not text.strip():
        return Record(where, None, {}, f"{where}: empty line")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as error:
        return Record(where, None, {}, f"{where}: not a CSV record ({error})")
    values = rows[0] if len(rows) == 1 else [] if not rows else None
    if values is None:
        return Record(where, None, {}, f"{where}: not one CSV record")
    fields = {name: _unescape(value) for name, value in zip(chunk.columns, values, strict=False)}
    message = fields.pop(chunk.text_field, None)
    if len(values) != len(chunk.columns):
        if message is not None:
            fields[chunk.text_field] = message
        return Record(where, None, fields, f"{where}: {len(values)} values where the header has "
                                    f"{len(chunk.columns)} columns")
    if message is None or not message.strip():
        return Record(where, message, fields, f"{where}: no text")
    if message != values[chunk.columns.index(chunk.text_field)]:  # surrogates were replaced
        return Record(where, message, fields, f"{where}: not valid UTF-8")
    return Record(where, message, fields, text_error(message, where, max_chars))


def _unescape(value: str) -> str:
    """A CSV value decoded with surrogateescape, with bytes that are not UTF-8 as U+FFFD."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _read_parquet(chunk: Chunk, max_chars: int) -> list[Record]:
    pq = require_pyarrow("Parquet input")
    table = pq.ParquetFile(chunk.path).read_row_group(chunk.start)
    names = [name for name in table.column_names if name != chunk.text_field]
    texts = table.column(chunk.text_field).to_pylist()
    others = {name: table.column(name).to_pylist() for name in names}
    records = []
    for i, text in enumerate(texts):
        where = f"row {chunk.first_row + i + 1}"
        fields = {name: jsonable(others[name][i]) for name in names}
        if text is None:
            records.append(Record(where, None, fields, f"{where}: no text"))
        else:
            records.append(Record(where, text, fields, text_error(text, where, max_chars)))
    return records


def text_error(text: str, where: str, max_chars: int) -> str | None:
    """Why a message cannot be parsed (empty, too long), or None."""
    if not text.strip():
        return f"{where}: empty message"
    if len(text) > max_chars:
        return (f"{where}: the message has {len(text)} characters; the limit is {max_chars} "
                "(--max-text-chars)")
    return None


def jsonable(value: Any) -> Any:
    """A Parquet value as a JSON value: dates and times as ISO strings, decimals as strings,
    bytes as base64, non-finite floats as None; lists and mappings element by element."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, decimal.Decimal | datetime.timedelta):
        return str(value)
    return str(value)
