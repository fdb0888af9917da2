"""The model archive: ``manifest.json`` + one folder per component, as a ``.tar.gz``.

Plain data only: JSON, ``.npz`` without object arrays and network weights as ``.npz``. An
archive is data, never code. Before anything is written, every member header is checked (regular
files and folders only: no links or devices, no path that leaves the extraction folder, declared
sizes within the extraction limit), and so is the manifest: engine, versions, structure, and
component names, each registered or allowed by the user (``--allow-component``), decided without
importing anything. Extraction then counts the bytes it writes, stops at the limit and removes
what it wrote.

An archive is written to a temporary file beside the target and renamed into place, so a failed
or interrupted training never leaves half an archive or replaces a good one.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from nlu_engine import MINIMUM_COMPATIBLE_VERSION, __version__
from nlu_engine.assembly.config import ComponentSpec, PipelineConfig, make_config
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.assembly.registry import check_loadable, component_class_for_loading
from nlu_engine.contract.errors import ArchiveError, ArchiveMemberError, ConfigError

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


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def component_folder(index: int, name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in name.rsplit(".", 1)[-1])
    return f"components/{index}_{safe}"


def save_archive(pipeline: Pipeline, path: Path, extra: dict[str, Any]) -> Path:
    """Persist a trained pipeline as ``path`` (a .tar.gz), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nlu-model-") as tmp:
        root = Path(tmp)
        folders = []
        for index, component in enumerate(pipeline.components):
            step = pipeline.config.steps[index]
            folder = component_folder(index, step.name)
            (root / folder).mkdir(parents=True)
            component.persist(root / folder)
            folders.append(folder)
        manifest = {
            "engine": "nlu_engine",
            "version": __version__,
            "minimum_compatible_version": MINIMUM_COMPATIBLE_VERSION,
            "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "language": pipeline.config.language,
            "pipeline": pipeline.config.as_dict()["pipeline"],
            "components": folders,
            **extra,
        }
        (root / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False))
        fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        os.close(fd)
        try:
            os.chmod(partial, 0o666 & ~_UMASK)  # mkstemp makes it owner-only
            with tarfile.open(partial, "w:gz", compresslevel=6) as tar:
                tar.add(root / MANIFEST, arcname=MANIFEST)
                for folder in folders:
                    tar.add(root / folder, arcname=folder)
            os.replace(partial, path)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise
    return path


def newest_archive(folder: Path) -> Path:
    archives = sorted(folder.glob("*.tar.gz"), key=lambda p: p.stat().st_mtime)
    if not archives:
        raise ArchiveError(f"no model archive (*.tar.gz) in '{folder}'; train one with nlu-engine train")
    return archives[-1]


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


def extract_archive(
    path: Path,
    destination: Path,
    allow_components: frozenset[str] = frozenset(),
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Check every member and the manifest, extract into ``destination``; return the manifest.

    Nothing is written until every member header and the manifest have been checked (component
    names included: registered, or in ``allow_components``). Writing stops at the extraction
    limit (:func:`extraction_limit`), and a failed extraction removes what it wrote.
    """
    if path.is_dir():
        path = newest_archive(path)
    if not path.is_file():
        raise ArchiveError(f"model archive '{path}' not found")
    limit = extraction_limit(path, max_bytes)
    destination = destination.resolve()
    try:
        with gzip.GzipFile(path, "rb") as stream, tarfile.open(
            fileobj=_BoundedReads(stream), mode="r:"
        ) as tar:
            members = _scan_members(path, tar, destination, limit)
            _read_to_end(path, tar)
            manifest = _read_manifest(path, tar, members)
            check_manifest(manifest, str(path), allow_components, members)
            _extract_members(path, tar, members, destination, limit)
            _check_json_members(path, members, destination)
    except ArchiveError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise ArchiveError(
            f"model archive '{path}' is not a readable .tar.gz ({error}); retrain or pick another"
        ) from None
    except (RecursionError, MemoryError):  # chained headers make tarfile recurse
        raise ArchiveError(
            f"model archive '{path}' has headers nested too deeply to read; refusing to load"
        ) from None
    return manifest


class _BoundedReads(io.RawIOBase):
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


def _scan_members(
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


def _read_to_end(path: Path, tar: tarfile.TarFile) -> None:
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


def _read_manifest(path: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo]) -> Any:
    member = next((m for m in members if m.isfile() and _normal(m.name) == MANIFEST), None)
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


def _check_json_members(path: Path, members: list[tarfile.TarInfo], destination: Path) -> None:
    """Refuse a ``.json`` member holding NaN or Infinity, which a component would read (Python's
    json accepts them) and pass on as a threshold, a weight or a confidence. Anything else wrong
    with a file is its component's to report."""
    for member in members:
        if not (member.isfile() and member.name.endswith(".json")):
            continue
        try:
            json.loads((destination / _normal(member.name)).read_bytes(), parse_constant=_non_finite)
        except NonFiniteJSON as error:
            raise ArchiveError(
                f"model archive '{path}': {_normal(member.name)} holds {error}, which JSON does not "
                "allow; refusing to load (retrain the model or restore its archive)"
            ) from None
        except (ValueError, RecursionError):
            continue


def check_manifest(
    manifest: Any,
    where: str,
    allow_components: frozenset[str] = frozenset(),
    members: list[tarfile.TarInfo] | None = None,
) -> None:
    """Engine, versions, structure and component names, all before anything is imported.

    A component name must be registered or allowed by the user (:func:`check_loadable`); the
    decision imports nothing. ``members`` (when given) must hold each component's folder.
    """
    if not isinstance(manifest, dict) or manifest.get("engine") != "nlu_engine":
        raise ArchiveError(f"model archive '{where}': {MANIFEST} is not an nlu_engine manifest")
    trained_by = manifest.get("version", "0")
    if _version(trained_by) < _version(MINIMUM_COMPATIBLE_VERSION):
        raise ArchiveError(
            f"model archive '{where}' was trained by nlu_engine {_shown(trained_by)}; this "
            f"version loads models from {MINIMUM_COMPATIBLE_VERSION} on: retrain it"
        )
    needs = manifest.get("minimum_compatible_version", MINIMUM_COMPATIBLE_VERSION)
    if _version(needs) > _version(__version__):
        raise ArchiveError(
            f"model archive '{where}' needs nlu_engine {_shown(needs)} or newer (this is {__version__}): "
            "upgrade nlu_engine or retrain the model"
        )
    if not isinstance(manifest.get("language", "en"), str):
        raise ArchiveError(f"model archive '{where}': the manifest's language is not a string")
    steps = manifest.get("pipeline")
    folders = manifest.get("components")
    if not isinstance(steps, list) or not isinstance(folders, list) or len(steps) != len(folders):
        raise ArchiveError(f"model archive '{where}': manifest pipeline and components disagree")
    present = None if members is None else _folders(members)
    for index, (raw, folder) in enumerate(zip(steps, folders, strict=True)):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise ArchiveError(f"model archive '{where}': pipeline step {index + 1} has no name")
        try:
            check_loadable(raw["name"], allow_components)
        except ConfigError as error:
            raise ArchiveError(
                f"model archive '{where}': pipeline step {index + 1}: {error}"
            ) from None
        if not isinstance(folder, str) or (present is not None and _normal(folder) not in present):
            raise ArchiveError(f"model archive '{where}': folder '{_shown(folder)}' is missing")


def _extract_members(
    path: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo], destination: Path, limit: int
) -> None:
    """Write the checked members, counting bytes; on any failure remove what was written."""
    created: list[Path] = []
    written = 0
    try:
        _make_folder(destination, created)
        for member in members:
            target = destination / _normal(member.name)
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


