"""``nlu-engine parse --input IN --output OUT``, run as a user runs it (in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import assert_user_error, run
from tests.corpus.conftest import corpus_texts, read_jsonl
from tests.extras import requires_extra


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, logreg_archive: Path) -> Path:
    folder = tmp_path_factory.mktemp("corpus-cli")
    (folder / "in.txt").write_text("\n".join(corpus_texts(20)) + "\n", encoding="utf-8")
    return folder


def parse(workdir: Path, archive: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run("parse", "-m", str(archive), *args, cwd=workdir)


def test_a_text_file_parses_as_stdin_does(workdir: Path, logreg_archive: Path) -> None:
    result = parse(workdir, logreg_archive, "--input", "in.txt", "--output", "out.jsonl",
                   "--batch-size", "16")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().startswith("parsed 100 rows in ") and "wrote out.jsonl" in result.stderr
    lines = (workdir / "in.txt").read_text(encoding="utf-8")
    stdin = run("parse", "-m", str(logreg_archive), cwd=workdir, stdin=lines)
    assert read_jsonl(workdir / "out.jsonl") == [json.loads(line) for line in stdin.stdout.splitlines()]


def test_an_existing_output_needs_force(workdir: Path, logreg_archive: Path) -> None:
    out = workdir / "kept.jsonl"
    out.write_text("precious\n", encoding="utf-8")
    assert_user_error(parse(workdir, logreg_archive, "--input", "in.txt", "--output", "kept.jsonl"),
                      "--output kept.jsonl exists; pass --force")
    assert out.read_text(encoding="utf-8") == "precious\n"
    assert parse(workdir, logreg_archive, "--input", "in.txt", "--output", "kept.jsonl",
                 "--force").returncode == 0
    assert len(read_jsonl(out)) == 100


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--input", "in.txt"], "--input needs --output FILE"),
        (["--output", "x.jsonl"], "--output needs --input FILE"),
        (["--workers", "2"], "add --input IN --output OUT"),
        (["--input", "in.txt", "--output", "x.csv"], "cannot tell the format from the extension '.csv'"),
        (["--input", "in.txt", "--output", "x.jsonl", "--batch-size", "0"],
         "--batch-size must be at least 1"),
        (["--input", "missing.txt", "--output", "x.jsonl"], "missing.txt: no such file"),
        (["hello", "--input", "in.txt", "--output", "x.jsonl"], "not both"),
    ],
)
def test_flag_mistakes_are_one_line(workdir: Path, logreg_archive: Path, args: list[str],
                                    fragment: str) -> None:
    assert_user_error(parse(workdir, logreg_archive, *args), fragment)
    assert not (workdir / "x.jsonl").exists()


def without(module: str, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process where ``module`` cannot be imported (as when it is not installed)."""
    code = (f"import sys; sys.modules[{module!r}] = None; from nlu_engine.cli.main import main; "
            f"sys.exit(main({list(args)!r}))")
    return subprocess.run([sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True,
                          timeout=120)


def test_ray_not_installed(workdir: Path, logreg_archive: Path) -> None:
    result = without("ray", workdir, "parse", "-m", str(logreg_archive), "--input", "in.txt",
                     "--output", "ray.jsonl", "--ray")
    assert_user_error(result, "--ray needs Ray: pip install 'nlu-engine[distributed]'")
    assert not (workdir / "ray.jsonl").exists()


def test_parquet_without_pyarrow(workdir: Path, logreg_archive: Path) -> None:
    result = without("pyarrow", workdir, "parse", "-m", str(logreg_archive), "--input", "in.txt",
                     "--output", "out.parquet")
    assert_user_error(result, "Parquet output needs pyarrow: pip install 'nlu-engine[distributed]'")


@requires_extra("distributed", "pyarrow")
def test_csv_in_parquet_out(workdir: Path, logreg_archive: Path) -> None:
    import pyarrow.parquet as pq

    (workdir / "in.csv").write_text('id,text\n1,hi there\n2,""\n3,"book a table, for two"\n',
                                    encoding="utf-8")
    result = parse(workdir, logreg_archive, "--input", "in.csv", "--output", "out.parquet")
    assert result.returncode == 0, result.stderr
    assert "(1 with an error)" in result.stderr
    table = pq.read_table(workdir / "out.parquet").to_pydict()
    assert table["id"] == ["1", "2", "3"]
    assert table["text"] == ["hi there", "", "book a table, for two"]
    assert table["error"] == [None, "line 3: no text", None]
    assert table["intent"][0] == json.loads(table["parse"][0])["intent"]["name"]
