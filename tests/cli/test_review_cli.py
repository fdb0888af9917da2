"""``nlu-engine review``: its errors are one line; it serves the page; ``--help`` imports nothing
of the server; ``review compare`` names what a new model fixes and breaks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from nlu_engine.cli.main import main
from nlu_engine.server.process import LOOPBACK, free_port
from tests.extras import requires_extra
from tests.review.conftest import DATA, default_rows, make_log

pytestmark = requires_extra("server", "starlette", "uvicorn", "sqlalchemy")
LOGREG = {"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
                                         {"name": "LogisticRegressionClassifier"}]}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "nlu.yml").write_text(DATA, encoding="utf-8")
    make_log(tmp_path / "log.db", default_rows())
    return tmp_path


@pytest.mark.parametrize(("args", "message"), [
    (["review", "--data", "data"], "needs --db"),
    (["review", "--db", "log.db", "--data", "data", "--host", "0.0.0.0"], "give it a --token"),
    (["review", "--db", "data/nlu.yml", "--data", "data"], "is not an nlu-engine message log"),
    (["review", "--db", "missing.db", "--data", "data"], "holds no message log"),
    (["review", "--db", "log.db", "--data", "nowhere"], "--data nowhere does not exist"),
    (["review", "compare", "--old", "a", "--new", "b"], "needs --db"),
    (["review", "--db", "log.db", "--data", "data", "--regions", "-1"], "--regions must be 0"),
])
def test_bad_review_commands_are_one_line(folder: Path, args: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    assert main(args) == 1
    error = capsys.readouterr().err.strip()
    assert message in error and error.count("\n") == 0 and error.startswith("error: ")


def test_help_imports_neither_the_server_nor_the_database() -> None:
    code = ("import sys, contextlib, io\nfrom nlu_engine.cli.main import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['review', '--help'])\n"
            "heavy = ('starlette', 'uvicorn', 'sqlalchemy', 'tensorflow')\n"
            "print(sorted(m for m in heavy if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_review_serves_the_page_on_loopback(folder: Path) -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "nlu_engine.cli.main", "review", "--db", "log.db",
                                "--data", "data", "--port", str(port)], cwd=folder,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, state = time.monotonic() + 30, None
        while state is None and time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/api/state", timeout=2) as answer:
                    state = json.load(answer)
            except OSError:
                time.sleep(0.05)
        assert state is not None, process.communicate(timeout=5)
        assert state["intents"] == ["book_flight", "greet", "out_of_scope"] and state["labelled"] == 0
    finally:
        process.terminate()
        process.wait(10)


def test_compare_names_what_the_new_model_fixes_and_breaks(folder: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from nlu_engine.assembly.model import train
    from nlu_engine.review.decisions import Change, open_review

    old = train(LOGREG, folder / "data" / "nlu.yml", out=folder / "models", fixed_model_name="old", log=None)
    store = open_review(str(folder / "log.db"))
    rows = {row["text"]: row for row in store.messages()}
    store.decide([Change(rows[t]["id"], 0, t, intent="check_order") for t in
                  ("where is my order", "Where is my order?")], "ann")
    store.close()
    extra = folder / "more.yml"
    extra.write_text('version: "3.1"\nnlu:\n- intent: check_order\n  examples: |\n    - where is my order\n'
                     "    - Where is my order?\n", encoding="utf-8")
    new = train(LOGREG, [folder / "data" / "nlu.yml", extra], out=folder / "models",
                fixed_model_name="new", log=None)
    report_path = folder / "report.json"
    assert main(["review", "compare", "--old", str(old), "--new", str(new), "--db", str(folder / "log.db"),
                 "--test", str(folder / "data" / "nlu.yml"), "--json", str(report_path)]) == 0
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert (report["reviewed"]["examples"], report["reviewed"]["old_accuracy"]) == (2, 0.0)
    assert report["reviewed"]["new_accuracy"] == 1.0 and report["reviewed"]["fixed"] == 2
    assert report["test"]["examples"] == 4 and report["test"]["fixed"] - report["test"]["broken"] == \
        round((report["test"]["new_accuracy"] - report["test"]["old_accuracy"]) * 4)
    assert "reviewed messages: 2: accuracy 0.00% -> 100.00%; the new model fixes 2 and breaks 0" in \
        capsys.readouterr().out
