"""A model archive's members read safely: an archive is untrusted data.

Every member header is checked before anything is written (regular files and folders only: no
links or devices, no path that leaves the extraction folder, names and depths bounded, declared
sizes within the extraction limit); no single read is larger than a header needs; the manifest
is read with a bound on its size; extraction counts the bytes it writes, stops at the limit and
removes what it wrote; the JSON members are checked for non-finite numbers. ``persistence``
puts these steps together (``extract_archive``) around its check of the manifest.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any

from nlu_engine.contract.errors import ArchiveError

MANIFEST = "manifest.json"


MAX_MEMBERS = 10_000  # members and the folders they imply


MAX_NAME = 1024  # characters in a member name


MAX_DEPTH = 32  # parts in a member name


MAX_UNPACKED_BYTES = 2 * 1024**3  # the default extraction limit, or RATIO_LIMIT x the archive


RATIO_LIMIT = 200


MAX_BYTES_ENV = "NLU_ENGINE_MAX_UNPACKED_BYTES"  # overrides the default limit, in bytes


MAX_MANIFEST_BYTES = 64 * 1024**2


CHUNK = 1024**2  # bytes per read while extracting


MAX_READ = 16 * 1024**2  # the largest single read tarfile may make (a header is far smaller)


MAX_TAIL = 1024**2  # padding allowed after the tar end marker


GZIP_TRAILER = 8  # bytes of CRC and length that end a gzip stream


def extraction_limit(path: Path, max_bytes: int | None = None) -> int:
    """The most bytes an archive may unpack to.

    ``max_bytes`` if given, else ``$NLU_ENGINE_MAX_UNPACKED_BYTES``, else the smaller of 2 GiB and
    200 times the archive's size, zero padding after its gzip stream not counted: model files
    (JSON, ``.npz`` weights) compress a few times at most, while a decompression bomb compresses
    by a factor of a thousand.
    """
    if max_bytes is None:
        text = os.environ.get(MAX_BYTES_ENV, "").strip()
        if not text:
            return min(MAX_UNPACKED_BYTES, RATIO_LIMIT * _compressed_size(path))
        try:
            max_bytes = int(text)
        except ValueError:
            max_bytes = 0
        if max_bytes < 1:
            raise ArchiveError(
                f"${MAX_BYTES_ENV} = {text!r} is not a positive number of bytes; "
                "set it to e.g. 4000000000 or unset it"
            )
    if max_bytes < 1:
        raise ArchiveError(f"the extraction limit must be a positive number of bytes, not {max_bytes}")
    return max_bytes


def _compressed_size(path: Path) -> int:
    """The archive's size without zero padding after its gzip stream (gzip skips such padding).

    Up to :data:`GZIP_TRAILER` zero bytes may be the stream's own trailer (its CRC and length).
    """
    size = path.stat().st_size
    zeros = 0
    with open(path, "rb") as file:
        while zeros < size:
            step = min(CHUNK, size - zeros)
            file.seek(size - zeros - step)
            block = file.read(step)
            stripped = len(block.rstrip(b"\0"))
            zeros += step - stripped
            if stripped:
                break
    return size - max(0, zeros - GZIP_TRAILER)


class BoundedReads(io.RawIOBase):
    """The decompressed stream, refusing any single read larger than tarfile ever needs.

    tarfile reads a pax or GNU long-name header whole, however large its declared size; the
    cap keeps a header from becoming a memory bomb. File contents are read in chunks.
    """

    def __init__(self, stream: gzip.GzipFile) -> None:
        super().__init__()
        self.stream = stream

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > MAX_READ:
            raise ArchiveError(
                f"model archive '{self.stream.name}' has a header of {size} bytes; refusing to load"
            )
        return self.stream.read(size)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self.stream.seek(offset, whence)

    def tell(self) -> int:
        return self.stream.tell()


def scan_members(
    path: Path, tar: tarfile.TarFile, destination: Path, limit: int
) -> list[tarfile.TarInfo]:
    """Every member header, checked; stops at the first bad one, before reading further."""
    members: list[tarfile.TarInfo] = []
    explicit: set[PurePosixPath] = set()  # the members' own names
    folders: set[PurePosixPath] = set()  # folder members and every member's parents
    files: set[PurePosixPath] = set()
    declared = 0
    while (member := tar.next()) is not None:
        if len(members) >= MAX_MEMBERS:
            raise ArchiveError(f"model archive '{path}' has over {MAX_MEMBERS} members; refusing to load")
        _check_name(path, member.name)
        if member.size < 0:  # a pax header may declare any size
            raise ArchiveError(
                f"model archive '{path}': member {_member(member.name)} has a negative size; "
                "refusing to load"
            )
        name = PurePosixPath(member.name)
        if not (member.isdir() or member.type in (tarfile.REGTYPE, tarfile.AREGTYPE)):
            raise ArchiveError(
                f"model archive '{path}': member {_member(member.name)} is a link or special file, not a "
                "plain file or folder; refusing to load"
            )
        target = (destination / member.name).resolve()
        if name.is_absolute() or ".." in name.parts or not target.is_relative_to(destination):
            raise ArchiveError(
                f"model archive '{path}': member {_member(member.name)} would be written outside the "
                "model folder; refusing to load"
            )
        key = PurePosixPath(target.relative_to(destination).as_posix())
        if (
            key in explicit
            or (member.isfile() and key in folders)
            or any(parent in files for parent in key.parents)
            or key == PurePosixPath(".")
        ):
            raise ArchiveError(
                f"model archive '{path}': member {_member(member.name)} clashes with another (the same "
                "name twice, or a file and a folder of one name); refusing to load"
            )
        explicit.add(key)
        folders.update(key.parents)
        (files if member.isfile() else folders).add(key)
        if len(folders) + len(files) > MAX_MEMBERS + 1:  # the parents include "."
            raise ArchiveError(
                f"model archive '{path}' has over {MAX_MEMBERS} files and folders; refusing to load"
            )
        declared += member.size if member.isfile() else 0
        if declared > limit:
            raise ArchiveError(
                f"model archive '{path}' declares over {_size(limit)} of files, the most it may "
                f"unpack to; refusing to load (set ${MAX_BYTES_ENV} higher if you trust it)"
            )
        members.append(member)
    return members


def _check_name(path: Path, name: str) -> None:
    """Refuse a member name too long or too deep, before any path is built from it."""
    if len(name) > MAX_NAME or len(PurePosixPath(name).parts) > MAX_DEPTH:
        raise ArchiveError(
            f"model archive '{path}': member {_member(name)} has a name over {MAX_NAME} characters "
            f"or {MAX_DEPTH} folders deep; refusing to load"
        )


def read_to_end(path: Path, tar: tarfile.TarFile) -> None:
    """Read the compressed stream to its end, so gzip checks its CRC and length.

    Reading stops at the tar end marker otherwise, and a corrupted stream that still inflates
    would go unnoticed. What follows the end marker is padding, so it must be short.
    """
    stream = tar.fileobj
    assert stream is not None
    tail = 0
    while chunk := stream.read(CHUNK):
        tail += len(chunk)
        if tail > MAX_TAIL:
            raise ArchiveError(
                f"model archive '{path}' has data after its last member; refusing to load"
            )


def read_manifest(path: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo]) -> Any:
    member = next((m for m in members if m.isfile() and normal_name(m.name) == MANIFEST), None)
    if member is None:
        raise ArchiveError(f"model archive '{path}' has no {MANIFEST}; it is not an nlu_engine model")
    if member.size > MAX_MANIFEST_BYTES:
        raise ArchiveError(
            f"model archive '{path}': {MANIFEST} is {_size(member.size)}, over the "
            f"{_size(MAX_MANIFEST_BYTES)} a manifest may have; refusing to load"
        )
    source = tar.extractfile(member)
    assert source is not None
    data = b"".join(iter(lambda: source.read(CHUNK), b""))
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_non_finite)
    except NonFiniteJSON as error:
        raise ArchiveError(f"model archive '{path}': {MANIFEST} holds {error}, which JSON does not "
                           "allow; refusing to load (retrain the model or restore its archive)") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        detail = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        raise ArchiveError(f"model archive '{path}': {MANIFEST} is not valid JSON ({detail})") from None


class NonFiniteJSON(ValueError):
    """NaN, Infinity or -Infinity in a JSON file: Python's json reads them, JSON does not."""


