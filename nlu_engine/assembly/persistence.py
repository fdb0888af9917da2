"""The model archive: ``manifest.json`` + one folder per component, as a ``.tar.gz``.

Plain data only: JSON, ``.npz`` without object arrays and network weights as ``.npz``. An
archive is data, never code. Before anything is written, every member header is checked (regular
files and folders only: no links or devices, no path that leaves the extraction folder, declared
sizes within the extraction limit), and so is the manifest: engine, versions, structure, and
component names, each registered or allowed by the user (``--allow-component``), decided without
importing anything. Extraction then counts the bytes it writes, stops at the limit and removes
what it wrote. The members' side of this (headers, bounded reads, the limit, writing) is
``archive_members``; the manifest and the pipeline are this module's.

An archive is written to a temporary file beside the target and renamed into place, so a failed
or interrupted training never leaves half an archive or replaces a good one.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tarfile
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from nlu_engine import MINIMUM_COMPATIBLE_VERSION, __version__
from nlu_engine.assembly.archive_members import (
    MANIFEST,
    BoundedReads,
    check_json_members,
    extract_members,
    extraction_limit,
    member_folders,
    normal_name,
    read_manifest,
    read_to_end,
    scan_members,
)
from nlu_engine.assembly.config import ComponentSpec, PipelineConfig, make_config
from nlu_engine.assembly.pipeline import Pipeline, resolve_feature_names
from nlu_engine.assembly.registry import check_loadable, component_class_for_loading
from nlu_engine.contract.errors import ArchiveError, ArchiveMemberError, ConfigError

#: the manifest's list of the components' names in the pipeline (absent in a model from before
#: names: its components are known by class and position, as it stored them)
STEP_NAMES = "step_names"


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
        # each component's name in the pipeline (``Component.pipeline_name``); a model fine-tuned
        # from one that kept no names keeps none
        keep = all(c.step_name for c in pipeline.components)
        names = {STEP_NAMES: [c.step_name for c in pipeline.components]} if keep else {}
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
            **names,
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
            fileobj=BoundedReads(stream), mode="r:"
        ) as tar:
            members = scan_members(path, tar, destination, limit)
            read_to_end(path, tar)
            manifest = read_manifest(path, tar, members)
            check_manifest(manifest, str(path), allow_components, members)
            extract_members(path, tar, members, destination, limit)
            check_json_members(path, members, destination)
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
    present = None if members is None else member_folders(members)
    for index, (raw, folder) in enumerate(zip(steps, folders, strict=True)):
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise ArchiveError(f"model archive '{where}': pipeline step {index + 1} has no name")
        try:
            check_loadable(raw["name"], allow_components)
        except ConfigError as error:
            raise ArchiveError(
                f"model archive '{where}': pipeline step {index + 1}: {error}"
            ) from None
        if not isinstance(folder, str) or (present is not None and normal_name(folder) not in present):
            raise ArchiveError(f"model archive '{where}': folder '{_shown(folder)}' is missing")


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
    names = _step_names(manifest, len(steps), where)
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
        component.index, component.step_name, component.language = index, names[index], language
        components.append(component)
    resolve_feature_names(components)
    config = PipelineConfig(language=language, steps=steps, source=where)
    return Pipeline(config, components)


def _step_names(manifest: dict[str, Any], count: int, where: str) -> list[str]:
    """The components' names the manifest keeps; empty ones for a model from before names."""
    names = manifest.get(STEP_NAMES)
    if names is None:
        return [""] * count
    if (not isinstance(names, list) or len(names) != count
            or not all(isinstance(n, str) and n for n in names) or len(set(names)) != count):
        raise ArchiveError(f"model archive '{where}': the manifest's {STEP_NAMES} are not one "
                           "distinct name for each pipeline step; retrain the model")
    return names


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
