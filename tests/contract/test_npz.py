"""``load_npz``: the one reader of an archive's arrays refuses anything but finite numbers, and
arrays that are not what the component records, in one line naming the file and the array."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.contract.errors import ArchiveMemberError
from nlu_engine.contract.npz import Expected, load_npz

PACKAGE = Path(__file__).resolve().parents[2] / "nlu_engine"


def saved(tmp_path: Path, **arrays: np.ndarray) -> Path:
    path = tmp_path / "0_Component" / "weights.npz"
    path.parent.mkdir(exist_ok=True)
    np.savez(path, **arrays)
    return path


def refused(path: Path, fragment: str, expected: dict[str, Expected] | None = None) -> str:
    with pytest.raises(ArchiveMemberError) as info:
        load_npz(path, expected)
    message = str(info.value)
    assert "\n" not in message and message.startswith("model file '0_Component/weights.npz': "), message
    assert fragment in message and message.endswith("(retrain the model or restore its archive)"), message
    return message


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_a_non_finite_float_is_refused(tmp_path: Path, value: float, dtype: type) -> None:
    poisoned = np.zeros((3, 2), dtype)
    poisoned[2, 1] = value
    refused(saved(tmp_path, good=np.ones(2), bad=poisoned), "array 'bad' holds NaN or infinite values")


@pytest.mark.parametrize("array", [np.array(["a"]), np.array([1 + 2j]), np.array([(1, 2.0)], "i4,f8")])
def test_anything_but_numbers_is_refused(tmp_path: Path, array: np.ndarray) -> None:
    refused(saved(tmp_path, weird=array), "array 'weird' holds")


def test_a_member_that_is_not_an_array_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path, a=np.ones(1))
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("notes.txt", b"hello")
    refused(path, "holds 'notes.txt', which is not an array")


def test_the_recorded_shape_dtype_and_presence_are_checked(tmp_path: Path) -> None:
    path = saved(tmp_path, kernel=np.zeros((4, 3), np.float16), scale=np.ones(4, np.float32))
    good = {"kernel": Expected((4, 3), ("float16", "float32")), "scale": Expected((4,), "float32")}
    assert set(load_npz(path, good)) == {"kernel", "scale"}
    refused(path, "array 'kernel' has shape (4, 3), not the (4, 4) recorded", {"kernel": Expected((4, 4))})
    refused(path, "array 'scale' is float32, not the float16 the component stores",
            {"scale": Expected(dtype="float16")})
    refused(path, "lacks the array 'bias'", {"bias": Expected()})
    assert set(load_npz(path, {"bias": Expected(required=False)})) == {"kernel", "scale"}


def test_a_byte_order_is_not_a_dtype(tmp_path: Path) -> None:
    path = saved(tmp_path, kernel=np.ones(3, ">f4"))
    assert load_npz(path, {"kernel": Expected(dtype="float32")})["kernel"].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("keep", [0, 10, 100, -1])
def test_a_truncated_file_is_one_line(tmp_path: Path, keep: int) -> None:
    path = saved(tmp_path, kernel=np.arange(100.0))
    data = path.read_bytes()
    path.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    refused(path, "is not a readable .npz")


def test_a_corrupt_member_is_one_line(tmp_path: Path) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        one = io.BytesIO()
        np.save(one, np.arange(1000.0))
        archive.writestr("kernel.npy", one.getvalue())
    data = bytearray(out.getvalue())
    data[200:260] = bytes(60)  # inside the deflated data
    path = tmp_path / "0_Component" / "weights.npz"
    path.parent.mkdir()
    path.write_bytes(bytes(data))
    refused(path, "is not a readable .npz")


def test_every_npz_of_the_package_is_read_by_load_npz() -> None:
    """No module but contract/npz.py calls np.load: an archive's arrays cannot skip the checks."""
    calls = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in PACKAGE.rglob("*.py") if path.name != "npz.py" or path.parent.name != "contract"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\b(np|numpy)\.load\(|from numpy import .*\bload\b", line)
    ]
    assert calls == []
