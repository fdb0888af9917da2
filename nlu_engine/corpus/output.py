"""Output rows of a corpus parse, and the file they go to (JSONL or Parquet), written atomically.

A JSONL output row is the input row's other fields, then the parse JSON (Rasa's, as
``nlu-engine parse`` prints it); a row that could not be parsed has ``text`` and ``error``
instead of the parse. An input field whose name the output uses (``intent``, ``entities``, ...,
see :data:`RESERVED`) is kept as ``input_<name>``.

A Parquet output has the carried fields as columns, then ``text``, ``intent`` (the name),
``intent_confidence``, ``parse`` (the whole parse JSON as a string) and ``error``. Rows are first
spilled to a temporary file as JSON; at the end each carried field gets one column type over
all rows (a field with strings and numbers mixed, lists or objects becomes a string column of
JSON), and the spill is converted.

The output goes to a temporary file next to OUT, renamed over OUT only when everything is
written: an interrupted or failed job leaves no partial OUT, and an existing OUT is replaced
only with ``--force``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from nlu_engine.contract.errors import NLUError
from nlu_engine.corpus.formats import Record, require_pyarrow

OUTPUT_FORMATS = ("jsonl", "parquet")
RESERVED = frozenset({"text", "intent", "intent_confidence", "entities", "intent_ranking",
                      "text_tokens", "response_selector", "parse", "error"})
PARQUET_ROW_GROUP = 65_536
INT64 = (-(2**63), 2**63 - 1)


def carried(fields: dict[str, Any], taken: frozenset[str] | set[str]) -> dict[str, Any]:
    """The input's other fields, in their order; one whose name the output uses is renamed
    ``input_<name>`` (``input_input_<name>`` if the input has that too, and so on)."""
    used = set(fields) | set(taken)
    kept: dict[str, Any] = {}
    for name, value in fields.items():
        key = name
        if key in taken:
            key = f"input_{name}"
            while key in used:
                key = f"input_{key}"
            used.add(key)
        kept[key] = value
    return kept


def encode_row(form: str, record: Record, result: dict[str, Any] | None, error: str | None) -> str:
    """One output row as a line: the JSONL row (``form`` jsonl), or the spill row that the
    Parquet writer converts (``form`` parquet)."""
    taken = RESERVED | set(result) if result is not None else RESERVED
    fields = carried(record.fields, taken)
    if form == "parquet":
        return json.dumps([fields, record.text, result, error], ensure_ascii=False)
    if result is not None:
        return json.dumps({**fields, **result}, ensure_ascii=False)
    return json.dumps({**fields, "text": record.text, "error": error}, ensure_ascii=False)


def check_output(path: str | Path, force: bool, input_path: str | Path | None = None) -> Path:
    """OUT may be written: its folder exists, it is not a folder, not the input, and it does not
    exist yet unless ``force``."""
    out = Path(path)
    if out.is_dir():
        raise NLUError(f"--output {out} is a folder; name a file (.jsonl or .parquet)")
    if not out.parent.is_dir():
        raise NLUError(f"--output {out}: the folder {out.parent} does not exist")
    if input_path is not None and out.exists() and out.resolve() == Path(input_path).resolve():
        raise NLUError(f"--output {out} is the input file; write to another file")
    if out.exists() and not force:
        raise NLUError(f"--output {out} exists; pass --force to replace it")
    return out


class CorpusWriter:
    """``with CorpusWriter(out, form) as writer: writer.write(lines)``: a temporary file next to
    ``out``, renamed over it when the block ends without an error and removed when it fails."""

    def __init__(self, path: str | Path, form: str) -> None:
        if form not in OUTPUT_FORMATS:
            raise ValueError(f"unknown output format {form!r}")
        if form == "parquet":
            require_pyarrow("Parquet output")
        self.path = Path(path)
        self.form = form
        self.rows = 0
        self._temp: Path | None = None
        self._stream: IO[str] | None = None

    def __enter__(self) -> CorpusWriter:
        handle, name = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp",
                                        dir=self.path.parent)
        self._temp = Path(name)
        # mkstemp makes the file private (0600); OUT gets the mode a plain open() would give it
        os.chmod(handle, 0o666 & ~_umask())
        self._stream = os.fdopen(handle, "w", encoding="utf-8", newline="\n")
        return self

    def write(self, lines: str, rows: int) -> None:
        """``rows`` encoded rows (:func:`encode_row`) joined by newlines."""
        assert self._stream is not None, "use CorpusWriter as a context manager"
        if rows:
            self._stream.write(lines + "\n")
            self.rows += rows

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        assert self._stream is not None and self._temp is not None
        converted: Path | None = None
        try:
            self._stream.close()
            if kind is None:
                if self.form == "parquet":
                    converted = self._temp.with_suffix(".parquet.tmp")
                    spill_to_parquet(self._temp, converted)
                    os.replace(converted, self.path)
                else:
                    os.replace(self._temp, self.path)
        finally:
            for leftover in (self._temp, converted):
                if leftover is not None:
                    with contextlib.suppress(FileNotFoundError):
                        leftover.unlink()


def _umask() -> int:
    """The process's umask (reading it means setting it: put it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# --- Parquet -------------------------------------------------------------------------------------
