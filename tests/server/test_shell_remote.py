"""``nlu-engine shell --server URL`` and :class:`RemoteParser` against a real server on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.cli.remote import RemoteParser
from nlu_engine.contract.errors import NLUError
from nlu_engine.server.process import ServerProcess, free_port
from tests.extras import requires_extra

pytestmark = requires_extra("server")

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "shell-token"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shell-models")
    return train(ROOT / "nlu_engine" / "pipelines" / "logreg.yml", ROOT / "data" / "nlu.yml", out=out,
                 fixed_model_name="shell", log=None)


@pytest.fixture(scope="module")
def server(archive: Path) -> Any:
    with ServerProcess(["-m", str(archive), "--auth-token", TOKEN], ready_path="/version") as running:
        yield running


def test_remote_parser_returns_the_model_parse(server: ServerProcess, archive: Path) -> None:
    model = Model.load(archive)
    host_port = server.url.removeprefix("http://")
    for url in (server.url, server.url + "/", host_port, server.url + "/model/parse"):
        parser = RemoteParser(url, TOKEN)
        for text in ("book a table for two in Berlin", "hi there", "ünïcödé 👋"):
            assert parser.parse(text) == model.parse(text)


def test_remote_parser_errors_are_one_line(server: ServerProcess) -> None:
    with pytest.raises(NLUError, match="answered 401"):
        RemoteParser(server.url, "wrong-token").parse("hi")
    with pytest.raises(NLUError, match="answered 401: User is not authenticated"):
        RemoteParser(server.url).parse("hi")
    with pytest.raises(NLUError, match="cannot reach the server"):
        RemoteParser(f"http://127.0.0.1:{free_port()}", timeout=5).parse("hi")
    with pytest.raises(NLUError, match="not an http"):
        RemoteParser("ftp://127.0.0.1/x")


def test_shell_talks_to_the_server(server: ServerProcess) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nlu_engine.cli.main", "shell", "--server", server.url, "--token", TOKEN],
        input="book a table for two in Berlin\n/json\nhi there\n",
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "intent: book_table" in result.stdout
    assert '"name": "greet"' in result.stdout  # the full JSON after /json
    assert "Traceback" not in result.stderr


def test_shell_reports_an_unreachable_server() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = subprocess.run(
        [sys.executable, "-m", "nlu_engine.cli.main", "shell", "--server", url],
        input="hello\n", capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach the server") and "Traceback" not in result.stderr
