"""Reading a model archive's ``.npz`` files without letting them inflate past a budget.

An ``.npz`` is a zip of ``.npy`` files, and ``np.load`` inflates each member in memory, so a small
compressed file could claim gigabytes after the archive's own extraction limit has passed it.
:func:`load_npz` sums the members' declared sizes first and refuses a file that would inflate
past :data:`RATIO_LIMIT` times its own size (or :data:`MIN_BUDGET`, for tiny files), and an array
whose header claims more bytes than its member holds. Object arrays are never unpickled.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np

from nlu_engine.contract.errors import ArchiveError

RATIO_LIMIT = 200  # saved weights compress a few times at most
MIN_BUDGET = 1024**2  # the budget of a tiny file, in bytes


def load_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` at ``path``, after checking what it would inflate to."""
    where = f"{path.parent.name}/{path.name}"
    budget = max(MIN_BUDGET, RATIO_LIMIT * path.stat().st_size)
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        total = sum(info.file_size for info in infos)
        if total > budget:
            raise ArchiveError(
                f"model file '{where}' would inflate to {total} bytes, over the {budget} its size "
                "allows; refusing to load (retrain the model)"
            )
        for info in infos:
            _check_header(archive, info, where)
    with np.load(path, allow_pickle=False) as arrays:
        return {name: arrays[name] for name in arrays.files}


def _check_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> None:
    """Refuse an ``.npy`` member whose header declares more data than the member holds."""
    if not info.filename.endswith(".npy"):
        return
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(member)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(member)
    if math.prod(shape) * dtype.itemsize > info.file_size:
        raise ArchiveError(
            f"model file '{where}': array {info.filename[:80]!r} declares more data than it holds; "
            "refusing to load (retrain the model)"
        )
