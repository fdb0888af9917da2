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
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Match, Route

from nlu_engine import MINIMUM_COMPATIBLE_VERSION, __version__
from nlu_engine.errors import NLUError
from nlu_engine.server.auth import Authenticator
from nlu_engine.server.batching import MicroBatcher, NoModelError
from nlu_engine.server.openapi import openapi_document

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.model import Model

logger = logging.getLogger("nlu_engine.server")

DEFAULT_MAX_BODY = 1_000_000
# DIET's time and memory grow with the square of a message's length (2,000 characters of
# one-letter words are 1,000 tokens); longer messages are refused with 413.
DEFAULT_MAX_TEXT_CHARS = 2_000
DEFAULT_MAX_BATCH_TEXTS = 1_000
WARMUP_TEXT = "hello"

Endpoint = Callable[[Request], Awaitable[Response]]


class RequestError(Exception):
    """A client's mistake: answered with ``status`` and a one-line message, never a traceback."""

    def __init__(self, status: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason or _REASONS.get(status, "Error")


_REASONS = {
    400: "BadRequest",
    401: "NotAuthenticated",
    403: "NotAuthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "PayloadTooLarge",
    500: "InternalError",
    503: "ServiceUnavailable",
}


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(data, ensure_ascii=False).encode("utf-8")
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def error_response(
    status: int, message: str, reason: str | None = None, headers: dict[str, str] | None = None
) -> Response:
    """Rasa's error JSON (``rasa.server.ErrorResponse``)."""
    body = {
        "version": __version__,
        "status": "failure",
        "message": message,
        "reason": reason or _REASONS.get(status, "Error"),
        "details": {},
        "help": None,
        "code": status,
    }
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return json_response(body, status, headers)


def load_model(path: Path, allow_components: frozenset[str] = frozenset()) -> Model:
    """Load an archive and parse one message, so the first request pays no tracing cost.

    ``allow_components``: the custom component classes the archive may import.
    """
    from nlu_engine.model import Model

    start = time.perf_counter()
    model = Model.load(path, allow_components)
    model.parse(WARMUP_TEXT)
    logger.info("loaded model %s in %.2f s", model.path.name, time.perf_counter() - start)
    return model


class ServerState:
    """What the endpoints share: the current model, the batcher and the limits."""

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
    ) -> None:
        self.model = model
        self.allow_components = allow_components
        self.model_path = model_path
        self.models_dir = models_dir.resolve() if models_dir is not None else None
        self.max_body = max_body
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
        self.started = time.time()

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