def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if INT64[0] <= value <= INT64[1] else "other"
    if isinstance(value, float):
        return "float"
    return "str" if isinstance(value, str) else "other"


def _column_type(kinds: set[str]) -> str:
    """One Arrow type for the values a field took: bool, int64, float64 (ints and floats),
    string; anything else a string of JSON."""
    kinds = kinds - {"null"}
    if kinds in ({"bool"}, {"int"}, {"str"}):
        return kinds.pop()
    if kinds and kinds <= {"int", "float"}:
        return "float"
    return "str" if not kinds else "json"


def _as_json_string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def spill_to_parquet(spill: Path, out: Path) -> None:
    """Convert the spilled rows (``[fields, text, result, error]`` per line) to a Parquet file."""
    require_pyarrow("Parquet output")
    import pyarrow as pa
    import pyarrow.parquet as pq

    kinds: dict[str, set[str]] = {}
    with spill.open(encoding="utf-8") as stream:
        for line in stream:
            for name, value in json.loads(line)[0].items():
                kinds.setdefault(name, set()).add(_kind(value))
    types = {name: _column_type(seen) for name, seen in kinds.items()}
    arrow = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string(),
             "json": pa.string()}
    schema = pa.schema(
        [pa.field(name, arrow[kind]) for name, kind in types.items()]
        + [pa.field("text", pa.string()), pa.field("intent", pa.string()),
           pa.field("intent_confidence", pa.float64()), pa.field("parse", pa.string()),
           pa.field("error", pa.string())]
    )
    with spill.open(encoding="utf-8") as stream, pq.ParquetWriter(out, schema) as writer:
        rows: list[list[Any]] = []
        for line in stream:
            rows.append(json.loads(line))
            if len(rows) == PARQUET_ROW_GROUP:
                writer.write_table(_table(rows, types, schema))
                rows = []
        if rows:
            writer.write_table(_table(rows, types, schema))


def _table(rows: list[list[Any]], types: dict[str, str], schema: Any) -> Any:
    import pyarrow as pa

    columns: dict[str, list[Any]] = {}
    for name, kind in types.items():
        values = [row[0].get(name) for row in rows]
        columns[name] = [_as_json_string(v) for v in values] if kind == "json" else values
    results = [row[2] for row in rows]
    intents = [(result or {}).get("intent") or {} for result in results]
    columns["text"] = [row[1] for row in rows]
    columns["intent"] = [intent.get("name") for intent in intents]
    columns["intent_confidence"] = [intent.get("confidence") for intent in intents]
    columns["parse"] = [None if r is None else json.dumps(r, ensure_ascii=False) for r in results]
    columns["error"] = [row[3] for row in rows]
    return pa.Table.from_pydict(columns, schema=schema)
