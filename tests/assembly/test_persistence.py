"""The model archive: unsafe or broken archives are refused before anything runs; writes are atomic."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import stat
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nlu_engine.assembly import archive_members, persistence
from nlu_engine.assembly.config import ComponentSpec, load_config
from nlu_engine.assembly.model import Model, train
from nlu_engine.classifiers.logistic_regression import LogisticRegressionClassifier
from nlu_engine.contract.component import IntentClassifier
from nlu_engine.contract.errors import ArchiveError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import load_data

PROJECT_ROOT = Path(__file__).resolve().parents[2]
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
    refused(bad, "LogisticRegressionClassifier/weights.npz': is not a readable .npz", "retrain the model")


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
    refused(bad, "array 'coef' holds 'object' values, not numbers")
    assert not marker.exists()


# --- code the archive names: imported only if the user allows it -------------------------------------
CANARY_MODULE = """\
from pathlib import Path

Path(__file__).with_name("canary.txt").write_text("imported")


class Evil:
    pass
"""


def first_component(name: str) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest["pipeline"][0]["name"] = name

    return change


@pytest.fixture
def clean_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """sys.path restored afterwards, and the probe modules forgotten."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for name in [m for m in sys.modules if m.split(".")[0] in {"evilmod", "sidefx_pkg"}]:
        del sys.modules[name]


def test_a_module_in_the_working_directory_is_not_imported(
    good_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_imports: None,
    private_tempdir: Path,
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "evilmod.py").write_text(CANARY_MODULE)
    monkeypatch.chdir(workdir)
    bad = with_manifest(good_archive, tmp_path / "bad.tar.gz", first_component("evilmod.Evil"))
    path_before, modules_before = list(sys.path), set(sys.modules)
    message = refused(bad, "pipeline step 1", "'evilmod.Evil'", "--allow-component evilmod.Evil")
    assert "not registered" in message
    assert not (workdir / "canary.txt").exists()
    assert sys.path == path_before and set(sys.modules) == modules_before
    assert list(private_tempdir.iterdir()) == [], "the refusal comes before extraction"


