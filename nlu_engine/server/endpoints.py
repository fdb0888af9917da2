"""The endpoints, each a plain async function of the request and the server's shared state.

:func:`endpoint` adds what every endpoint shares: the token check (for protected ones) and the
translation of errors into Rasa's error JSON, never a traceback.

The parse endpoints also take the token from the JSON body (``{"token": ..., "text": ...}``):
that is where Rasa's dialogue server puts it when ``endpoints.yml`` names an NLU server
(``nlu: url: ... token: ...``, Rasa's ``RasaNLUHttpInterpreter``). Rasa treats every answer but
200 as a failed parse and goes on with an empty intent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from nlu_engine import MINIMUM_COMPATIBLE_VERSION, __version__
from nlu_engine.contract.errors import NLUError
from nlu_engine.server.batching import NoModelError
from nlu_engine.server.http import (
    RequestError,
    check_text,
    check_time,
    error_response,
    json_response,
    read_json,
)
from nlu_engine.server.message_log import identifier
from nlu_engine.server.openapi import openapi_document
from nlu_engine.server.state import ServerState, load_model
from nlu_engine.server.swaps import announce

logger = logging.getLogger("nlu_engine.server")

Handler = Callable[[Request, ServerState], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]


NOT_AUTHENTICATED = "User is not authenticated: pass ?token= or an 'Authorization: Bearer' header"
NOT_AUTHENTICATED_BODY = ("User is not authenticated: pass \"token\" in the JSON body (as Rasa's "
                          "dialogue server does), ?token= or an 'Authorization: Bearer' header")


def endpoint(protected: bool, body_token: bool = False) -> Callable[[Handler], Endpoint]:
    """Auth (when ``protected``; with ``body_token`` the JSON body's ``token`` counts too) and
    the translation of errors into Rasa's error JSON."""

    def wrap(function: Handler) -> Endpoint:
        async def handler(request: Request) -> Response:
            state: ServerState = request.app.state.nlu
            try:
                if protected and not state.auth.check(
                    request.query_params.get("token"), request.headers.get("authorization")
                ):
                    if not body_token:
                        raise RequestError(401, NOT_AUTHENTICATED, close=_declares_body(request))
                    if not await _token_in_body(request, state):
                        raise RequestError(401, NOT_AUTHENTICATED_BODY)
                return await function(request, state)
            except RequestError as error:
                close = {"Connection": "close"} if error.close else None
                return error_response(error.status, error.message, error.reason, headers=close)
            except NoModelError:
                return error_response(503, "no model is loaded; load one with PUT /model")
            except Exception as error:  # a bug, not the client's fault: logged, not shown
                logger.exception("internal error on %s %s", request.method, request.url.path)
                return error_response(500, f"internal error ({type(error).__name__}); see the server log")

        handler.__name__ = function.__name__
        handler.__doc__ = function.__doc__
        return handler

    return wrap


async def request_json(request: Request, state: ServerState) -> Any:
    """The request's JSON body (read once: the token check may have read it already)."""
    if not hasattr(request.state, "json_body"):
        request.state.json_body = await read_json(request, state.max_body, state.body_timeout)
    return request.state.json_body


def _declares_body(request: Request) -> bool:
    """Whether the request comes with a body (which an early answer leaves unread)."""
    length = request.headers.get("content-length", "0").strip()
    return length not in ("", "0") or "transfer-encoding" in request.headers


async def _token_in_body(request: Request, state: ServerState) -> bool:
    """Whether the JSON body carries the token; a body that is not JSON carries none."""
    try:
        body = await request_json(request, state)
    except RequestError as error:
        if error.close:  # too large or too slow: that answer, not "not authenticated"
            raise
        return False
    token = body.get("token") if isinstance(body, dict) else None
    return isinstance(token, str) and state.auth.check_token(token)


@endpoint(protected=False)
async def hello(request: Request, state: ServerState) -> Response:
    return PlainTextResponse(f"Hello from nlu_engine: {__version__}")


@endpoint(protected=False)
async def version(request: Request, state: ServerState) -> Response:
    return json_response({"version": __version__, "minimum_compatible_version": MINIMUM_COMPATIBLE_VERSION})


@endpoint(protected=False)
async def health(request: Request, state: ServerState) -> Response:
    loaded = state.model is not None
    return json_response(
        {"status": "ok" if loaded else "no model", "model_loaded": loaded}, 200 if loaded else 503
    )


@endpoint(protected=False)
async def openapi(request: Request, state: ServerState) -> Response:
    return json_response(openapi_document(state.max_text_chars, state.max_batch_texts))


@endpoint(protected=True)
async def status(request: Request, state: ServerState) -> Response:
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
            "runtime": model.runtime,
            "uptime_seconds": round(time.time() - state.started, 1),
            "worker_id": state.worker_id,
            "batching": {
                "requests": state.batcher.requests,
                "batches": state.batcher.batches,
                "largest_batch": state.batcher.largest_batch,
            },
            "message_log": state.message_log.status() if state.message_log else {"enabled": False},
        }
    )


