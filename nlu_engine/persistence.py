"""The model archive: ``manifest.json`` + one folder per component, as a ``.tar.gz``.

Plain data only: JSON, ``.npz`` without object arrays and network weights as ``.npz``. Loading
runs no code from the archive: members are checked before extraction (regular files and folders
only, no links or devices, no path that leaves the extraction folder, bounded sizes), and the
component classes it names must be registered or importable Component subclasses.

An archive is written to a temporary file beside the target and renamed into place, so a failed
or interrupted training never leaves half an archive or replaces a good one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from nlu_engine import MINIMUM_COMPATIBLE_VERSION, __version__
from nlu_engine.config import ComponentSpec, PipelineConfig, validate_params
from nlu_engine.errors import ArchiveError, ConfigError
from nlu_engine.pipeline import Pipeline
from nlu_engine.registry import COMPONENTS, component_class

MANIFEST = "manifest.json"
MAX_MEMBERS = 10_000
MAX_TOTAL_BYTES = 4 * 1024**3


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


def extract_archive(path: Path, destination: Path) -> dict[str, Any]:
    """Check every member, extract into ``destination`` and return the manifest."""
    if path.is_dir():
        path = newest_archive(path)
    if not path.is_file():
        raise ArchiveError(f"model archive '{path}' not found")
    destination = destination.resolve()
    try:
        with tarfile.open(path, "r:gz") as tar:
            members = tar.getmembers()
            _check_members(path, members, destination)
            _read_to_end(tar)
            tar.extractall(destination, members=members, filter="data")
    except ArchiveError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error) as error:
        raise ArchiveError(
            f"model archive '{path}' is not a readable .tar.gz ({error}); retrain or pick another"
        ) from None
    manifest_path = destination / MANIFEST
    if not manifest_path.is_file():
        raise ArchiveError(f"model archive '{path}' has no {MANIFEST}; it is not an nlu_engine model")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ArchiveError(f"model archive '{path}': {MANIFEST} is not valid JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("engine") != "nlu_engine":
        raise ArchiveError(f"model archive '{path}': {MANIFEST} is not an nlu_engine manifest")
    if _version(manifest.get("version", "0")) < _version(MINIMUM_COMPATIBLE_VERSION):
        raise ArchiveError(
            f"model archive '{path}' was trained by nlu_engine {manifest.get('version')}; this "
            f"version loads models from {MINIMUM_COMPATIBLE_VERSION} on: retrain it"
        )
    return manifest


def _read_to_end(tar: tarfile.TarFile) -> None:
    """Read the compressed stream to its end, so gzip checks its CRC and length.

    Reading stops at the tar end marker otherwise, and a corrupted stream that still inflates
    would go unnoticed.
    """
    stream = tar.fileobj
    if stream is not None:
        while stream.read(1 << 20):
            pass


def _check_members(path: Path, members: list[tarfile.TarInfo], destination: Path) -> None:
    if len(members) > MAX_MEMBERS:
        raise ArchiveError(f"model archive '{path}' has {len(members)} members; refusing to load")
    total = 0
    for member in members:
        name = PurePosixPath(member.name)
        if not (member.isfile() or member.isdir()):
            raise ArchiveError(
                f"model archive '{path}': member '{member.name}' is a link or special file; "
                "refusing to load"
            )
        target = (destination / member.name).resolve()
        if name.is_absolute() or ".." in name.parts or not target.is_relative_to(destination):
            raise ArchiveError(
                f"model archive '{path}': member '{member.name}' would be written outside the "
                "model folder; refusing to load"
            )
        total += member.size
        if total > MAX_TOTAL_BYTES:
            raise ArchiveError(f"model archive '{path}' unpacks to over 4 GB; refusing to load")


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(text).split(".")[:3])
    except ValueError:
        return (0,)


def load_pipeline(root: Path, manifest: dict[str, Any], where: str) -> Pipeline:
    """Rebuild the components an extracted archive names, each from its own folder."""
    steps_raw = manifest.get("pipeline")
    folders = manifest.get("components")
    if not isinstance(steps_raw, list) or not isinstance(folders, list) or len(steps_raw) != len(
        folders
    ):
        raise ArchiveError(f"model archive '{where}': manifest pipeline and components disagree")
    steps: list[ComponentSpec] = []
    components = []
    for index, (raw, folder) in enumerate(zip(steps_raw, folders, strict=True)):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise ArchiveError(f"model archive '{where}': pipeline step {index + 1} has no name")
        name = raw["name"]
        _check_class_path(name, where)
        try:
            cls = component_class(name)
            params = validate_params(
                cls, {k: v for k, v in raw.items() if k != "name"}, f"{where}: {name}"
            )
        except ConfigError as error:
            raise ArchiveError(f"model archive '{where}': {error}") from None
        directory = (root / str(folder)).resolve()
        if not directory.is_relative_to(root.resolve()) or not directory.is_dir():
            raise ArchiveError(f"model archive '{where}': folder '{folder}' is missing")
        try:
            component = cls.load(directory, params)
        except ArchiveError:
            raise
        except Exception as error:  # missing or corrupt files: KeyError, ValueError, BadZipFile, ...
            raise ArchiveError(
                f"model archive '{where}': {name} could not be restored "
                f"({type(error).__name__}: {error}); retrain the model"
            ) from error
        component.index = index
        component.language = manifest.get("language", "en")
        steps.append(ComponentSpec(name=name, cls=cls, params=params))
        components.append(component)
    config = PipelineConfig(language=manifest.get("language", "en"), steps=steps, source=where)
    return Pipeline(config, components)


def _check_class_path(name: str, where: str) -> None:
    """Refuse a class path that cannot name a component before anything is imported.

    Importing a module runs its top-level code, so an archive must not make us import standard
    library modules (``this``, ``antigravity``, ``os``...) or a ``__main__`` (``nlu_engine.__main__``
    would run the command line).
    """
    if name in COMPONENTS or "." not in name:
        return  # the registry answers for plain names without importing anything
    parts = name.split(".")
    if (
        not all(part.isidentifier() for part in parts)
        or parts[0] in sys.stdlib_module_names
        or "__main__" in parts
    ):
        raise ArchiveError(
            f"model archive '{where}': '{name}' is not a registered component nor a custom "
            "component's import path; refusing to load"
        )


def load_archive(path: Path) -> tuple[Pipeline, dict[str, Any], Path]:
    """Extract (to a temporary folder, removed afterwards) and rebuild a pipeline."""
    if path.is_dir():
        path = newest_archive(path)
    tmp = Path(tempfile.mkdtemp(prefix="nlu-load-"))
    try:
        manifest = extract_archive(path, tmp)
        pipeline = load_pipeline(tmp, manifest, str(path))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pipeline, manifest, path