def test_an_installed_module_with_import_side_effects_is_not_imported(
    good_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_imports: None
) -> None:
    site = tmp_path / "site"
    (site / "sidefx_pkg").mkdir(parents=True)
    (site / "sidefx_pkg" / "__init__.py").write_text(CANARY_MODULE)
    (site / "sidefx_pkg" / "mod.py").write_text("class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(site))
    bad = with_manifest(good_archive, tmp_path / "bad.tar.gz", first_component("sidefx_pkg.mod.Thing"))
    modules_before = set(sys.modules)
    refused(bad, "--allow-component sidefx_pkg.mod.Thing")
    assert not (site / "sidefx_pkg" / "canary.txt").exists()
    assert set(sys.modules) == modules_before


def test_allowing_a_class_imports_it_and_it_must_still_be_a_component(
    good_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_imports: None
) -> None:
    (tmp_path / "evilmod.py").write_text(CANARY_MODULE)
    monkeypatch.chdir(tmp_path)
    bad = with_manifest(good_archive, tmp_path / "bad.tar.gz", first_component("evilmod.Evil"))
    not_a_component = r"is not a subclass of nlu_engine\.contract\.component\.Component"
    with pytest.raises(ArchiveError, match=not_a_component):
        Model.load(bad, allow_components=["evilmod.Evil"])
    assert (tmp_path / "canary.txt").exists(), "an allowed class is imported: the user trusts it"


def test_naming_tensorflow_imports_no_tensorflow(good_archive: Path, tmp_path: Path) -> None:
    bad = with_manifest(good_archive, tmp_path / "bad.tar.gz", first_component("tensorflow.keras.Model"))
    code = (
        "import sys, nlu_engine\n"
        "from nlu_engine.contract.errors import ArchiveError\n"
        "try:\n"
        f"    nlu_engine.load({str(bad)!r})\n"
        "except ArchiveError as error:\n"
        "    print(error)\n"
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    message, imported = result.stdout.strip().splitlines()
    assert "--allow-component tensorflow.keras.Model" in message
    assert imported == "False False"
    assert result.stderr == "", "a refusal is quiet"


def test_every_component_is_checked_before_any_is_restored(
    good_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    restored: list[str] = []
    real = LogisticRegressionClassifier.load.__func__  # type: ignore[attr-defined]

    def spy(cls: Any, directory: Path, params: dict[str, Any]) -> Any:
        restored.append(cls.__name__)
        return real(cls, directory, params)

    monkeypatch.setattr(LogisticRegressionClassifier, "load", classmethod(spy))

    def change(manifest: dict[str, Any]) -> None:
        manifest["pipeline"][-1]["max_iter"] = "many"  # the last step's parameters are invalid

    refused(with_manifest(good_archive, tmp_path / "bad.tar.gz", change), "max_iter")
    assert restored == []


def test_manifest_needing_a_newer_engine(good_archive: Path, tmp_path: Path) -> None:
    bad = with_manifest(good_archive, tmp_path / "bad.tar.gz",
                        lambda m: m.update(minimum_compatible_version="99.0.0"))
    refused(bad, "needs nlu_engine 99.0.0 or newer", "upgrade")


def test_manifest_naming_a_folder_the_archive_lacks(good_archive: Path, tmp_path: Path,
                                                    private_tempdir: Path) -> None:
    def change(manifest: dict[str, Any]) -> None:
        manifest["components"][1] = "components/9_Nothing"

    refused(with_manifest(good_archive, tmp_path / "bad.tar.gz", change), "folder 'components/9_Nothing'")
    assert list(private_tempdir.iterdir()) == []


@pytest.mark.parametrize(
    "change",
    [lambda m: m.update(version="0.0.1\nline two"),
     lambda m: m.update(minimum_compatible_version="99\n\n" + " " * 10_000),
     lambda m: m["components"].__setitem__(0, "missing\nfolder" * 1000),
     lambda m: m["pipeline"][0].__setitem__("name", "Bad\nName")],
)
def test_manifest_values_in_refusals_stay_on_one_line(
    good_archive: Path, tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    message = refused(with_manifest(good_archive, tmp_path / "bad.tar.gz", change))
    assert len(message) < 1_500


def test_duplicate_members(good_archive: Path, tmp_path: Path) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", extra=[entry("manifest.json", b"{}")])
    refused(bad, "'manifest.json' clashes with another")


# --- bombs: extraction is bounded by what it writes ----------------------------------------------------
class WriteSpy:
    """Counts the bytes persistence writes to files, through its module-level ``open``."""

    def __init__(self) -> None:
        self.written = 0
        self.opened: list[str] = []

    def open(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = open(file, mode, *args, **kwargs)  # noqa: SIM115 (returned to the caller)
        if "w" in mode or "x" in mode or "a" in mode:
            self.opened.append(str(file))
            spy = self
            real_write = handle.write

            class Counted:
                def __enter__(self) -> Any:
                    handle.__enter__()
                    return self

                def __exit__(self, *exc: Any) -> Any:
                    return handle.__exit__(*exc)

                def write(self, data: bytes) -> int:
                    spy.written += len(data)
                    return int(real_write(data))

            return Counted()
        return handle


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> WriteSpy:
    spy = WriteSpy()
    monkeypatch.setattr(archive_members, "open", spy.open, raising=False)
    return spy


def zeros(name: str, size: int) -> tuple[tarfile.TarInfo, bytes]:
    info, _ = entry(name)
    return info, bytes(size)


def test_a_bomb_is_refused_from_its_declared_sizes_before_anything_is_written(
    good_archive: Path, tmp_path: Path, writes: WriteSpy, private_tempdir: Path
) -> None:
    # the probe, scaled down: a small archive that would unpack to a thousand times its size
    bomb = rebuild(good_archive, tmp_path / "bomb.tar.gz",
                   extra=[zeros("components/2_CountVectorsFeaturizer/huge.npz", 40 * 10**6)])
    assert bomb.stat().st_size < 200_000
    message = refused(bomb, "declares over", "NLU_ENGINE_MAX_UNPACKED_BYTES")
    assert "MB" in message
    assert writes.opened == [] and writes.written == 0
    assert list(private_tempdir.iterdir()) == []
    destination = tmp_path / "out"
    with pytest.raises(ArchiveError):
        persistence.extract_archive(bomb, destination)
    assert not destination.exists()


def test_extraction_stops_at_the_limit_and_leaves_nothing(
    good_archive: Path, tmp_path: Path, writes: WriteSpy
) -> None:
    # the second line of defence: whatever the headers say, writing stops at the limit
    limit = 3 * 10**6
    bomb = rebuild(good_archive, tmp_path / "bomb.tar.gz",
                   extra=[zeros("components/big_a.bin", 2 * 10**6), zeros("components/big_b.bin", 2 * 10**6)])
    destination = tmp_path / "out"
    with gzip.GzipFile(bomb) as stream, tarfile.open(fileobj=archive_members.BoundedReads(stream),
                                                     mode="r:") as tar:
        members = archive_members.scan_members(bomb, tar, destination, limit=10**9)
        with pytest.raises(ArchiveError, match=r"unpacks to over 3\.0 MB"):
            archive_members.extract_members(bomb, tar, members, destination, limit)
    assert 0 < writes.written <= limit
    assert not destination.exists(), "what was written is removed"


def test_a_failed_extraction_keeps_what_was_there(
    good_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scan = archive_members.scan_members
    monkeypatch.setattr(persistence, "scan_members", lambda p, t, d, limit: scan(p, t, d, 10**12))
    destination = tmp_path / "existing"
    destination.mkdir()
    (destination / "keep.txt").write_text("mine")
    bomb = rebuild(good_archive, tmp_path / "bomb.tar.gz", extra=[zeros("components/big.bin", 10**6)])
    with pytest.raises(ArchiveError, match="unpacks to over"):
        persistence.extract_archive(bomb, destination, max_bytes=500_000)
    assert [p.name for p in destination.iterdir()] == ["keep.txt"]


def test_a_member_inside_a_file_member(good_archive: Path, tmp_path: Path) -> None:
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz",
                  extra=[entry("components/a"), entry("components/a/b")])
    refused(bad, "'components/a/b'", "clashes with another")
    bad = rebuild(good_archive, tmp_path / "bad2.tar.gz",
                  extra=[entry("components/c/d"), entry("components/c")])
    refused(bad, "'components/c'", "clashes with another")
    # a folder member after its contents is fine
    info, _ = entry("components/e/f.json", b"{}")
    folder = tarfile.TarInfo("components/e")
    folder.type, folder.mode = tarfile.DIRTYPE, 0o755
    fine = rebuild(good_archive, tmp_path / "fine.tar.gz", extra=[(info, b"{}"), (folder, None)])
    Model.load(fine)


def test_the_limit_is_configurable(
    good_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = good_archive.stat().st_size
    assert persistence.extraction_limit(good_archive) == min(2 * 1024**3, 200 * size)
    assert persistence.extraction_limit(good_archive, max_bytes=123) == 123
    monkeypatch.setenv("NLU_ENGINE_MAX_UNPACKED_BYTES", "1000")
    assert persistence.extraction_limit(good_archive) == 1000
    refused(good_archive, "declares over 1000 bytes")
    big = rebuild(good_archive, tmp_path / "big.tar.gz", extra=[zeros("components/pad.bin", 30 * 10**6)])
    monkeypatch.setenv("NLU_ENGINE_MAX_UNPACKED_BYTES", str(10**8))
    assert Model.load(big).parse("hello there")["intent"]["name"] == "greet"
    for bad in ("lots", "-5", "0"):
        monkeypatch.setenv("NLU_ENGINE_MAX_UNPACKED_BYTES", bad)
        refused(good_archive, "NLU_ENGINE_MAX_UNPACKED_BYTES", "positive number of bytes")


def test_a_huge_pax_header_is_refused(good_archive: Path, tmp_path: Path) -> None:
    info, data = entry("components/x.json", b"{}")
    info.pax_headers = {"comment": "x" * (20 * 1024**2)}  # tarfile would read it whole
    bad = rebuild(good_archive, tmp_path / "bad.tar.gz", extra=[(info, data)])
    refused(bad, "has a header of")


def test_data_after_the_last_member_is_refused(good_archive: Path, tmp_path: Path) -> None:
    raw = gzip.decompress(good_archive.read_bytes())
    bad = tmp_path / "tail.tar.gz"
    bad.write_bytes(gzip.compress(raw + bytes(4 * 1024**2)))
    refused(bad, "data after its last member")


# --- atomic writes ----------------------------------------------------------------------------------
class ExplodingClassifier(IntentClassifier):
    """Fails in the middle of training."""

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
    exploding = ComponentSpec("ExplodingClassifier", ExplodingClassifier, ExplodingClassifier.Config())
    config.steps.insert(1, exploding)
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


# --- an archive written by an earlier version -----------------------------------------------------
OLD_ARCHIVE = PROJECT_ROOT / "tests" / "fixtures" / "archive_0.1.0"


def _same_results(got: Any, recorded: Any, path: str = "results") -> list[str]:
    """Where ``got`` differs from ``recorded``: every key, list item and string equal, floats
    within float32 rounding (the sums' order differs between NumPy, ONNX Runtime and CPUs)."""
    if isinstance(recorded, float) and isinstance(got, (int, float)):
        close = math.isclose(got, recorded, rel_tol=1e-5, abs_tol=1e-6)
        return [] if close else [f"{path}: {got} != {recorded}"]
    if isinstance(recorded, dict) and isinstance(got, dict):
        if set(got) != set(recorded):
            return [f"{path}: keys {sorted(got)} != {sorted(recorded)}"]
        return [d for k in recorded for d in _same_results(got[k], recorded[k], f"{path}.{k}")]
    if isinstance(recorded, list) and isinstance(got, list):
        if len(got) != len(recorded):
            return [f"{path}: {len(got)} items != {len(recorded)}"]
        pairs = enumerate(zip(got, recorded, strict=True))
        return [d for i, (g, r) in pairs for d in _same_results(g, r, f"{path}[{i}]")]
    return [] if got == recorded else [f"{path}: {got!r} != {recorded!r}"]


def test_archive_of_0_1_0_predicts_as_recorded() -> None:
    """``model.tar.gz`` was trained from ``config.yml`` and ``nlu.yml`` (every built-in component
    that needs no optional model) by nlu_engine 0.1.0, which took hyperparameters as ``__init__``
    arguments; ``expected.json`` holds its parse results as that version gave them."""
    expected = json.loads((OLD_ARCHIVE / "expected.json").read_text(encoding="utf-8"))
    results = Model.load(OLD_ARCHIVE / "model.tar.gz").parse_batch(expected["texts"])
    assert _same_results(results, expected["results"]) == []


def test_an_archive_from_before_names_keeps_the_class_and_place_names_it_stored() -> None:
    """0.1.0 kept no names: its components (features, scores) stay known as it stored them."""
    model = Model.load(OLD_ARCHIVE / "model.tar.gz")
    assert persistence.STEP_NAMES not in model.manifest
    assert [c.pipeline_name() for c in model.pipeline.components[3:6]] == [
        "CountVectorsFeaturizer_3", "CountVectorsFeaturizer_4", "LogisticRegressionClassifier_5"]
    message = model.pipeline.process([Message(text="hello there")])[0]
    assert {"CountVectorsFeaturizer_3", "CountVectorsFeaturizer_4"} <= {f.origin for f in message.features}


def test_an_archive_keeps_the_names_and_one_without_them_loads_and_fine_tunes_with_its_positions(
    good_archive: Path, tmp_path: Path, tiny_data_path: Path, tiny_texts: list[str]
) -> None:
    manifest = manifest_of(good_archive)
    assert manifest[persistence.STEP_NAMES] == [
        "WhitespaceTokenizer", "CountVectorsFeaturizer-1", "CountVectorsFeaturizer-2",
        "LogisticRegressionClassifier"]
    named = Model.load(good_archive)
    assert [c.pipeline_name() for c in named.pipeline.components] == manifest[persistence.STEP_NAMES]
    # the same archive as a version before names would have written it
    del manifest[persistence.STEP_NAMES]
    old = rebuild(good_archive, tmp_path / "old.tar.gz",
                  replace={"manifest.json": json.dumps(manifest).encode()})
    loaded = Model.load(old)
    assert [c.pipeline_name() for c in loaded.pipeline.components][1:3] == [
        "CountVectorsFeaturizer_1", "CountVectorsFeaturizer_2"]
    assert loaded.parse_batch(tiny_texts) == named.parse_batch(tiny_texts)
    # fine-tuned, it keeps the names its components' state was stored with
    tuned = train(LOGREG, tiny_data_path, out=tmp_path / "tuned", finetune=old, log=None)
    assert persistence.STEP_NAMES not in manifest_of(tuned)
    assert Model.load(tuned).pipeline.components[2].pipeline_name() == "CountVectorsFeaturizer_2"
    tuned = train(LOGREG, tiny_data_path, out=tmp_path / "tuned_named", finetune=good_archive, log=None)
    assert manifest_of(tuned)[persistence.STEP_NAMES] == named.manifest[persistence.STEP_NAMES]


#: parameters every intent classifier gained after 0.1.0 (calibration), at the front of its config
#: (and CountVectorsFeaturizer gained ``token_pattern``, read as Rasa 3 reads it: not at all)
ADDED_SINCE_0_1_0 = ("calibration", "calibration_share", "out_of_scope_intent", "calibration_refit_below",
                     "calibration_join_share", "sentence_head_below", "head_transformer_layers",
                     "head_transformer_entities", "contrastive_pairs", "entity_calibration",
                     "language_tokenizer", "token_features", "entity_swaps")


def test_manifest_pipeline_format_is_unchanged() -> None:
    """A config resolves to the same parameters, in the same order, as 0.1.0 stored them, but
    for the parameters added since (which an old manifest lacks and loading fills in)."""
    stored = manifest_of(OLD_ARCHIVE / "model.tar.gz")["pipeline"]
    resolved = load_config(OLD_ARCHIVE / "config.yml").as_dict()["pipeline"]
    for spec in resolved:
        if spec["name"] == "CountVectorsFeaturizer":
            assert spec.pop("token_pattern") is None
        if spec["name"] == "ResponseSelector":  # its default became Rasa's L2 rule (issue 40)
            assert spec["sparse_regularization"] == "rasa"
            spec["sparse_regularization"] = "all_rows"
    added = [{k: v for k, v in spec.items() if k in ADDED_SINCE_0_1_0} for spec in resolved]
    common = '"calibration": true, "calibration_share": 0.1, "out_of_scope_intent": null'
    # DIET (and so ResponseSelector) also gained calibration_refit_below, calibration_join_share
    # sentence_head_below, head_transformer_layers and contrastive_pairs; WhitespaceTokenizer
    # language_tokenizer
    # (issue 49)
    assert {json.dumps(a) for a in added if a} <= {
        f"{{{common}}}", '{"language_tokenizer": true}',
        f'{{{common}, "calibration_refit_below": 2000, "calibration_join_share": 0.25, '
        '"sentence_head_below": 50, "head_transformer_layers": "auto", "head_transformer_entities": '
        '1000, "contrastive_pairs": 0, "entity_calibration": "when_held_out", "entity_swaps": "auto"}'}
    assert any("calibration_refit_below" in a for a in added)
    without = [{k: v for k, v in spec.items() if k not in ADDED_SINCE_0_1_0} for spec in resolved]
    assert json.dumps(without) == json.dumps(stored)
