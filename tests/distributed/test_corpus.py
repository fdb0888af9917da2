"""Corpus parsing on a local Ray: the same bytes as in this process, and no row lost or written
twice when an actor's process is killed mid-job."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.model import Model
from nlu_engine.corpus.output import CorpusWriter
from nlu_engine.corpus.parsing import CorpusJob, parse_in_process, write_outputs
from tests.corpus.conftest import corpus_texts
from tests.extras import requires_extra


def mixed_jsonl(path: Path, repeat: int) -> Path:
    """Good rows with an id, and every few rows one that cannot be parsed."""
    lines = []
    for i, text in enumerate(corpus_texts(repeat)):
        lines.append(json.dumps({"id": i, "text": text, "intent": "gold"}))
        if i % 97 == 0:
            lines.extend(["", "{broken", json.dumps({"id": i, "text": ""})])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write(outputs: Any, out: Path, progress: Any = None) -> Any:
    with CorpusWriter(out, "jsonl") as writer:
        return write_outputs(outputs, writer, progress)


def in_process(archive: Path, job: CorpusJob, out: Path) -> bytes:
    write(parse_in_process(Model.load(archive), job), out)
    return out.read_bytes()


def actor_processes() -> list[int]:
    """This test's own Ray actors that parse (the local Ray runs under this process)."""
    children: dict[int, list[int]] = {}
    titles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            titles[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        parent = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
        children.setdefault(parent, []).append(int(entry.name))
    mine, todo = set(), [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            mine.add(child)
            todo.append(child)
    return sorted(pid for pid in mine if "GroupParser" in titles.get(pid, ""))


@requires_extra("distributed")
def test_a_killed_actor_loses_no_row(ray_local: Any, logreg_archive: Path, tmp_path: Path) -> None:
    """The in-process bytes, error rows included, though an actor was SIGKILLed mid-job."""
    from nlu_engine.distributed.corpus import parse_on_ray

    job = CorpusJob.plan(mixed_jsonl(tmp_path / "in.jsonl", 1200), "jsonl", "jsonl", batch_size=16)
    assert len(job.chunks) == 7
    expected = in_process(logreg_archive, job, tmp_path / "local.jsonl")
    killed: list[int] = []
    written = [0]

    def kill_one_actor(rows: int, errors: int) -> None:
        written[0] += rows
        if not killed:  # the first group is written: the actors are busy with the next ones
            busy = actor_processes()
            assert len(busy) == 2, busy
            os.kill(busy[0], signal.SIGKILL)
            killed.append(written[0])

    outputs: Any = parse_on_ray(logreg_archive, [], job, actors=2)
    stats = write(outputs, tmp_path / "ray.jsonl", kill_one_actor)
    assert killed and killed[0] < job.rows / 4  # killed early in the job, not after it
    assert stats.rows == job.rows and stats.errors == 3 * 62
    assert (tmp_path / "ray.jsonl").read_bytes() == expected


@requires_extra("distributed")
def test_the_cli_runs_on_the_ray_it_finds(ray_local: Any, logreg_archive: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from nlu_engine.cli.main import main

    corpus = tmp_path / "in.txt"
    corpus.write_text("\n".join(corpus_texts(40)) + "\n\n", encoding="utf-8")
    for name, extra in (("ray.jsonl", ["--ray", "--workers", "1"]), ("local.jsonl", [])):
        code = main(["parse", "-m", str(logreg_archive), "--input", str(corpus),
                     "--output", str(tmp_path / name), *extra])
        assert code == 0
    assert "parsed 201 rows (1 with an error)" in capsys.readouterr().err
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    assert ray_local.is_initialized()  # a Ray the caller started is left running


def test_groups_out_of_plan_are_refused() -> None:
    from nlu_engine.distributed.corpus import _check_next

    expected = iter([(0, 0), (0, 1), (1, 0)])
    _check_next(expected, (0, 0))
    with pytest.raises(RuntimeError, match="chunk 0, group 0 where chunk 0, group 1 was due"):
        _check_next(expected, (0, 0))


@pytest.mark.slow
@requires_extra("distributed")
def test_a_model_the_actors_cannot_load_is_one_line(ray_local: Any, tmp_path: Path) -> None:
    from nlu_engine.contract.errors import NLUError
    from nlu_engine.distributed.corpus import parse_on_ray

    corpus = tmp_path / "in.txt"
    corpus.write_text("hi\n", encoding="utf-8")
    job = CorpusJob.plan(corpus, "text", "jsonl")
    with pytest.raises(NLUError, match=r"^the Ray job failed: model archive '.*gone.tar.gz' not found$"):
        list(parse_on_ray(tmp_path / "gone.tar.gz", [], job, actors=1))
