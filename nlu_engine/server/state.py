"""What the endpoints share: the current model, the batcher, the limits and the authenticator."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nlu_engine.contract.errors import NLUError
from nlu_engine.server.auth import Authenticator
from nlu_engine.server.batching import MicroBatcher
from nlu_engine.server.http import RequestError

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.assembly.model import Model
    from nlu_engine.server.message_log import MessageLog

logger = logging.getLogger("nlu_engine.server")

WARMUP_TEXT = "hello"


def load_model(path: Path, allow_components: frozenset[str] = frozenset(),
               runtime: str | None = None) -> Model:
    """Load an archive and parse one message, so the first request pays no tracing cost.

    ``allow_components``: the custom component classes the archive may import; ``runtime``:
    the parse runtime, overriding the archive's (``serve --runtime``).
    """
    from nlu_engine.assembly.model import Model

    start = time.perf_counter()
    model = Model.load(path, allow_components, runtime)
    model.parse(WARMUP_TEXT)
    logger.info("loaded model %s in %.2f s", model.path.name, time.perf_counter() - start)
    return model


class ServerState:
    """What the endpoints share: the current model, the batcher, the limits and the message log."""

    def __init__(
        self,
        model: Model | None,
        model_path: Path | None,
        models_dir: Path | None,
        max_body: int,
        max_text_chars: int,
        max_batch_texts: int,
        allow_reload: bool,
        batch_size: int,
        batch_wait: float,
        allow_components: frozenset[str] = frozenset(),
        auth: Authenticator | None = None,
        worker_id: str | None = None,
        runtime: str | None = None,
        body_timeout: float = 30.0,
        swap_file: Path | None = None,
    ) -> None:
        self.model = model
        self.runtime = runtime  # serve --runtime: every model loaded parses in it
        # which process answered: several serve one port (--workers, Ray Serve replicas)
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.auth = auth or Authenticator(None, None)
        self.allow_components = allow_components
        self.model_path = model_path
        self.models_dir = models_dir.resolve() if models_dir is not None else None
        self.max_body = max_body
        self.body_timeout = body_timeout  # seconds a request body may take to arrive (else 408)
        self.max_text_chars = max_text_chars
        self.max_batch_texts = max_batch_texts
        self.allow_reload = allow_reload
        self.batcher = MicroBatcher(
            lambda: self.model,
            max_batch=batch_size,
            max_wait=batch_wait,
            max_cost=max(max_text_chars, 1) ** 2,  # one message of the longest kind per batch
        )
        self.reload_lock: asyncio.Lock | None = None
        # serve --workers N: the file through which PUT /model reaches every worker (swaps.py)
        self.swap_file = swap_file
        self.started = time.time()
        self.message_log: MessageLog | None = None  # serve --log-messages

    def lock(self) -> asyncio.Lock:
        """The lock a model swap holds while it loads (made in the server's event loop)."""
        if self.reload_lock is None:
            self.reload_lock = asyncio.Lock()
        return self.reload_lock

    def require_model(self) -> Model:
        model = self.model
        if model is None:
            raise RequestError(503, "no model is loaded; load one with PUT /model or restart with -m")
        return model

    def resolve_model_file(self, name: Any) -> Path:
        """A ``model_file`` named by a client, accepted only inside the models folder."""
        if self.models_dir is None:
            raise RequestError(409, "this server has no models folder; restart it with -m FOLDER")
        if not isinstance(name, str) or not name.strip():
            raise RequestError(400, "'model_file' must be the name of an archive in the models folder")
        if "://" in name or "\x00" in name:
            raise RequestError(400, "'model_file' must name an archive inside the models folder, not a URL")
        candidate = Path(name)
        path = (candidate if candidate.is_absolute() else self.models_dir / candidate).resolve()
        if not path.is_relative_to(self.models_dir) or path == self.models_dir:
            raise RequestError(
                400, f"'model_file' {name!r} is outside the models folder; name an archive in it"
            )
        if not path.name.endswith(".tar.gz"):
            raise RequestError(400, f"'model_file' {name!r} is not a .tar.gz model archive")
        if not path.is_file():
            raise RequestError(404, f"no model archive {name!r} in the models folder")
        return path


async def startup_load(state: ServerState) -> None:
    """Load ``state.model_path`` (a folder: its newest archive); on failure run without a model."""
    from nlu_engine.assembly.persistence import newest_archive

    path = state.model_path
    assert path is not None
    try:
        if path.is_dir():
            path = newest_archive(path)
        state.model = await asyncio.to_thread(load_model, path, state.allow_components, state.runtime)
        state.model_path = path
    except NLUError as error:
        logger.error("no model loaded: %s; the server answers 503 until PUT /model", error)
