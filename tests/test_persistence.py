"""The model archive: unsafe or broken archives are refused before anything runs; writes are atomic."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nlu_engine.classifiers.logistic_regression import LogisticRegressionClassifier
from nlu_engine.component import IntentClassifier
from nlu_engine.config import ComponentSpec, load_config
from nlu_engine.errors import ArchiveError
from nlu_engine.model import Model, train
from nlu_engine.training_data import load_data
from nlu_engine.training_data.training_data import TrainingData

PROJECT_ROOT = Path(__file__).resolve().parents[1]
LOGREG = PROJECT_ROOT / "nlu_engine" / "pipelines" / "logreg.yml"


@pytest.fixture(scope="module")
def good_archive(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Path:
    """A small trained logreg model (tokenizer, two count-vector featurizers, classifier)."""
    out = tmp_path_factory.mktemp("good")
    return train(LOGREG, tiny_data_path, out=out, fixed_model_name="good", log=None)


@pytest.fixture(autouse=True)
def private_tempdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Extraction folders go under the test's own folder, so we can see what is left behind."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return scratch


def members(archive: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(archive, "r:gz") as tar:
        return [
            (m, tar.extractfile(m).read() if m.isfile() else None)  # type: ignore[union-attr]
            for m in tar.getmembers()
        ]


def rebuild(
    source: Path,
    target: Path,
    keep: Callable[[tarfile.TarInfo], bool] = lambda m: True,
    replace: dict[str, bytes] | None = None,
    extra: list[tuple[tarfile.TarInfo, bytes | None]] = (),  # type: ignore[assignment]
) -> Path:
    """A copy of ``source`` with members dropped, file contents replaced or members added."""
    replace = replace or {}
    with tarfile.open(target, "w:gz") as tar:
        for info, data in [*members(source), *extra]:
            if not keep(info):
                continue
            if info.name in replace:
                data = replace[info.name]
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return target


def entry(name: str, data: bytes | None = b"x", kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple[
    tarfile.TarInfo, bytes | None
]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o644
    return info, data if kind == tarfile.REGTYPE else None


def manifest_of(archive: Path) -> dict[str, Any]:
    data = dict((m.name, d) for m, d in members(archive))["manifest.json"]
    assert data is not None
    return json.loads(data)


def with_manifest(good: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    manifest = manifest_of(good)
    change(manifest)
    return rebuild(good, target, replace={"manifest.json": json.dumps(manifest).encode()})


def refused(path: Path, *fragments: str) -> str:
    with pytest.raises(ArchiveError) as info:
        Model.load(path)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_good_archive_loads_and_cleans_up(good_archive: Path, private_tempdir: Path) -> None:
    model = Model.load(good_archive)
    assert model.parse("hello there")["intent"]["name"] == "greet"
    assert model.path == good_archive
    assert list(private_tempdir.iterdir()) == [], "the extraction folder is removed after loading"
    names = [m.name for m, _ in members(good_archive)]
    assert names[0] == "manifest.json"
    assert all(n == "manifest.json" or n.startswith("components/") for n in names)


# --- members that would escape or are not plain files -------------------------------------------
def test_parent_path_member(good_archive: Path, tmp_path: Path) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", extra=[entry("../escaped.txt")])
    refused(bad, "'../escaped.txt'", "outside the model folder")
    assert not list(tmp_path.rglob("escaped.txt"))


def test_nested_parent_path_member(good_archive: Path, tmp_path: Path) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz",
                  extra=[entry("components/0_WhitespaceTokenizer/../../../escaped.txt")])
    refused(bad, "outside the model folder")
    assert not list(tmp_path.parent.rglob("escaped.txt"))


def test_absolute_path_member(good_archive: Path, tmp_path: Path) -> None:
    target = tmp_path / "absolute.txt"
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", extra=[entry(str(target))])
    refused(bad, "outside the model folder")
    assert not target.exists()


@pytest.mark.parametrize(
    "kind, link",
    [(tarfile.SYMTYPE, "/etc/passwd"), (tarfile.SYMTYPE, "../../outside"),
     (tarfile.LNKTYPE, "manifest.json"), (tarfile.LNKTYPE, "/etc/passwd")],
)
def test_link_members(good_archive: Path, tmp_path: Path, kind: bytes, link: str) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz",
                  extra=[entry("components/0_WhitespaceTokenizer/link.json", None, kind, link)])
    refused(bad, "'components/0_WhitespaceTokenizer/link.json'", "link or special file")


@pytest.mark.parametrize("kind", [tarfile.FIFOTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE])
def test_device_and_fifo_members(good_archive: Path, tmp_path: Path, kind: bytes) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", extra=[entry("components/dev", None, kind)])
    refused(bad, "'components/dev'", "link or special file")


def test_a_refused_archive_writes_nothing(good_archive: Path, tmp_path: Path,
                                          private_tempdir: Path) -> None:
    # the bad member comes last: the good ones before it must not be extracted either
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz",
                  extra=[entry("components/x", None, tarfile.SYMTYPE, "/etc")])
    refused(bad)
    assert list(private_tempdir.iterdir()) == []


# --- broken files -----------------------------------------------------------------------------------
def test_corrupt_gzip(good_archive: Path, tmp_path: Path) -> None:
    data = bytearray(good_archive.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    bad = tmp_path / "corrupt.tar.gz"
    bad.write_bytes(bytes(data))
    refused(bad, "is not a readable .tar.gz", "retrain or pick another")


def test_bad_gzip_header(good_archive: Path, tmp_path: Path) -> None:
    bad = tmp_path / "header.tar.gz"
    bad.write_bytes(b"\x00\x00" + good_archive.read_bytes()[2:])
    refused(bad, "is not a readable .tar.gz")


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.95])
def test_truncated_archive(good_archive: Path, tmp_path: Path, fraction: float) -> None:
    data = good_archive.read_bytes()
    bad = tmp_path / "truncated.tar.gz"
    bad.write_bytes(data[: int(len(data) * fraction)])
    refused(bad, "is not a readable .tar.gz")


def test_not_a_tar(tmp_path: Path) -> None:
    text = tmp_path / "text.tar.gz"
    text.write_text("this is not an archive\n")
    refused(text, "is not a readable .tar.gz")
    gzipped = tmp_path / "gzipped.tar.gz"
    gzipped.write_bytes(gzip.compress(b"{\"just\": \"json\"}" * 100))
    refused(gzipped, "is not a readable .tar.gz")


def test_empty_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.tar.gz"
    empty.write_bytes(b"")
    refused(empty, "is not a readable .tar.gz")


def test_missing_archive(tmp_path: Path) -> None:
    refused(tmp_path / "nope.tar.gz", "not found")


def test_missing_manifest(good_archive: Path, tmp_path: Path) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", keep=lambda m: m.name != "manifest.json")
    refused(bad, "has no manifest.json", "not an nlu_engine model")


def test_manifest_not_json(good_archive: Path, tmp_path: Path) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", replace={"manifest.json": b"{nope"})
    refused(bad, "manifest.json is not valid JSON")


def test_manifest_of_another_engine(good_archive: Path, tmp_path: Path) -> None:
    bad = with_manifest(good_archive, tmp_path / "bad.tar.gz", lambda m: m.update(engine="rasa"))
    refused(bad, "is not an nlu_engine manifest")


def test_manifest_too_old(good_archive: Path, tmp_path: Path) -> None:
    bad = with_manifest(good_archive, tmp_path / "bad.tar.gz", lambda m: m.update(version="0.0.1"))
    refused(bad, "trained by nlu_engine 0.0.1", "retrain it")


def test_manifest_pipeline_and_folders_disagree(good_archive: Path, tmp_path: Path) -> None:
    bad = with_manifest(good_archive, tmp_path / "bad.tar.gz", lambda m: m["components"].pop())
    refused(bad, "manifest pipeline and components disagree")


def test_manifest_folder_outside_the_model(good_archive: Path, tmp_path: Path) -> None:
    def escape(manifest: dict[str, Any]) -> None:
        manifest["components"][0] = "../../.."

    refused(with_manifest(good_archive, tmp_path / "bad.tar.gz", escape), "folder '../../..'")


def test_manifest_with_invalid_parameters(good_archive: Path, tmp_path: Path) -> None:
    def change(manifest: dict[str, Any]) -> None:
        manifest["pipeline"][-1]["max_iter"] = "many"

    refused(with_manifest(good_archive, tmp_path / "bad.tar.gz", change), "max_iter", "must be an integer")


def test_manifest_with_unknown_component(good_archive: Path, tmp_path: Path) -> None:
    def change(manifest: dict[str, Any]) -> None:
        manifest["pipeline"][-1]["name"] = "LogisticRegresionClassifier"

    refused(with_manifest(good_archive, tmp_path / "bad.tar.gz", change), "unknown component")


@pytest.mark.parametrize(
    "class_path",
    ["os.system", "subprocess.Popen", "builtins.eval", "this.Zen", "antigravity.Fly",
     "nlu_engine.__main__.main", "shutil.rmtree", "no_such_package_xyz.Thing", ".relative.Thing"],
)
def test_manifest_naming_a_non_component_executes_nothing(
    good_archive: Path, tmp_path: Path, class_path: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    calls: list[Any] = []

    class Recorder:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            calls.append(("Popen", args))

    monkeypatch.setattr(os, "system", lambda *a: calls.append(("system", a)))
    monkeypatch.setattr(subprocess, "Popen", Recorder)
    already = {"this", "antigravity", "nlu_engine.__main__"} & set(sys.modules)

    def change(manifest: dict[str, Any]) -> None:
        manifest["pipeline"][-1]["name"] = class_path

    refused(with_manifest(good_archive, tmp_path / "bad.tar.gz", change), class_path)
    assert calls == []
    for module in {"this", "antigravity", "nlu_engine.__main__"} - already:
        assert module not in sys.modules, f"loading the archive imported {module}"
    assert capsys.readouterr().out == ""


def test_corrupt_component_file(good_archive: Path, tmp_path: Path) -> None:
    name = next(m.name for m, _ in members(good_archive) if m.name.endswith("weights.npz"))
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", replace={name: b"PK\x03\x04garbage"})
    refused(bad, "LogisticRegressionClassifier could not be restored", "retrain the model")


def test_corrupt_json_file(good_archive: Path, tmp_path: Path) -> None:
    name = next(m.name for m, _ in members(good_archive) if m.name.endswith("vocabularies.json"))
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", replace={name: b"[1, 2"})
    refused(bad, "CountVectorsFeaturizer could not be restored")


def test_missing_component_file(good_archive: Path, tmp_path: Path) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", keep=lambda m: not m.name.endswith("classes.json"))
    refused(bad, "LogisticRegressionClassifier could not be restored")


class _Payload:
    """Pickles to a shell command: it runs only if someone unpickles it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_pickled_object_array_is_never_unpickled(good_archive: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    np.savez(buffer, coef=np.array([_Payload(marker)], dtype=object), intercept=np.zeros(2))
    name = next(m.name for m, _ in members(good_archive) if m.name.endswith("weights.npz"))
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", replace={name: buffer.getvalue()})
    refused(bad, "could not be restored")
    assert not marker.exists()


# --- atomic writes ----------------------------------------------------------------------------------
class ExplodingClassifier(IntentClassifier):
    """Fails in the middle of training."""

    def __init__(self) -> None:
        pass

    def train(self, data: TrainingData) -> None:
        raise RuntimeError("training blew up")


@pytest.fixture
def existing(good_archive: Path, tmp_path: Path) -> Path:
    """A good archive already in place in models/, which a failed training must not touch."""
    models = tmp_path / "models"
    models.mkdir()
    target = models / "m.tar.gz"
    target.write_bytes(good_archive.read_bytes())
    return target


def assert_untouched(existing: Path, good_archive: Path) -> None:
    assert existing.read_bytes() == good_archive.read_bytes()
    assert sorted(p.name for p in existing.parent.iterdir()) == [existing.name], "leftover files"
    Model.load(existing)


def test_failed_training_leaves_existing_archive(
    existing: Path, good_archive: Path, tiny_data_path: Path
) -> None:
    config = load_config(LOGREG)
    config.steps.insert(1, ComponentSpec("ExplodingClassifier", ExplodingClassifier, {}))
    with pytest.raises(RuntimeError, match="training blew up"):
        train(config, tiny_data_path, out=existing.parent, fixed_model_name="m", log=None)
    assert_untouched(existing, good_archive)


def test_failed_persist_leaves_existing_archive(
    existing: Path, good_archive: Path, tiny_data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Any, directory: Path) -> None:
        (directory / "half.json").write_text("{")
        raise OSError("disk full")

    monkeypatch.setattr(LogisticRegressionClassifier, "persist", broken)
    with pytest.raises(OSError, match="disk full"):
        train(LOGREG, tiny_data_path, out=existing.parent, fixed_model_name="m", log=None)
    assert_untouched(existing, good_archive)


@pytest.mark.parametrize("error", [OSError("no space left"), KeyboardInterrupt()])
def test_interrupted_archive_write_leaves_no_partial(
    existing: Path,
    good_archive: Path,
    tiny_data_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
) -> None:
    real_add = tarfile.TarFile.add
    calls = []

    def failing_add(self: tarfile.TarFile, *args: Any, **kwargs: Any) -> None:
        calls.append(args)
        if len(calls) == 2:  # after the manifest, while writing the components
            raise error
        real_add(self, *args, **kwargs)

    monkeypatch.setattr(tarfile.TarFile, "add", failing_add)
    with pytest.raises(type(error)):
        train(LOGREG, tiny_data_path, out=existing.parent, fixed_model_name="m", log=None)
    assert len(calls) == 2
    assert_untouched(existing, good_archive)


def test_successful_training_replaces_archive(existing: Path, tiny_data_path: Path) -> None:
    path = train(LOGREG, tiny_data_path, out=existing.parent, fixed_model_name="m",
                 overrides=["LogisticRegressionClassifier.max_iter=150"], log=None)
    assert path == existing
    assert sorted(p.name for p in existing.parent.iterdir()) == ["m.tar.gz"]
    assert manifest_of(existing)["pipeline"][-1]["max_iter"] == 150
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(existing.stat().st_mode) == 0o666 & ~mask, "readable like any file"


# --- a folder: the newest archive -----------------------------------------------------------------
def test_folder_loads_newest_archive(good_archive: Path, tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    older, newer = folder / "b-older.tar.gz", folder / "a-newer.tar.gz"
    older.write_bytes(good_archive.read_bytes())
    with_manifest(good_archive, newer, lambda m: m.update(num_examples=1))
    os.utime(older, (1_000_000_000, 1_000_000_000))
    os.utime(newer, (1_500_000_000, 1_500_000_000))
    (folder / ".c.tar.gz.abc123.partial").write_bytes(b"half")  # an interrupted write: ignored
    (folder / "notes.txt").write_text("not a model")
    model = Model.load(folder)
    assert model.path == newer
    assert model.manifest["num_examples"] == 1
    assert model.model_id.endswith("-a-newer")


def test_empty_folder(tmp_path: Path) -> None:
    refused(tmp_path, "no model archive (*.tar.gz)", "train one")


def test_training_data_is_not_modified(tmp_path: Path, tiny_data_path: Path, tiny_texts: list[str]) -> None:
    data = load_data(tiny_data_path)
    first = train(LOGREG, data, out=tmp_path, fixed_model_name="one", log=None)
    assert all(not m.features and not m.tokens for m in data.messages)
    second = train(LOGREG, data, out=tmp_path, fixed_model_name="two", log=None)
    assert Model.load(first).parse_batch(tiny_texts) == Model.load(second).parse_batch(tiny_texts)