def _non_finite(constant: str) -> Any:
    raise NonFiniteJSON(constant)


def check_json_members(path: Path, members: list[tarfile.TarInfo], destination: Path) -> None:
    """Refuse a ``.json`` member holding NaN or Infinity, which a component would read (Python's
    json accepts them) and pass on as a threshold, a weight or a confidence. Anything else wrong
    with a file is its component's to report."""
    for member in members:
        if not (member.isfile() and member.name.endswith(".json")):
            continue
        try:
            json.loads((destination / normal_name(member.name)).read_bytes(), parse_constant=_non_finite)
        except NonFiniteJSON as error:
            raise ArchiveError(
                f"model archive '{path}': {normal_name(member.name)} holds {error}, which JSON does not "
                "allow; refusing to load (retrain the model or restore its archive)"
            ) from None
        except (ValueError, RecursionError):
            continue


def extract_members(
    path: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo], destination: Path, limit: int
) -> None:
    """Write the checked members, counting bytes; on any failure remove what was written."""
    created: list[Path] = []
    written = 0
    try:
        _make_folder(destination, created)
        for member in members:
            target = destination / normal_name(member.name)
            if member.isdir():
                _make_folder(target, created)
                continue
            _make_folder(target.parent, created)
            source = tar.extractfile(member)
            assert source is not None
            with open(target, "xb") as out:
                created.append(target)
                while chunk := source.read(CHUNK):
                    written += len(chunk)
                    if written > limit:
                        raise ArchiveError(
                            f"model archive '{path}' unpacks to over {_size(limit)}, the most "
                            f"it may; refusing to load (set ${MAX_BYTES_ENV} higher if you trust it)"
                        )
                    out.write(chunk)
    except BaseException:
        for item in reversed(created):
            with contextlib.suppress(OSError):
                item.rmdir() if item.is_dir() else item.unlink()
        raise


def _make_folder(folder: Path, created: list[Path]) -> None:
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for item in reversed(missing):
        item.mkdir()
        created.append(item)


def normal_name(name: str) -> str:
    """A member name as a relative POSIX path without ``.`` parts or trailing slashes."""
    return PurePosixPath(*[part for part in PurePosixPath(name).parts if part != "."]).as_posix()


def member_folders(members: list[tarfile.TarInfo]) -> set[str]:
    """Every folder the members make: folder members and the parents of every member."""
    folders = set()
    for member in members:
        name = PurePosixPath(normal_name(member.name))
        if member.isdir():
            folders.add(name.as_posix())
        folders.update(parent.as_posix() for parent in name.parents)
    return folders


def _size(count: int) -> str:
    if count >= 10**9:
        return f"{count / 1e9:.1f} GB"
    return f"{count / 1e6:.1f} MB" if count >= 10**6 else f"{count} bytes"


def _member(name: str) -> str:
    """A member name, quoted, for a one-line message: at most 80 characters of it, printable."""
    if name.isprintable() and len(name) <= 80:
        return f"'{name}'"
    return repr(name[:80]) + ("..." if len(name) > 80 else "")
