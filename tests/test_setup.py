"""setup.py: a wheel built from the project runs the README's commands from any folder.

The wheel is built from a copy of the sources (so the project folder gets no ``build/``), installed
with ``pip install --target`` into a temporary folder and run from another folder with
``PYTHONPATH`` pointing at it (which comes before the editable install of the project). Training
keeps to one epoch, so both runs take seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.extras import requires_extra

pytestmark = requires_extra("dev", "wheel")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "nlu.yml"
SOURCES = ("setup.py", "pyproject.toml", "README.md")
ONE_EPOCH = ["--set", "DIETClassifier.epochs=1", "--set", "ResponseSelector.epochs=1"]


def pip(*args: str, cwd: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args, "--quiet", "--disable-pip-version-check"],
                            cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, installed into a folder of its own (``pip install --no-deps --target``)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    for folder in ("nlu_engine", "benchmarks"):  # benchmarks: a package beside ours that must not ship
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in SOURCES:
        shutil.copy(ROOT / name, source / name)
    pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(source), cwd=tmp)
    (wheel,) = (tmp / "dist").glob("nlu_engine-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    shipped = {Path(n).name for n in names if n.startswith("nlu_engine/pipelines/")}
    assert shipped == {p.name for p in (ROOT / "nlu_engine" / "pipelines").glob("*.yml")}
    assert not [n for n in names if n.startswith("benchmarks/")]
    page = {Path(n).name for n in names if n.startswith("nlu_engine/review/static/")}
    assert page == {p.name for p in (ROOT / "nlu_engine" / "review" / "static").iterdir()}
    pip("install", "--no-deps", "--target", str(tmp / "site"), str(wheel), cwd=tmp)
    return tmp / "site"


def start(site: Path, cwd: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(site), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(process: subprocess.Popen[str]) -> tuple[str, str]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return out, err


def test_the_installed_wheel_trains_with_the_shipped_pipelines_from_another_folder(
    site: Path, tmp_path: Path
) -> None:
    where, _ = finish(start(site, tmp_path, sys.executable, "-c",
                            "import nlu_engine.assembly.config as c; "
                            "print(c.__file__); print(c.DEFAULT_PIPELINE)"))
    module, default = where.split()
    assert Path(module).is_relative_to(site) and Path(default).is_relative_to(site), where

    command = str(site / "bin" / "nlu-engine")
    train = [command, "train", "--data", str(DATA), "--out", "models", *ONE_EPOCH]
    # side by side: each run spends most of its time starting TensorFlow
    default_run = start(site, tmp_path, *train, "--fixed-model-name", "default")
    readme_run = start(site, tmp_path, *train, "--config", "pipelines/diet.yml",
                       "--fixed-model-name", "readme")
    for name, process in (("default", default_run), ("readme", readme_run)):
        _, err = finish(process)
        assert f"model written to models/{name}.tar.gz" in err

    parsed, _ = finish(start(site, tmp_path, command, "parse", "-m", "models/readme.tar.gz", "hello there"))
    assert json.loads(parsed)["intent"]["name"]
