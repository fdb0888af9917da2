"""Property-based tests of the corpus-file readers (text, JSON lines, CSV; hypothesis).

Any bytes give one record per row, each a text or a one-line error naming its line, or a
one-line ``NLUError`` for the whole file (a CSV without the text column): never another exception.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nlu_engine.contract.errors import NLUError
from nlu_engine.corpus.formats import plan_chunks, read_chunk
from tests.reader_inputs import ALPHABET, assert_one_line

MAX_CHARS = 50
lines = st.text(alphabet=ALPHABET + "\r\"'", max_size=30)
raw_bytes = st.binary(max_size=300) | st.lists(lines, max_size=8).map(
    lambda rows: "\n".join(rows).encode("utf-8", "surrogatepass"))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpus-properties")


def read_all(folder: Path, content: bytes, fmt: str, chunk_rows: int) -> list:
    path = folder / f"corpus.{fmt}"
    path.write_bytes(content)
    try:
        chunks = plan_chunks(path, fmt, chunk_rows=chunk_rows)
    except NLUError as error:
        assert_one_line(error, str(path))
        return []
    records = [record for chunk in chunks for record in read_chunk(chunk, MAX_CHARS)]
    assert len(records) == sum(chunk.rows for chunk in chunks)
    for record in records:
        assert (record.text is None) <= (record.error is not None)
        if record.error is not None:
            assert "\n" not in record.error and record.error.startswith(f"{record.where}: ")
    return records


@given(raw_bytes, st.sampled_from(["text", "jsonl", "csv"]), st.integers(1, 4))
def test_any_bytes_give_a_record_per_row_or_one_line(folder: Path, content: bytes, fmt: str,
                                                     chunk_rows: int) -> None:
    read_all(folder, content, fmt, chunk_rows)


@given(st.lists(lines.map(str.strip).filter(bool), min_size=1, max_size=8), st.integers(1, 4))
def test_text_and_jsonl_rows_read_back_exactly(folder: Path, texts: list[str], chunk_rows: int) -> None:
    texts = [t for t in texts if len(t.splitlines()) <= 1 and "\n" not in t and "\r" not in t]
    jsonl = "".join(json.dumps({"text": t, "id": i}, ensure_ascii=False) + "\n" for i, t in enumerate(texts))
    got = read_all(folder, jsonl.encode(), "jsonl", chunk_rows)
    assert [(r.text, r.fields) for r in got] == [(t, {"id": i}) for i, t in enumerate(texts)]
    plain = read_all(folder, "".join(f"{t}\n" for t in texts).encode(), "text", chunk_rows)
    assert [r.text for r in plain] == texts


@given(st.lists(lines.filter(lambda t: t.strip()), min_size=1, max_size=8), st.integers(1, 4))
def test_csv_rows_read_back_exactly(folder: Path, texts: list[str], chunk_rows: int) -> None:
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(["id", "text"])
    writer.writerows([i, t] for i, t in enumerate(texts))
    got = read_all(folder, buffer.getvalue().encode("utf-8", "surrogatepass"), "csv", chunk_rows)
    assert [(r.text, r.fields) for r in got] == [(t, {"id": str(i)}) for i, t in enumerate(texts)]
