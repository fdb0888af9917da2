"""Fuzz target ``archive``: a model archive (``.tar.gz``) as ``Model.load`` reads it, then one parse.

The fuzzer mutates the uncompressed tar (the first byte says whether the target gzips it or
hands the bytes over as they are), so its changes reach the members (the manifest, ``.npz``
weights, vocabularies) rather than dying in gzip's checksum. The seed is a logreg archive of a
tiny data set (no TensorFlow: it trains and loads in a second; its tar fits the fuzzer's input).
A load must give a model whose parse is strict JSON, or a one-line ``NLUError`` naming the
archive."""

from __future__ import annotations

import atexit
import gzip
import json
import shutil
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fuzz.harness import assert_one_line
from nlu_engine.assembly.model import Model
from nlu_engine.contract.errors import NLUError

FOLDER = Path(tempfile.mkdtemp(prefix="fuzz-archive-"))
atexit.register(shutil.rmtree, FOLDER, True)
#: the largest input the fuzzer makes here (bytes): the seed's uncompressed tar fits
MAX_LEN = 1 << 16
PATH = FOLDER / "model.tar.gz"


TINY_NLU = """version: "3.1"
nlu:
- intent: greet
  examples: |
    - hi
    - hello there
- intent: book
  examples: |
    - book a table in [Berlin](city)
    - a table for [two](count) in [Paris](city)
- synonym: two
  examples: |
    - 2
"""


def seed_archive(data: Path | None = None) -> Path:
    """A trained archive (logreg), made once per run: of a tiny data set by default, so the whole
    uncompressed tar fits in the fuzzer's input."""
    from nlu_engine.assembly.model import train

    if data is None:
        data = FOLDER / "nlu.yml"
        data.write_text(TINY_NLU, encoding="utf-8")
    return train("logreg", str(data), out=FOLDER / "seed", fixed_model_name=data.stem, log=None)


def seeds() -> Iterable[bytes]:
    archive = seed_archive()
    with gzip.open(archive) as stream:
        tar = stream.read()
    yield b"\x00" + tar
    yield b"\x01" + archive.read_bytes()
    with tarfile.open(archive) as members:  # each member's tar alone: a manifest or weights missing
        for member in members.getmembers()[:8]:
            yield b"\x00" + tar[: member.offset_data + member.size]


def test_one_input(raw: bytes) -> None:
    if not raw:
        return
    PATH.write_bytes(gzip.compress(raw[1:], compresslevel=1) if raw[0] % 2 == 0 else raw[1:])
    try:
        model = Model.load(PATH)
        result = model.parse("book a table for two in Berlin tomorrow")
    except NLUError as error:
        assert_one_line(str(error), str(PATH))
        return
    json.dumps(result, allow_nan=False)  # a strict client (Rasa's) reads it
