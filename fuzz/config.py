"""Fuzz target ``config``: a ``config.yml`` as ``load_config`` reads it (components and their
typed parameters included)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fuzz.harness import ROOT, assert_one_line
from nlu_engine.assembly.config import PIPELINES, load_config
from nlu_engine.contract.errors import NLUError

FOLDER = Path(tempfile.mkdtemp(prefix="fuzz-config-"))
atexit.register(shutil.rmtree, FOLDER, True)
PATH = FOLDER / "config.yml"


def seeds() -> Iterable[bytes]:
    shipped = sorted((p for p in PIPELINES.iterdir() if p.name.endswith(".yml")), key=lambda p: p.name)
    for path in [*shipped, *sorted(ROOT.glob("examples/*/config.yml"))]:
        yield path.read_bytes()


def test_one_input(raw: bytes) -> None:
    PATH.write_bytes(raw)
    try:
        config = load_config(PATH)
    except NLUError as error:
        assert_one_line(str(error), str(PATH))
        return
    assert config.steps
