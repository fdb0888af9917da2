"""Output rows and files: carried fields, renamed clashes, atomic writes, Parquet column types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nlu_engine.contract.errors import NLUError
from nlu_engine.corpus.formats import Record
from nlu_engine.corpus.output import CorpusWriter, check_output, encode_row
from tests.extras import requires_extra

RESULT = {"text": "hi", "intent": {"name": "greet", "confidence": 0.9}, "entities": [],
          "intent_ranking": [{"name": "greet", "confidence": 0.9}], "text_tokens": [[0, 2]]}


def test_a_jsonl_row_is_the_carried_fields_then_the_parse() -> None:
    record = Record("line 1", "hi", {"id": 7, "intent": "gold", "input_intent": "x"})
    row = json.loads(encode_row("jsonl", record, RESULT, None))
    assert list(row) == ["id", "input_input_intent", "input_intent", *RESULT]
    assert row["input_input_intent"] == "gold" and row["input_intent"] == "x"
    assert {k: row[k] for k in RESULT} == RESULT


def test_a_row_that_was_not_parsed_has_text_and_error() -> None:
    record = Record("line 2", "", {"id": 8, "error": "theirs"}, "line 2: empty message")
    assert json.loads(encode_row("jsonl", record, None, record.error)) == {
        "id": 8, "input_error": "theirs", "text": "", "error": "line 2: empty message"}


def test_output_checks(tmp_path: Path) -> None:
    existing = tmp_path / "out.jsonl"
    existing.write_text("keep\n", encoding="utf-8")
    with pytest.raises(NLUError, match="exists; pass --force to replace it"):
        check_output(existing, force=False)
    assert check_output(existing, force=True) == existing
    with pytest.raises(NLUError, match="is a folder"):
        check_output(tmp_path, force=True)
    with pytest.raises(NLUError, match="does not exist"):
        check_output(tmp_path / "missing" / "out.jsonl", force=False)
    with pytest.raises(NLUError, match="is the input file"):
        check_output(existing, force=True, input_path=existing)


def test_a_failed_write_leaves_the_old_output_and_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError), CorpusWriter(out, "jsonl") as writer:
        writer.write('{"a": 1}', 1)
        raise RuntimeError("interrupted")
    assert out.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
    with CorpusWriter(out, "jsonl") as writer:
        writer.write('{"a": 1}\n{"a": 2}', 2)
    assert out.read_text(encoding="utf-8") == '{"a": 1}\n{"a": 2}\n'
    assert writer.rows == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


def test_the_output_gets_the_mode_of_a_plain_file(tmp_path: Path) -> None:
    """Not the temporary file's 0600: others may read OUT as they may read any file written here."""
    out = tmp_path / "out.jsonl"
    (tmp_path / "plain").write_text("", encoding="utf-8")
    with CorpusWriter(out, "jsonl") as writer:
        writer.write('{"a": 1}', 1)
    assert out.stat().st_mode & 0o777 == (tmp_path / "plain").stat().st_mode & 0o777


@requires_extra("distributed", "pyarrow")
def test_parquet_columns_get_one_type_per_field(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    rows = [
        (Record("row 1", "hi", {"n": 1, "x": 1, "s": "a", "mixed": 1, "obj": {"k": 1}, "none": None}),
         RESULT),
        (Record("row 2", "", {"n": 2.5, "x": None, "s": None, "mixed": "b", "obj": [1], "none": None},
                "row 2: empty message"), None),
    ]
    out = tmp_path / "out.parquet"
    with CorpusWriter(out, "parquet") as writer:
        writer.write("\n".join(encode_row("parquet", r, res, r.error) for r, res in rows), 2)
    table = pq.read_table(out)
    types = {field.name: str(field.type) for field in table.schema}
    assert types == {"n": "double", "x": "int64", "s": "string", "mixed": "string", "obj": "string",
                     "none": "string", "text": "string", "intent": "string", "intent_confidence": "double",
                     "parse": "string", "error": "string"}
    data = table.to_pydict()
    assert data["mixed"] == ["1", "b"] and data["obj"] == ['{"k": 1}', "[1]"]
    assert data["intent"] == ["greet", None] and data["intent_confidence"] == [0.9, None]
    assert json.loads(data["parse"][0]) == RESULT and data["parse"][1] is None
    assert data["error"] == [None, "row 2: empty message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet"]


@requires_extra("distributed", "pyarrow")
def test_an_empty_parquet_output_has_the_parse_columns(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "out.parquet"
    with CorpusWriter(out, "parquet"):
        pass
    table = pq.read_table(out)
    assert table.num_rows == 0 and table.column_names == ["text", "intent", "intent_confidence", "parse",
                                                          "error"]
