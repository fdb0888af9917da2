"""The HTTP API: a drop-in for ``rasa run --enable-api`` (NLU part), as a Starlette ASGI app.

Endpoints (Rasa's first): ``GET /``, ``GET /version``, ``GET /status``, ``POST /model/parse``,
``PUT /model``, ``DELETE /model``; beyond Rasa: ``POST /model/parse/batch``, ``GET /health``
and ``GET /openapi.json``. With a token or JWT secret configured, every endpoint but ``/``,
``/version``, ``/health`` and ``/openapi.json`` needs it. Errors are JSON in Rasa's shape
(``status: failure``, ``reason``, ``message``, ``code``) and never carry a traceback; a client's
mistake is logged, if at all, as one line; a 405 carries an ``Allow`` header.

A model (at startup or by ``PUT /model``) may import registered components and the custom
component classes the server was started allowing, nothing else.

The model is loaded once (at startup or by ``PUT /model``), warmed up with one parse, and
swapped atomically: requests already batched finish on the old model, later ones use the new.
Parsing runs on a worker thread through :class:`~nlu_engine.server.batching.MicroBatcher`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route

from nlu_engine.server import endpoints
from nlu_engine.server.auth import Authenticator
from nlu_engine.server.http import error_response
from nlu_engine.server.state import ServerState, load_model, startup_load

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.assembly.model import Model

__all__ = ["create_app", "load_model"]

DEFAULT_MAX_BODY = 1_000_000
# DIET's time and memory grow with the square of a message's length (2,000 characters of
# one-letter words are 1,000 tokens); longer messages are refused with 413.
DEFAULT_MAX_TEXT_CHARS = 2_000
DEFAULT_MAX_BATCH_TEXTS = 1_000
# A body still arriving after this many seconds (a client sending a byte a second) gets a 408
# and its connection closed, so it holds a connection no longer than that.
DEFAULT_BODY_TIMEOUT = 30.0

ROUTES = [
    Route("/", endpoints.hello, methods=["GET"]),
    Route("/version", endpoints.version, methods=["GET"]),
    Route("/health", endpoints.health, methods=["GET"]),
    Route("/openapi.json", endpoints.openapi, methods=["GET"]),
    Route("/status", endpoints.status, methods=["GET"]),
    Route("/model/parse", endpoints.parse, methods=["POST"]),
    Route("/model/parse/batch", endpoints.parse_batch, methods=["POST"]),
    Route("/model", endpoints.replace_model, methods=["PUT"]),
    Route("/model", endpoints.unload_model, methods=["DELETE"]),
]


def _cors_middleware(cors: list[str] | None) -> list[Middleware]:
    """CORS for the origins ``serve --cors`` names (none: no middleware)."""
    if not cors:
        return []
    return [Middleware(CORSMiddleware, allow_origins=list(cors),
                       allow_methods=["GET", "POST", "PUT", "DELETE", "OPTIONS"],
                       allow_headers=["Authorization", "Content-Type"])]


def create_app(
    model_path: str | Path | None = None,
    models_dir: str | Path | None = None,
    auth_token: str | None = None,
    jwt_secret: str | None = None,
    cors: list[str] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    *,
    model: Model | None = None,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    max_batch_texts: int = DEFAULT_MAX_BATCH_TEXTS,
    allow_reload: bool = True,
    batch_size: int = 64,
    batch_wait: float = 0.0015,
    allow_components: Iterable[str] = (),
    worker_id: str | None = None,
    message_log: dict[str, Any] | None = None,
    runtime: str | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    swap_file: str | Path | None = None,
) -> Starlette:
    """The ASGI app.

    ``model`` (already loaded) wins over ``model_path``; otherwise ``model_path`` (an archive,
    or a folder whose newest archive is taken) is loaded at startup. A folder without archives,
    or an archive that fails to load at startup, leaves the server running without a model
    (503 on parse) until ``PUT /model``. ``models_dir`` is the only folder ``PUT /model`` may load
    from (default: the folder of ``model_path``). ``allow_components`` names the custom component
    classes a model may import, at startup and on ``PUT /model``; nothing else is imported.
    ``worker_id`` names this process in ``/status`` (default: ``host:pid``). ``message_log``:
    the settings of ``serve --log-messages`` (:class:`~nlu_engine.server.message_log.LogSettings`
    as a dict), whose writer runs from startup to shutdown; None logs nothing. ``runtime``:
    the parse runtime of every model loaded (``serve --runtime``; None: each archive's own).
    ``body_timeout``: the seconds a request body may take to arrive (408 after that).
    ``swap_file``: shared by the workers of one ``serve --workers N``, through which
    ``PUT /model`` reaches all of them.
    """
    from nlu_engine.assembly.registry import allowed_components

    path = Path(model_path) if model_path is not None else (model.path if model is not None else None)
    if models_dir is None and path is not None:
        models_dir = path if path.is_dir() else path.parent
    state = ServerState(
        model=model,
        model_path=path,
        models_dir=Path(models_dir) if models_dir is not None else None,
        max_body=max_body,
        max_text_chars=max_text_chars,
        max_batch_texts=max_batch_texts,
        allow_reload=allow_reload,
        batch_size=batch_size,
        batch_wait=batch_wait,
        allow_components=allowed_components(allow_components),
        auth=Authenticator(auth_token, jwt_secret),
        worker_id=worker_id,
        runtime=runtime,
        body_timeout=body_timeout,
        swap_file=Path(swap_file) if swap_file is not None else None,
    )
    if message_log is not None:
        from nlu_engine.server.message_log import LogSettings, MessageLog
        from nlu_engine.server.message_store import open_store

        state.message_log = MessageLog(LogSettings.from_dict(message_log), open_store, state.worker_id)

    app = Starlette(
        routes=ROUTES,
        middleware=_cors_middleware(cors),
        exception_handlers={HTTPException: http_error},
        lifespan=_lifespan(state),
    )
    app.state.nlu = state
    return app


def _lifespan(state: ServerState) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """Startup (the message log's writer, the model) and shutdown (the batcher, then the log,
    whose queue is written first)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log = state.message_log
        if log is not None:
            await asyncio.to_thread(log.start)
        if state.model is None and state.model_path is not None:
            await startup_load(state)
        follower = None
        if state.swap_file is not None:
            from nlu_engine.server.swaps import follow

            follower = asyncio.create_task(follow(state, state.swap_file))
        try:
            yield
        finally:
            if follower is not None:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
            state.batcher.close()
            if log is not None:
                await asyncio.to_thread(log.close)

    return lifespan


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's routing errors (404, 405) as Rasa's error JSON; a 405 lists what is allowed."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404:
        return error_response(404, f"no endpoint {request.url.path[:200]}; see /openapi.json")
    if status == 405:  # RFC 9110: a 405 carries Allow, the methods the resource supports
        routes = request.app.router.routes
        allow = sorted({m for r in routes if r.matches(request.scope)[0] != Match.NONE
                        for m in (r.methods or ())})
        return error_response(
            405, f"method {request.method} is not allowed on {request.url.path[:200]}; "
                 f"allowed: {', '.join(allow)}", headers={"Allow": ", ".join(allow)}
        )
    return error_response(status, exc.detail if isinstance(exc, HTTPException) else "error")
