"""Tiny hostile archives, each built here byte by byte, are refused in one short line and leave nothing.

Deep or long member names, chained headers, negative sizes, padding after the gzip stream and
``.npz`` bombs inside an archive: each is an :class:`ArchiveError`, never a crash or a hang.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nlu_engine.assembly import archive_members, persistence
from nlu_engine.assembly.model import Model
from nlu_engine.contract.errors import ArchiveError
from nlu_engine.contract.npz import load_npz

MANIFEST: dict[str, Any] = {
    "engine": "nlu_engine", "version": "0.1.0", "language": "en",
    "pipeline": [{"name": "WhitespaceTokenizer"}], "components": ["components/0_W"],
}


@pytest.fixture(autouse=True)
def private_tempdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Extraction folders go under the test's own folder, so we can see what is left behind."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


def header(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(tarfile.USTAR_FORMAT)


def pax(name: str, fields: dict[str, str]) -> bytes:
    """A pax extended header whose fields apply to the next member (e.g. a long ``path``)."""
    return tarfile.TarInfo(name)._create_pax_generic_header(fields, tarfile.XHDTYPE, "utf-8")  # type: ignore[attr-defined]


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def archive(path: Path, *parts: bytes, manifest: dict[str, Any] = MANIFEST) -> Path:
    """A .tar.gz of the manifest, the component folder, then ``parts`` (raw tar blocks)."""
    data = json.dumps(manifest).encode()
    raw = [header("manifest.json", len(data)), padded(data), header("components/0_W", kind=tarfile.DIRTYPE)]
    path.write_bytes(gzip.compress(b"".join([*raw, *parts, bytes(1024)])))
    return path


def member(name: str, data: bytes = b"x") -> bytes:
    """A member of any name length (a pax header carries a long one) and its contents."""
    if len(name) <= 100:
        return header(name, len(data)) + padded(data)
    return pax("pax", {"path": name}) + header("long", len(data)) + padded(data)


def refused(path: Path, *fragments: str) -> str:
    with pytest.raises(ArchiveError) as info:
        Model.load(path)
    message = str(info.value)
    assert "\n" not in message and len(message) < 300, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_a_plain_built_archive_loads(tmp_path: Path, private_tempdir: Path) -> None:
    model = Model.load(archive(tmp_path / "ok.tar.gz", member("components/0_W/a/b.txt")))
    assert model.parse("hi there")["text"] == "hi there"
    assert list(private_tempdir.iterdir()) == []


# --- deep and long names, chained headers: refused before anything is written -----------------------
@pytest.mark.parametrize("depth", [33, 2_000, 300_000])
def test_a_deep_member_name_is_refused(tmp_path: Path, private_tempdir: Path, depth: int) -> None:
    bad = archive(tmp_path / "deep.tar.gz", member("/".join(["a"] * depth)))
    assert bad.stat().st_size < 2_000
    refused(bad, "32 folders deep")
    assert list(private_tempdir.iterdir()) == []


def test_a_long_member_name_is_refused(tmp_path: Path, private_tempdir: Path) -> None:
    bad = archive(tmp_path / "long.tar.gz", member("components/0_W/" + "n" * 2_000))
    refused(bad, "over 1024 characters", "components/0_W/nnn")
    assert list(private_tempdir.iterdir()) == []


def test_implied_folders_count_toward_the_member_limit(
    tmp_path: Path, private_tempdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive_members, "MAX_MEMBERS", 100)
    names = ["/".join([f"d{i}", *["a"] * 30]) for i in range(5)]  # a few deep members, many folders
    bad = archive(tmp_path / "folders.tar.gz", *[member(n) for n in names])
    refused(bad, "over 100 files and folders")
    assert list(private_tempdir.iterdir()) == []


@pytest.mark.parametrize("kind", [tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME])
def test_chained_headers_are_refused(tmp_path: Path, private_tempdir: Path, kind: bytes) -> None:
    info = tarfile.TarInfo("chain")
    if kind == tarfile.XGLTYPE:
        block = info._create_pax_generic_header({"comment": "x"}, kind, "utf-8")  # type: ignore[attr-defined]
    else:
        block = info._create_gnu_long_header("b" * 10, kind, "utf-8", "strict")  # type: ignore[attr-defined]
    bad = tmp_path / "chain.tar.gz"
    data = json.dumps(MANIFEST).encode()
    tail = header("manifest.json", len(data)) + padded(data) + bytes(1024)
    bad.write_bytes(gzip.compress(block * 3_000 + tail))
    assert bad.stat().st_size < 20_000
    refused(bad, "nested too deeply")
    assert list(private_tempdir.iterdir()) == []


# --- an .npz inside the archive may not inflate past its budget --------------------------------------
def npz(shape: tuple[int, ...], data_bytes: int) -> bytes:
    """A compressed .npz whose ``coef`` declares ``shape`` of float64 and holds ``data_bytes`` zeros."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": shape})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zipped:
        zipped.writestr("coef.npy", head.getvalue() + bytes(data_bytes))
        one = io.BytesIO()
        np.save(one, np.zeros(1))
        zipped.writestr("intercept.npy", one.getvalue())
    return out.getvalue()