def _normal(name: str) -> str:
    """A member name as a relative POSIX path without ``.`` parts or trailing slashes."""
    return PurePosixPath(*[part for part in PurePosixPath(name).parts if part != "."]).as_posix()


def _folders(members: list[tarfile.TarInfo]) -> set[str]:
    """Every folder the members make: folder members and the parents of every member."""
    folders = set()
    for member in members:
        name = PurePosixPath(_normal(member.name))
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


def _shown(value: Any) -> str:
    """A manifest value for a one-line message: short and printable."""
    text = str(value)
    return text if text.isprintable() and len(text) <= 80 else repr(text[:80])


def _version(text: Any) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(text).split(".")[:3])
    except ValueError:
        return (0,)


def load_pipeline(
    root: Path, manifest: dict[str, Any], where: str, allow_components: frozenset[str] = frozenset()
) -> Pipeline:
    """Rebuild the components an extracted archive names, each from its own folder.

    The whole manifest is checked first, then every class is resolved and its parameters
    validated, and only then is any component restored (which may import TensorFlow or spaCy).
    """
    check_manifest(manifest, where, allow_components)
    language = manifest.get("language", "en")
    steps: list[ComponentSpec] = []
    for raw in manifest["pipeline"]:
        name = raw["name"]
        try:
            cls = component_class_for_loading(name, allow_components)
            step_config = make_config(cls, {k: v for k, v in raw.items() if k != "name"}, name)
        except ConfigError as error:
            raise ArchiveError(f"model archive '{where}': {error}") from None
        steps.append(ComponentSpec(name=name, cls=cls, config=step_config))
    components = []
    for index, (step, folder) in enumerate(zip(steps, manifest["components"], strict=True)):
        name, cls = step.name, step.cls
        directory = (root / str(folder)).resolve()
        if not directory.is_relative_to(root.resolve()) or not directory.is_dir():
            raise ArchiveError(f"model archive '{where}': folder '{folder}' is missing")
        try:
            component = cls.load(directory, step.config)
        except ArchiveMemberError as error:  # names the component's folder, file and array
            raise ArchiveError(f"model archive '{where}': {error}") from None
        except ArchiveError:
            raise
        except Exception as error:  # missing or corrupt files: KeyError, ValueError, BadZipFile, ...
            detail = " ".join(str(error).split())[:300]  # one line, whatever the library said
            raise ArchiveError(
                f"model archive '{where}': {name} could not be restored "
                f"({type(error).__name__}: {detail}); retrain the model"
            ) from error
        component.index = index
        component.language = language
        components.append(component)
    config = PipelineConfig(language=language, steps=steps, source=where)
    return Pipeline(config, components)


def load_archive(
    path: Path, allow_components: frozenset[str] = frozenset(), max_bytes: int | None = None
) -> tuple[Pipeline, dict[str, Any], Path]:
    """Extract (to a temporary folder, removed afterwards) and rebuild a pipeline.

    ``allow_components``: the custom component classes the archive may import (see
    :func:`nlu_engine.assembly.registry.allowed_components`); ``max_bytes``: see :func:`extraction_limit`.
    """
    if path.is_dir():
        path = newest_archive(path)
    tmp = Path(tempfile.mkdtemp(prefix="nlu-load-"))
    try:
        manifest = extract_archive(path, tmp, allow_components, max_bytes)
        pipeline = load_pipeline(tmp, manifest, str(path), allow_components)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pipeline, manifest, path
