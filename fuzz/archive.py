"""Fuzz target ``archive``: a model archive (``.tar.gz``) as ``Model.load`` reads it, then one parse.

The fuzzer mutates the uncompressed tar (the first byte says whether the target gzips it or
hands the bytes over as they are), so its changes reach the members (the manifest, ``.npz``
weights, vocabularies) rather than dying in gzip's checksum. The seed is a small logreg archive
of ``data/nlu.yml`` (no TensorFlow: it trains and loads in a second). A load must give a model
whose parse is strict JSON, or a one-line ``NLUError`` naming the archive."""

from __future__ import annotations

import gzip
import json
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fuzz.harness import ROOT, assert_one_line
from nlu_engine.assembly.model import Model
from nlu_engine.contract.errors import NLUError

FOLDER = Path(tempfile.mkdtemp(prefix="fuzz-archive-"))
PATH = FOLDER / "model.tar.gz"


def seed_archive() -> Path:
    """A tiny trained archive (logreg of the example assistant), made once per run."""
    from nlu_engine.assembly.model import train

    return train("logreg", str(ROOT / "data" / "nlu.yml"), out=FOLDER / "seed",
                 fixed_model_name="seed", log=None)


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