async def read_json(request: Request, limit: int) -> Any:
    """The request body as JSON; 413 over ``limit`` bytes, 400 when it is not JSON."""
    length = request.headers.get("content-length")
    if length is not None:
        try:
            declared = int(length)
        except ValueError:
            raise RequestError(400, "invalid Content-Length header") from None
        if declared > limit:
            raise RequestError(413, f"request body is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(413, f"request body is over the limit of {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise RequestError(400, "the client closed the connection before sending the body") from None
    body = b"".join(chunks)
    if not body.strip():
        raise RequestError(400, "empty request body; send JSON such as {\"text\": \"hello\"}")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        detail = str(error).splitlines()[0][:200] if isinstance(error, ValueError) else "nested too deeply"
        raise RequestError(400, f"request body is not valid JSON ({detail})") from None


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
) -> Starlette:
    """The ASGI app.

    ``model`` (already loaded) wins over ``model_path``; otherwise ``model_path`` (an archive,
    or a folder whose newest archive is taken) is loaded at startup. A folder without archives,
    or an archive that fails to load at startup, leaves the server running without a model
    (503 on parse) until ``PUT /model``. ``models_dir`` is the only folder ``PUT /model`` may load
    from (default: the folder of ``model_path``). ``allow_components`` names the custom component
    classes a model may import, at startup and on ``PUT /model``; nothing else is imported.
    """
    from nlu_engine.registry import allowed_components

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
    )
    auth = Authenticator(auth_token, jwt_secret)

    def endpoint(protected: bool) -> Callable[[Endpoint], Endpoint]:
        """Auth (when ``protected``) and the translation of errors into Rasa's error JSON."""

        def wrap(function: Endpoint) -> Endpoint:
            async def handler(request: Request) -> Response:
                try:
                    if protected and not auth.check(
                        request.query_params.get("token"), request.headers.get("authorization")
                    ):
                        raise RequestError(401, "User is not authenticated: pass ?token= or an "
                                                "'Authorization: Bearer' header")
                    return await function(request)
                except RequestError as error:
                    return error_response(error.status, error.message, error.reason)
                except NoModelError:
                    return error_response(503, "no model is loaded; load one with PUT /model")
                except Exception as error:  # a bug, not the client's fault: logged, not shown
                    logger.exception("internal error on %s %s", request.method, request.url.path)
                    return error_response(500, f"internal error ({type(error).__name__}); see the server log")

            handler.__name__ = function.__name__
            handler.__doc__ = function.__doc__
            return handler

        return wrap

    def check_text(text: Any, field: str) -> str:
        if not isinstance(text, str):
            raise RequestError(400, f"'{field}' must be a string, got {type(text).__name__}")
        if len(text) > state.max_text_chars:
            raise RequestError(
                413, f"'{field}' has {len(text)} characters; the limit is {state.max_text_chars}"
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestError(400, f"'{field}' is not valid Unicode (a lone surrogate escape)") from None
        return text

    @endpoint(protected=False)
    async def hello(request: Request) -> Response:
        return PlainTextResponse(f"Hello from nlu_engine: {__version__}")

    @endpoint(protected=False)
    async def version(request: Request) -> Response:
        return json_response(
            {"version": __version__, "minimum_compatible_version": MINIMUM_COMPATIBLE_VERSION}
        )

    @endpoint(protected=False)
    async def health(request: Request) -> Response:
        loaded = state.model is not None
        return json_response(
            {"status": "ok" if loaded else "no model", "model_loaded": loaded}, 200 if loaded else 503
        )

    @endpoint(protected=False)
    async def openapi(request: Request) -> Response:
        return json_response(openapi_document(state.max_text_chars, state.max_batch_texts))

    @endpoint(protected=True)
    async def status(request: Request) -> Response:
        model = state.require_model()
        manifest = model.manifest
        return json_response(
            {
                "model_file": model.path.name,
                "model_id": model.model_id,
                "num_active_training_jobs": 0,
                "version": __version__,
                "trained_at": manifest.get("trained_at"),
                "pipeline": [step.get("name") for step in manifest.get("pipeline", [])],
                "uptime_seconds": round(time.time() - state.started, 1),
                "batching": {
                    "requests": state.batcher.requests,
                    "batches": state.batcher.batches,
                    "largest_batch": state.batcher.largest_batch,
                },
            }
        )

    @endpoint(protected=True)
    async def parse(request: Request) -> Response:
        emulation = request.query_params.get("emulation_mode")
        if emulation and emulation.lower() != "rasa":
            raise RequestError(400, f"emulation_mode '{emulation[:50]}' is not supported; omit it")
        state.require_model()
        data = await read_json(request, state.max_body)
        if not isinstance(data, dict):
            raise RequestError(400, "request body must be a JSON object such as {\"text\": \"hello\"}")
        if "text" not in data:
            raise RequestError(400, "No text message defined in request body: send {\"text\": \"...\"}")
        text = check_text(data["text"], "text")
        return json_response(await state.batcher.parse(text))

    @endpoint(protected=True)
    async def parse_batch(request: Request) -> Response:
        state.require_model()
        data = await read_json(request, state.max_body)
        texts = data.get("texts") if isinstance(data, dict) else data
        if not isinstance(texts, list):
            raise RequestError(400, "request body must be a JSON list of texts or {\"texts\": [...]}")
        if len(texts) > state.max_batch_texts:
            raise RequestError(413, f"{len(texts)} texts; the limit is {state.max_batch_texts} per request")
        checked = [check_text(text, f"texts[{i}]") for i, text in enumerate(texts)]
        return json_response(await state.batcher.parse_many(checked))

    @endpoint(protected=True)
    async def replace_model(request: Request) -> Response:
        if not state.allow_reload:
            raise RequestError(409, "PUT /model needs a single worker (--workers 1); restart instead")
        data = await read_json(request, state.max_body)
        if not isinstance(data, dict):
            raise RequestError(
                400, "request body must be a JSON object such as {\"model_file\": \"x.tar.gz\"}"
            )
        for unsupported in ("model_server", "remote_storage"):
            if data.get(unsupported):
                raise RequestError(
                    400, f"'{unsupported}' is not supported; name an archive in the models folder"
                )
        path = state.resolve_model_file(data.get("model_file"))
        if state.reload_lock is None:
            state.reload_lock = asyncio.Lock()
        async with state.reload_lock:
            try:
                new_model = await asyncio.to_thread(load_model, path, state.allow_components)
            except NLUError as error:
                message = str(error)
                if state.models_dir is not None:
                    message = message.replace(f"{state.models_dir}/", "")
                logger.warning("PUT /model: %s", message)
                raise RequestError(400, f"could not load the model: {message}") from None
            state.model = new_model  # atomic swap; batches in flight finish on the old model
            state.model_path = path
        return Response(status_code=204)

    @endpoint(protected=True)
    async def unload_model(request: Request) -> Response:
        if not state.allow_reload:
            raise RequestError(409, "DELETE /model needs a single worker (--workers 1)")
        state.model = None
        logger.info("model unloaded")
        return Response(status_code=204)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if state.model is None and state.model_path is not None:
            await startup_load(state)
        yield
        state.batcher.close()

    routes = [
        Route("/", hello, methods=["GET"]),
        Route("/version", version, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/status", status, methods=["GET"]),
        Route("/model/parse", parse, methods=["POST"]),
        Route("/model/parse/batch", parse_batch, methods=["POST"]),
        Route("/model", replace_model, methods=["PUT"]),
        Route("/model", unload_model, methods=["DELETE"]),
    ]
    middleware = []
    if cors:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors),
                allow_methods=["GET", "POST", "PUT", "DELETE", "OPTIONS"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.state.nlu = state
    return app


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


async def startup_load(state: ServerState) -> None:
    """Load ``state.model_path`` (a folder: its newest archive); on failure run without a model."""
    from nlu_engine.persistence import newest_archive

    path = state.model_path
    assert path is not None
    try:
        if path.is_dir():
            path = newest_archive(path)
        state.model = await asyncio.to_thread(load_model, path, state.allow_components)
        state.model_path = path
    except NLUError as error:
        logger.error("no model loaded: %s; the server answers 503 until PUT /model", error)
