"""Parsing a corpus: groups, error rows, a model failing on one message, local worker processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.model import Model
from nlu_engine.contract.errors import NLUError
from nlu_engine.corpus.formats import Record
from nlu_engine.corpus.output import CorpusWriter
from nlu_engine.corpus.parsing import (
    CorpusJob,
    archive_path,
    parse_group,
    parse_in_process,
    parse_with_processes,
    write_outputs,
)
from tests.corpus.conftest import corpus_texts, read_jsonl


class RecordingModel:
    """Answers ``{"text", "batch"}``, records the batches it was given, fails on 'boom'."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def parse_batch(self, texts: list[str], batch_size: int = 256) -> list[dict[str, Any]]:
        self.batches.append(list(texts))
        if "boom" in texts:
            raise ValueError("cannot parse boom")
        return [{"text": t, "batch": len(texts)} for t in texts]


def test_a_group_is_one_batch_and_error_rows_stay_in_place() -> None:
    model = RecordingModel()
    records = [Record("line 1", "a", {}), Record("line 2", "", {}, "line 2: empty message"),
               Record("line 3", "b", {"id": 3})]
    output = parse_group(model, records, "jsonl")
    assert model.batches == [["a", "b"]]
    assert (output.rows, output.errors) == (3, 1)
    assert [json.loads(line) for line in output.lines.split("\n")] == [
        {"text": "a", "batch": 2}, {"text": "", "error": "line 2: empty message"},
        {"id": 3, "text": "b", "batch": 2}]


def test_a_message_the_model_fails_on_gets_an_error_and_the_rest_are_parsed() -> None:
    model = RecordingModel()
    records = [Record(f"line {i}", text, {}) for i, text in enumerate(["a", "boom", "c"], start=1)]
    rows = [json.loads(line) for line in parse_group(model, records, "jsonl").lines.split("\n")]
    assert rows[0] == {"text": "a", "batch": 1} and rows[2] == {"text": "c", "batch": 1}
    assert rows[1] == {"text": "boom", "error": "line 2: the model failed on this message "
                                                "(ValueError: cannot parse boom)"}


def write_corpus(path: Path, texts: list[str]) -> Path:
    path.write_text("\n".join(texts) + "\n\n", encoding="utf-8")  # and an empty line at the end
    return path


def run(outputs: Any, out: Path) -> Any:
    with CorpusWriter(out, "jsonl") as writer:
        return write_outputs(outputs, writer)


def test_in_process_output_is_the_models_parse_in_input_order(logreg_archive: Path, tmp_path: Path) -> None:
    texts = corpus_texts(30)
    corpus = write_corpus(tmp_path / "in.txt", texts)
    job = CorpusJob.plan(corpus, "text", "jsonl", batch_size=16)
    model = Model.load(logreg_archive)
    stats = run(parse_in_process(model, job), tmp_path / "out.jsonl")
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert (stats.rows, stats.errors) == (len(texts) + 1, 1)
    assert rows[:-1] == model.parse_batch(texts)
    assert rows[-1] == {"text": "", "error": f"line {len(texts) + 1}: empty message"}


def test_local_processes_write_the_same_bytes(logreg_archive: Path, tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "in.txt", corpus_texts(500))
    job = CorpusJob.plan(corpus, "text", "jsonl", batch_size=8)
    assert [chunk.rows for chunk in job.chunks] == [1024, 1024, 453]  # three calls to spread
    run(parse_in_process(Model.load(logreg_archive), job), tmp_path / "one.jsonl")
    stats = run(parse_with_processes(logreg_archive, [], job, workers=2), tmp_path / "two.jsonl")
    assert stats.rows == 2501
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()


def test_the_archive_is_checked_before_any_worker_loads_it(logreg_archive: Path, tmp_path: Path) -> None:
    assert archive_path(logreg_archive.parent) == logreg_archive.resolve()
    with pytest.raises(NLUError, match="not found"):
        archive_path(tmp_path / "missing.tar.gz")
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not an archive")
    with pytest.raises(NLUError):
        archive_path(bad)