@endpoint(protected=True, body_token=True)
async def parse(request: Request, state: ServerState) -> Response:
    emulation = request.query_params.get("emulation_mode")
    if emulation and emulation.lower() != "rasa":
        raise RequestError(400, f"emulation_mode '{emulation[:50]}' is not supported; omit it")
    model = state.require_model()
    data = await request_json(request, state)
    if not isinstance(data, dict):
        raise RequestError(400, "request body must be a JSON object such as {\"text\": \"hello\"}")
    if "text" not in data:
        raise RequestError(400, "No text message defined in request body: send {\"text\": \"...\"}")
    text = check_text(data["text"], "text", state.max_text_chars)
    result = await state.batcher.parse(text, check_time(data.get("time")))
    if state.message_log is not None:  # queued for the log's writer thread; never waits
        state.message_log.record("parse", [result], model, identifier(data.get("sender_id")),
                                 identifier(data.get("message_id")))
    return json_response(result)


@endpoint(protected=True, body_token=True)
async def parse_batch(request: Request, state: ServerState) -> Response:
    model = state.require_model()
    data = await request_json(request, state)
    texts = data.get("texts") if isinstance(data, dict) else data
    if not isinstance(texts, list):
        raise RequestError(400, "request body must be a JSON list of texts or {\"texts\": [...]}")
    if len(texts) > state.max_batch_texts:
        raise RequestError(413, f"{len(texts)} texts; the limit is {state.max_batch_texts} per request")
    checked = [check_text(text, f"texts[{i}]", state.max_text_chars) for i, text in enumerate(texts)]
    results = await state.batcher.parse_many(checked)
    if state.message_log is not None:
        sender = identifier(data.get("sender_id")) if isinstance(data, dict) else None
        state.message_log.record("batch", results, model, sender)
    return json_response(results)


@endpoint(protected=True)
async def replace_model(request: Request, state: ServerState) -> Response:
    if not state.allow_reload and state.swap_file is None:
        raise RequestError(409, "PUT /model is not available on this server; restart it instead")
    data = await read_json(request, state.max_body, state.body_timeout)
    if not isinstance(data, dict):
        raise RequestError(400, "request body must be a JSON object such as {\"model_file\": \"x.tar.gz\"}")
    for unsupported in ("model_server", "remote_storage"):
        if data.get(unsupported):
            raise RequestError(400, f"'{unsupported}' is not supported; name an archive in the models folder")
    path = state.resolve_model_file(data.get("model_file"))
    async with state.lock():
        try:
            new_model = await asyncio.to_thread(load_model, path, state.allow_components, state.runtime)
        except NLUError as error:
            message = str(error)
            if state.models_dir is not None:
                message = message.replace(f"{state.models_dir}/", "")
            logger.warning("PUT /model: %s", message)
            raise RequestError(400, f"could not load the model: {message}") from None
        state.model = new_model  # atomic swap; batches in flight finish on the old model
        state.model_path = path
        if state.swap_file is not None:  # --workers N: the others follow (swaps.py)
            announce(state.swap_file, path)
    return Response(status_code=204)


@endpoint(protected=True)
async def unload_model(request: Request, state: ServerState) -> Response:
    if not state.allow_reload:
        raise RequestError(409, "DELETE /model needs a single worker (--workers 1); "
                                "PUT /model another archive instead")
    state.model = None
    logger.info("model unloaded")
    return Response(status_code=204)