def test_an_npz_bomb_in_an_archive_is_refused(tmp_path: Path, private_tempdir: Path) -> None:
    bomb = npz((4 * 1024**2,), 32 * 1024**2)
    assert len(bomb) < 100_000
    folder = "components/0_LogisticRegressionClassifier"
    manifest = {**MANIFEST, "pipeline": [{"name": "LogisticRegressionClassifier"}], "components": [folder]}
    data = json.dumps(manifest).encode()
    raw = [header("manifest.json", len(data)), padded(data), header(folder, kind=tarfile.DIRTYPE),
           member(f"{folder}/weights.npz", bomb), member(f"{folder}/classes.json", b'["a"]')]
    bad = tmp_path / "npzbomb.tar.gz"
    bad.write_bytes(gzip.compress(b"".join([*raw, bytes(1024)])))
    refused(bad, "'0_LogisticRegressionClassifier/weights.npz': would inflate to", "refusing to load")
    assert list(private_tempdir.iterdir()) == []


def test_an_npz_array_larger_than_its_data_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c" / "weights.npz"
    path.parent.mkdir()
    path.write_bytes(npz((10**12,), 8))
    with pytest.raises(ArchiveError, match=r"array 'coef' declares more data than it holds"):
        load_npz(path)


def test_a_plain_npz_loads(tmp_path: Path) -> None:
    path = tmp_path / "weights.npz"
    np.savez(path, coef=np.arange(6.0).reshape(2, 3), intercept=np.ones(2))
    arrays = load_npz(path)
    assert arrays["coef"].shape == (2, 3) and list(arrays["intercept"]) == [1.0, 1.0]


# --- zero padding after the gzip stream does not raise the ratio limit -----------------------------
def test_zero_padding_after_the_gzip_stream_does_not_raise_the_limit(tmp_path: Path) -> None:
    bomb = archive(tmp_path / "bomb.tar.gz", member("components/0_W/big.bin", bytes(10 * 1024**2)))
    size = bomb.stat().st_size
    refused(bomb, "declares over")
    with bomb.open("ab") as file:
        file.write(bytes(100 * size))  # gzip skips trailing zeros
    assert 200 * size <= persistence.extraction_limit(bomb) <= 200 * (size + 8)  # the trailer's slack
    refused(bomb, "declares over")


def test_the_gzip_trailer_counts_toward_the_size(tmp_path: Path) -> None:
    path = tmp_path / "ok.tar.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(100))
    assert persistence.extraction_limit(path) == 200 * (2 + 8)


# --- refusals are one short line -------------------------------------------------------------------
def test_a_parameter_key_with_a_newline_is_one_line(tmp_path: Path) -> None:
    manifest = {**MANIFEST, "pipeline": [{"name": "WhitespaceTokenizer", "evil\nsecond line": 1}]}
    bad = archive(tmp_path / "key.tar.gz", manifest=manifest)
    message = refused(bad, "unknown parameter 'evil\\nsecond line'")
    assert message.count(str(bad)) == 1, "the archive's path is named once"


def test_a_long_member_name_is_shortened_in_every_refusal(tmp_path: Path) -> None:
    name = "components/0_W/" + "/".join(["abcdefghijklmnopqrstuvwxyz"] * 30)  # under both caps
    link = tarfile.TarInfo("link")  # the pax header gives its name
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    bad = archive(tmp_path / "link.tar.gz", pax("pax", {"path": name}) + link.tobuf(tarfile.USTAR_FORMAT))
    refused(bad, "'components/0_W/abcdefghij", "...", "is a link or special file")
    bad = archive(tmp_path / "twice.tar.gz", member(name), member(name))
    refused(bad, "...", "clashes with another")



def test_a_negative_member_size_is_refused(tmp_path: Path, private_tempdir: Path) -> None:
    negative = pax("pax", {"size": "-1024"}) + header("components/0_W/f")
    refused(archive(tmp_path / "negative.tar.gz", negative), "'components/0_W/f'", "negative size")
    assert list(private_tempdir.iterdir()) == []
