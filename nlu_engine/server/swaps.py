"""Model swaps shared by the workers of one ``serve --workers N``.

Each worker holds its own copy of the model, and ``PUT /model`` reaches one of them. That
worker loads the archive (a broken one is refused there, and nothing changes anywhere), swaps
it in and then announces it in the swap file, a small JSON file the workers share
(``{"model_file": ...}``, replaced atomically). Every worker watches the file and loads what it
names, so all of them answer with the new model within about a second of the 204; each keeps
answering with its old model while it loads the new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlu_engine.contract.errors import NLUError

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.server.state import ServerState

logger = logging.getLogger("nlu_engine.server")

POLL_SECONDS = 0.5


def announce(swap_file: Path, model_file: Path) -> None:
    """Name ``model_file`` in ``swap_file`` for the other workers (written whole, then renamed)."""
    fd, tmp = tempfile.mkstemp(dir=swap_file.parent, prefix=".swap-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"model_file": str(model_file)}, handle)
    os.replace(tmp, swap_file)


def announced(swap_file: Path) -> Path | None:
    """The archive the swap file names; None while there is none (or it cannot be read)."""
    try:
        data: Any = json.loads(swap_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = data.get("model_file") if isinstance(data, dict) else None
    return Path(name) if isinstance(name, str) else None


async def follow(state: ServerState, swap_file: Path) -> None:
    """Load each archive the swap file names, until cancelled (at shutdown)."""
    from nlu_engine.server.state import load_model

    seen: tuple[int, int] | None = None
    while True:
        with contextlib.suppress(OSError):
            stat = swap_file.stat()
            if (stat.st_mtime_ns, stat.st_size) != seen:
                seen = (stat.st_mtime_ns, stat.st_size)
                async with state.lock():
                    path = announced(swap_file)  # read under the lock: the newest announcement wins
                    if path is not None and path != state.model_path:
                        try:
                            state.model = await asyncio.to_thread(load_model, path, state.allow_components)
                            state.model_path = path
                        except NLUError as error:  # it loaded in the announcing worker; not here
                            logger.error("could not follow the swap to %s: %s", path.name, error)
        await asyncio.sleep(POLL_SECONDS)
