"""Finding a model's folder on disk without walking more of the disk than a package holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

#: how many folder levels below a given path a model's files may sit (an installed package
#: keeps them at most two levels down)
MAX_SEARCH_DEPTH = 2


def shallowest_folder(
    root: Path, matches: Callable[[Path], bool], max_depth: int = MAX_SEARCH_DEPTH
) -> Path | None:
    """``root`` or the shallowest folder at most ``max_depth`` levels below it for which
    ``matches`` is true (ties broken by name); links to folders are not followed."""
    level = [root]
    for depth in range(max_depth + 1):
        found = sorted(folder for folder in level if matches(folder))
        if found:
            return found[0]
        if depth == max_depth:
            break
        below: list[Path] = []
        for folder in level:
            try:
                below.extend(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
            except OSError:
                continue
        level = below
    return None
