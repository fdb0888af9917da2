"""Reading a model archive's ``.npz`` files: every array a component loads passes here.

An ``.npz`` is a zip of ``.npy`` files, and ``np.load`` inflates each member in memory, so a small
compressed file could claim gigabytes after the archive's own extraction limit has passed it.
:func:`load_npz` sums the members' declared sizes first and refuses a file that would inflate
past :data:`RATIO_LIMIT` times its own size (or :data:`MIN_BUDGET`, for tiny files), and an array
whose header claims more bytes than its member holds.

An archive's weights reach NumPy and ONNX Runtime (native code), so each array is also checked
before any component sees it: numbers only (no object, string or structured arrays: nothing is
ever unpickled), no NaN or infinity in a float array, and, where the component says what it
expects (:class:`Expected`, from its own JSON: DIET's ``weight_shapes``), the shape and dtype
it records. A refusal is an :class:`ArchiveMemberError`, one line naming the file and the array.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nlu_engine.contract.errors import ArchiveError, ArchiveMemberError

RATIO_LIMIT = 200  # saved weights compress a few times at most
MIN_BUDGET = 1024**2  # the budget of a tiny file, in bytes
NUMBER_KINDS = "biuf"  # bool, int, unsigned, float: what a component may store
ADVICE = "refusing to load (retrain the model or restore its archive)"  # ends every refusal


@dataclass(frozen=True)
class Expected:
    """What a component records about one of its arrays: its shape and dtype (None: any; a
    tuple of dtypes: any of them), and whether the file must hold it."""

    shape: tuple[int, ...] | None = None
    dtype: str | tuple[str, ...] | None = None
    required: bool = True

    def dtypes(self) -> tuple[np.dtype, ...]:
        names = (self.dtype,) if isinstance(self.dtype, str) else self.dtype or ()
        return tuple(np.dtype(name) for name in names)


def load_npz(path: Path, expected: Mapping[str, Expected] | None = None) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, after checking what it would inflate to, that
    each is finite numbers and that those named in ``expected`` are there as described
    (ArchiveMemberError otherwise). Headers are checked before any array is inflated."""
    budget = max(MIN_BUDGET, RATIO_LIMIT * path.stat().st_size)
    expected = expected or {}
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            total = sum(info.file_size for info in infos)
            if total > budget:
                raise refusal(path, f"would inflate to {total} bytes, over the {budget} its size allows")
            found = {_array_name(info.filename) for info in infos}
            for name, want in expected.items():
                if want.required and name not in found:
                    raise refusal(path, f"lacks the array {shown(name)}")
            for info in infos:
                _check_header(path, archive, info, expected)
        with np.load(path, allow_pickle=False) as arrays:
            loaded = {name: arrays[name] for name in arrays.files}
    except ArchiveError:
        raise
    except Exception as error:  # zipfile, zlib and numpy raise their own types for a broken file
        text = f"{type(error).__name__}: {error}"[:120]
        detail = text if text.isprintable() else repr(text)
        raise refusal(path, f"is not a readable .npz ({detail})") from None
    for name, array in loaded.items():
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise refusal(path, f"array {shown(name)} holds NaN or infinite values")
    return loaded


def refusal(path: Path, problem: str) -> ArchiveMemberError:
    """The one-line error for the file at ``path`` (named by its component's folder) and its
    ``problem`` ("array 'x' holds NaN or infinite values")."""
    return ArchiveMemberError(f"model file '{path.parent.name}/{path.name}': {problem}; {ADVICE}")


def _check_header(
    path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, expected: Mapping[str, Expected]
) -> None:
    """Refuse an ``.npy`` member whose header declares more data than the member holds, anything
    but numbers, or another shape or dtype than ``expected`` records."""
    if not info.filename.endswith(".npy"):
        raise refusal(path, f"holds {shown(info.filename)}, which is not an array")
    name = _array_name(info.filename)
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(member)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    if dtype.hasobject or dtype.kind not in NUMBER_KINDS or dtype.fields is not None:
        raise refusal(path, f"array {shown(name)} holds {shown(str(dtype))} values, not numbers")
    if math.prod(shape) * dtype.itemsize > info.file_size:
        raise refusal(path, f"array {shown(name)} declares more data than it holds")
    want = expected.get(name)
    if want is None:
        return
    if want.shape is not None and tuple(shape) != tuple(want.shape):
        raise refusal(
            path, f"array {shown(name)} has shape {_shape(shape)}, not the {_shape(want.shape)} recorded"
        )
    allowed = want.dtypes()
    if allowed and dtype.newbyteorder("=") not in allowed:
        names = " or ".join(d.name for d in allowed)
        raise refusal(path, f"array {shown(name)} is {dtype.name}, not the {names} the component stores")


def _array_name(filename: str) -> str:
    return filename.removesuffix(".npy")


def _shape(shape: tuple[int, ...]) -> str:
    text = str(tuple(int(n) for n in shape))
    return text if len(text) <= 80 else text[:80] + "...)"


def shown(value: object) -> str:
    """A name from a file, quoted for a one-line message: printable, at most 80 characters."""
    text = str(value)
    if text.isprintable() and len(text) <= 80:
        return f"'{text}'"
    return repr(text[:80]) + ("..." if len(text) > 80 else "")
