"""``--allow-component`` / ``--config`` on the commands that load a model, run as a user runs them.

Each hostile archive is refused with exit code 1 and one line, and no canary appears. The CLI is
started with ``python -m nlu_engine`` in a folder holding ``evilmod.py``, so that module is
importable from the working directory: the loader must still not import it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.cli import allow
from nlu_engine.contract.errors import ConfigError
from tests.extras import requires_extra

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOGREG = PROJECT_ROOT / "nlu_engine" / "pipelines" / "logreg.yml"
CANARY_MODULE = """\
from pathlib import Path

Path(__file__).with_name("canary.txt").write_text("imported")


class Evil:
    pass
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}  # TensorFlow's own logs would show
    return subprocess.run([sys.executable, "-m", "nlu_engine", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=env)


def one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Path:
    from nlu_engine.assembly.model import train

    return train(LOGREG, tiny_data_path, out=tmp_path_factory.mktemp("good"), fixed_model_name="good",
                 log=None)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "evilmod.py").write_text(CANARY_MODULE)
    return tmp_path


def with_first_component(good: Path, target: Path, name: str) -> Path:
    """A copy of ``good`` whose manifest names ``name`` as its first component (the issue's probe)."""
    with tarfile.open(good, "r:gz") as source, tarfile.open(target, "w:gz") as out:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.name == "manifest.json":
                manifest: dict[str, Any] = json.loads(data or b"{}")
                manifest["pipeline"][0]["name"] = name
                data = json.dumps(manifest).encode()
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    return target


def test_parse_refuses_a_module_from_the_working_directory(good: Path, workdir: Path) -> None:
    bad = with_first_component(good, workdir / "bad.tar.gz", "evilmod.Evil")
    line = one_line_error(run("parse", "-m", "bad.tar.gz", "hello", cwd=workdir),
                          "'evilmod.Evil'", "--allow-component evilmod.Evil")
    assert str(bad.name) in line
    assert not (workdir / "canary.txt").exists()


def test_allowing_it_imports_it_and_it_must_be_a_component(good: Path, workdir: Path) -> None:
    with_first_component(good, workdir / "bad.tar.gz", "evilmod.Evil")
    result = run("parse", "-m", "bad.tar.gz", "--allow-component", "evilmod.Evil", "hello", cwd=workdir)
    one_line_error(result, "is not a subclass of nlu_engine.contract.component.Component")
    assert (workdir / "canary.txt").exists(), "allowed: the user trusts that code"


def test_naming_tensorflow_is_refused_at_once_and_quietly(good: Path, workdir: Path) -> None:
    with_first_component(good, workdir / "tf.tar.gz", "tensorflow.keras.Model")
    result = run("parse", "-m", "tf.tar.gz", "hello", cwd=workdir)
    one_line_error(result, "--allow-component tensorflow.keras.Model")  # and no TensorFlow log lines


def test_shell_refuses_too(good: Path, workdir: Path) -> None:
    with_first_component(good, workdir / "bad.tar.gz", "evilmod.Evil")
    one_line_error(run("shell", "-m", "bad.tar.gz", cwd=workdir), "--allow-component evilmod.Evil")
    assert not (workdir / "canary.txt").exists()


def test_model_test_refuses_too(good: Path, workdir: Path, tiny_data_path: Path) -> None:
    with_first_component(good, workdir / "bad.tar.gz", "evilmod.Evil")
    result = run("test", "-m", "bad.tar.gz", "--data", str(tiny_data_path), "--no-plot", cwd=workdir)
    one_line_error(result, "--allow-component evilmod.Evil")
    assert not (workdir / "canary.txt").exists()


@pytest.mark.parametrize("name", ["NoDots", "a b.C", "pkg..C"])
def test_a_bad_allow_component_value(good: Path, workdir: Path, name: str) -> None:
    one_line_error(run("parse", "-m", str(good), "--allow-component", name, "hi", cwd=workdir),
                   f"'{name}'", "my_package.module.MyComponent")


def test_a_legitimate_archive_parses_as_before(good: Path, workdir: Path) -> None:
    from nlu_engine.assembly.model import Model

    result = run("parse", "-m", str(good), "hello there", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == Model.load(good).parse("hello there")


def test_every_loading_command_takes_the_flags() -> None:
    for command, flags in [("parse", ("--allow-component", "--config")),
                           ("shell", ("--allow-component", "--config")),
                           ("serve", ("--allow-component", "--config")),
                           ("test", ("--allow-component",))]:
        result = subprocess.run([sys.executable, "-m", "nlu_engine", command, "--help"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        for flag in flags:
            assert flag in result.stdout, (command, flag)


def test_allowed_combines_names_and_the_configs_custom_components(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    sentiment = "examples.custom_components.sentiment.SentimentAnalyzer"
    config = tmp_path / "config.yml"
    config.write_text(
        "pipeline:\n- name: WhitespaceTokenizer\n- name: CountVectorsFeaturizer\n"
        f"- name: LogisticRegressionClassifier\n- name: {sentiment}\n"
    )
    assert allow.allowed(None) == frozenset()
    assert allow.allowed(["my_pkg.mod.C"]) == frozenset({"my_pkg.mod.C"})
    assert allow.allowed(["my_pkg.mod.C"], str(config)) == frozenset({"my_pkg.mod.C", sentiment})
    assert allow.allowed([], str(LOGREG)) == frozenset(), "registered components need no allowing"
    with pytest.raises(ConfigError, match="not found"):
        allow.allowed([], str(tmp_path / "missing.yml"))


@requires_extra("server", "starlette", "uvicorn")
def test_serve_hands_the_allow_list_to_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    import nlu_engine.server.run
    from nlu_engine.cli.main import main

    calls: list[dict[str, Any]] = []

    def fake(**kwargs: Any) -> None:
        calls.append(kwargs)

    monkeypatch.setattr(nlu_engine.server.run, "serve", fake)
    assert main(["serve", "-m", "models", "--allow-component", "b_pkg.m.B",
                 "--allow-component", "a_pkg.m.A"]) == 0
    assert calls[0]["allow_components"] == ["a_pkg.m.A", "b_pkg.m.B"]
