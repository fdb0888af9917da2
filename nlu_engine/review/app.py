"""The review page's web app (Starlette): the page, its JSON API, and nothing else.

    GET  /                  the page (and /review.js, /review.css: fixed names, no file paths)
    GET  /api/state         intents, entity types, counts, the file written, the training's state
    GET  /api/inbox         the open groups, highest priority first (?offset=&limit=)
    GET  /api/done          the labelled decisions, newest first (?limit=), to undo or resume
    POST /api/decide        {"messages": [{"id", "version"}], "intent", "entities"?, "entities_of"?,
                            "reviewer"?}: one decision for a group; 409 when someone else decided first
    POST /api/undo          {"messages": [{"id", "version"}], "reviewer"?}
    POST /api/train         fine-tune --model on the data and the reviewed file (GET: its state)

No request names a file: the page's assets are a fixed table, the write-back goes to one path
fixed at start. With a token every /api request needs ``Authorization: Bearer TOKEN``; without one
the app is bound to loopback and accepts only loopback Host headers (no DNS rebinding). A request
that changes anything must be JSON from the page's own origin (no cross-site form posts).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nlu_engine.contract.errors import NLUError
from nlu_engine.review.coverage import REGIONS, Spreader
from nlu_engine.review.decisions import LABELLED, Change, Conflict, ReviewStore, open_review
from nlu_engine.review.inbox import (
    FALLBACK_THRESHOLD,
    carry_entities,
    clean_entities,
    group_view,
    message_view,
)
from nlu_engine.review.writeback import WriteResult, check_target, reviewed_path, write_reviewed

logger = logging.getLogger("nlu_engine.review")
OUT_OF_SCOPE = "out_of_scope"
MAX_BODY = 1_000_000
MAX_GROUP = 10_000
#: messages of a group an inbox page carries (the oldest; the page lists 50); a decision labels
#: those it names
MEMBERS_SHOWN = 50
#: queued log rows an inbox request indexes before it answers; the indexer thread takes the rest
#: every INDEX_EVERY seconds
CATCH_UP_ROWS, INDEX_EVERY = 5_000, 2.0
_NAME = re.compile(r"[^\s\x00-\x1f\x7f\[\](){}]{1,100}")
ASSETS = {"/": ("index.html", "text/html; charset=utf-8"),
          "/review.js": ("review.js", "text/javascript; charset=utf-8"),
          "/review.css": ("review.css", "text/css; charset=utf-8")}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class BadRequest(Exception):
    """A request the API refuses: ``status`` and a one-line message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ReviewSettings:
    db: str
    data: Path
    model: str | None = None
    token: str | None = None
    #: Host headers accepted (None: any, with a token)
    hosts: frozenset[str] | None = None
    threshold: float = 0.8
    #: Enter never labels a message whose intent's confidence is below this (nor one the fallback
    #: caught): the threshold of a message's model when its log has the fallback's entry
    fallback_threshold: float = FALLBACK_THRESHOLD
    #: test data the Train button's comparison parses too
    test: tuple[str, ...] = ()
    #: the regions of sentence space the inbox's head is spread over (0: priority order alone)
    #: and the seed of their k-means (:mod:`nlu_engine.review.coverage`)
    regions: int = REGIONS
    regions_seed: int = 0


class Review:
    """What the requests share: the store, the labels known, the write-back and the trainer."""

    def __init__(self, settings: ReviewSettings) -> None:
        from nlu_engine.training_data import load_data

        if not settings.data.exists():
            raise NLUError(f"--data {settings.data} does not exist: name the project's data folder or file")
        self.settings = settings
        self.path = reviewed_path(settings.data)
        check_target(self.path)
        data = load_data(settings.data)
        self.intents = sorted({m.intent_response_key or m.intent for m in data.messages if m.intent})
        self.entity_types = data.entity_types
        self.store: ReviewStore = open_review(settings.db, settings.threshold)
        self.lock = threading.Lock()
        self.spreader = Spreader(settings.regions, settings.regions_seed)
        self.last_write: WriteResult | None = None
        self.trainer: Any = None
        if settings.model is not None:
            from nlu_engine.review.loop import Trainer

            self.trainer = Trainer(settings.model, settings.data, self.path, settings.db, settings.test)

    def write_back(self) -> WriteResult:
        self.last_write = write_reviewed(self.store.labelled(), self.path)
        return self.last_write


# --- requests ------------------------------------------------------------------------------------
def _authorised(review: Review, request: Request) -> bool:
    token = review.settings.token
    if token is None:
        return True
    header = request.headers.get("authorization", "")
    given = header[7:].strip() if header[:7].lower() == "bearer " else ""
    return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


def _check_request(review: Review, request: Request, changes: bool) -> None:
    hosts = review.settings.hosts
    if hosts is not None and request.headers.get("host", "").lower() not in hosts:
        raise BadRequest("this review page answers only to its own address (Host header refused)", 403)
    if request.url.path.startswith("/api/") and not _authorised(review, request):
        raise BadRequest("this review page needs its token: 'Authorization: Bearer TOKEN' "
                         "(open the page as /?token=TOKEN)", 401)
    if changes:
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            raise BadRequest("send the request as JSON (Content-Type: application/json)", 415)
        origin = request.headers.get("origin")
        if origin is not None and origin.rstrip("/").split("://", 1)[-1].lower() != \
                request.headers.get("host", "").lower():
            raise BadRequest("a request from another site's page is refused", 403)


async def _body(request: Request) -> dict[str, Any]:
    if int(request.headers.get("content-length") or 0) > MAX_BODY:
        raise BadRequest(f"request body over {MAX_BODY} bytes", 413)
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise BadRequest(f"request body over {MAX_BODY} bytes", 413)
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"the body is not JSON ({error})") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value.strip()):
        raise BadRequest(f"'{field}' must be a name of 1-100 characters without spaces or brackets")
    return value.strip()


def _reviewer(body: dict[str, Any]) -> str | None:
    reviewer = body.get("reviewer")
    return reviewer.strip()[:255] or None if isinstance(reviewer, str) else None


def _targets(body: dict[str, Any]) -> list[tuple[str, int]]:
    items = body.get("messages")
    if not isinstance(items, list) or not 0 < len(items) <= MAX_GROUP:
        raise BadRequest(f"'messages' must list 1 to {MAX_GROUP} {{\"id\", \"version\"}}")
    targets = []
    for item in items:
        if not (isinstance(item, dict) and isinstance(item.get("id"), str)
                and isinstance(item.get("version"), int) and not isinstance(item.get("version"), bool)
                and item["version"] >= 0):
            raise BadRequest("each of 'messages' must be {\"id\": string, \"version\": integer >= 0}")
        targets.append((item["id"], item["version"]))
    if len({message_id for message_id, _ in targets}) != len(targets):
        raise BadRequest("'messages' names a message twice")
    return targets


def _changes(review: Review, body: dict[str, Any]) -> list[Change]:
    """One decision for every message of the request (server-side texts, checked entities)."""
    targets = _targets(body)
    intent = _name(body.get("intent"), "intent")
    rows = review.store.messages_by_id([message_id for message_id, _ in targets])
    known = review.store.decisions_of([message_id for message_id, _ in targets])
    missing = [message_id for message_id, _ in targets if message_id not in rows and message_id not in known]
    if missing:
        raise BadRequest(f"no logged message has id {missing[0]!r}", 404)
    texts = {mid: rows[mid]["text"] if mid in rows else known[mid]["text"] for mid, _ in targets}
    edited, source = body.get("entities"), body.get("entities_of")
    if edited is not None and (not isinstance(edited, list) or source not in texts):
        raise BadRequest("'entities' must be a list, with 'entities_of' naming the message they are on")
    if edited is not None:
        for entity in edited:
            _name(entity.get("entity") if isinstance(entity, dict) else None, "entity")
        edited = clean_entities(texts[source], edited)
    changes = []
    for message_id, version in targets:
        text = texts[message_id]
        if edited is None:
            entities = clean_entities(text, (rows.get(message_id) or {}).get("entities"))
        elif message_id == source:
            entities = edited
        else:
            entities = carry_entities(texts[source], edited, text)
        changes.append(Change(message_id, version, text, LABELLED, intent, tuple(entities)))
    return changes


def _conflict(error: Conflict) -> JSONResponse:
    current = {mid: None if d is None else {"version": d["version"], "status": d["status"],
                                            "intent": d["intent"], "reviewer": d["reviewer"]}
               for mid, d in error.current.items()}
    return JSONResponse({"error": f"{error}: reload to see their decision", "current": current},
                        status_code=409)


def _written(result: WriteResult | None) -> dict[str, Any]:
    if result is None:
        return {}
    return {"file": result.path.name, "written": result.written,
            "left_out": [{"id": mid, "why": why} for mid, why in result.left_out]}


# --- endpoints -----------------------------------------------------------------------------------
def asset(request: Request) -> Response:
    name, media_type = ASSETS[request.url.path]
    content = resources.files("nlu_engine.review").joinpath("static", name).read_bytes()
    return Response(content, media_type=media_type)


def state(request: Request) -> JSONResponse:
    review: Review = request.app.state.review
    decisions = review.store.decisions()
    labelled = [d for d in decisions.values() if d["status"] == LABELLED]
    intents = sorted({*review.intents, *(d["intent"] for d in labelled if d["intent"]), OUT_OF_SCOPE})
    entity_types = sorted({*review.entity_types,
                           *(e["entity"] for d in labelled for e in d["entities"] or ())})
    return JSONResponse({
        "intents": intents, "entity_types": entity_types, "out_of_scope": OUT_OF_SCOPE,
        "labelled": len(labelled), "file": review.path.name, **_written(review.last_write),
        "train": review.trainer.status() if review.trainer is not None else None,
    })


def _window(request: Request, default: int) -> tuple[int, int]:
    try:
        offset = max(0, int(request.query_params.get("offset", 0)))
        limit = min(500, max(1, int(request.query_params.get("limit", default))))
    except ValueError:
        raise BadRequest("offset and limit must be integers") from None
    return offset, limit


def inbox(request: Request) -> JSONResponse:
    """One page of the inbox from the index, after indexing what was logged since (a bounded
    share of it: a backlog is the indexer thread's, :func:`_indexer`)."""
    review: Review = request.app.state.review
    offset, limit = _window(request, 50)
    review.store.catch_up(CATCH_UP_ROWS)
    total, messages, shown = review.spreader.page(review.store, offset, limit, MEMBERS_SHOWN)
    decisions = review.store.decisions_of([row["id"] for rows, _, _ in shown for row in rows])
    groups = []
    for rows, size, score in shown:  # a group larger than MEMBERS_SHOWN: a decision labels those shown
        group = group_view(rows, decisions, review.settings.fallback_threshold)
        groups.append({**group, "score": score, "size": size})
    return JSONResponse({"total": total, "messages": messages, "groups": groups})


def done(request: Request) -> JSONResponse:
    review: Review = request.app.state.review
    offset, limit = _window(request, 50)
    labelled = sorted(review.store.labelled(), key=lambda d: -d["decided_at"])
    rows = review.store.messages_by_id([d["message_id"] for d in labelled[offset:offset + limit]])
    items = []
    for decision in labelled[offset:offset + limit]:
        row = rows.get(decision["message_id"]) or {"id": decision["message_id"], "text": decision["text"]}
        view = message_view(row, decision, review.settings.fallback_threshold)
        items.append({**view, "decided": {"intent": decision["intent"], "reviewer": decision["reviewer"],
                                          "entities": decision["entities"] or []}})
    return JSONResponse({"total": len(labelled), "decisions": items})


async def decide(request: Request) -> JSONResponse:
    review: Review = request.app.state.review
    body = await _body(request)
    changes = _changes(review, body)
    with review.lock:
        try:
            versions = review.store.decide(changes, _reviewer(body))
        except Conflict as error:
            return _conflict(error)
        written = review.write_back()
    return JSONResponse({"versions": versions, **_written(written)})


async def undo(request: Request) -> JSONResponse:
    review: Review = request.app.state.review
    body = await _body(request)
    with review.lock:
        try:
            versions = review.store.undo(_targets(body), _reviewer(body))
        except Conflict as error:
            return _conflict(error)
        written = review.write_back()
    return JSONResponse({"versions": versions, **_written(written)})


async def train(request: Request) -> JSONResponse:
    review: Review = request.app.state.review
    if review.trainer is None:
        raise BadRequest("start the review with --model MODEL to fine-tune it from the page", 409)
    if request.method == "POST":
        await _body(request)
        review.trainer.start()
    return JSONResponse(review.trainer.status())


def create_app(settings: ReviewSettings) -> Starlette:
    """The review app for ``settings`` (the store opened and checked now: a one-line error)."""
    review = Review(settings)
    routes = [Route(path, asset, methods=["GET"]) for path in ASSETS]
    routes.append(Route("/favicon.ico", lambda _request: Response(status_code=204), methods=["GET"]))
    routes += [Route("/api/state", state, methods=["GET"]), Route("/api/inbox", inbox, methods=["GET"]),
               Route("/api/done", done, methods=["GET"]), Route("/api/decide", decide, methods=["POST"]),
               Route("/api/undo", undo, methods=["POST"]),
               Route("/api/train", train, methods=["GET", "POST"])]
    app = Starlette(routes=routes, lifespan=_indexer)
    app.state.review = review
    app.add_middleware(_Guard)  # type: ignore[arg-type]
    return app


@contextlib.asynccontextmanager
async def _indexer(app: Starlette) -> AsyncIterator[None]:
    """While the app serves: a thread that indexes the log's new messages every INDEX_EVERY
    seconds, so the inbox keeps up with the traffic whether or not the page asks."""
    review: Review = app.state.review
    stop = threading.Event()

    def run() -> None:
        while True:
            try:
                review.store.catch_up()
            except Exception as error:  # the database is away: try again later
                logger.warning("review: indexing the message log failed (%s); trying again", error)
            if stop.wait(INDEX_EVERY):
                return

    def warm() -> None:
        try:
            review.spreader.warm(review.store)
        except Exception as error:  # the first page that needs it reports it
            logger.warning("review: loading the sentence encoder failed (%s)", error)

    if review.spreader.regions > 0:  # the priority order alone needs no encoder
        threading.Thread(target=warm, name="review-encoder", daemon=True).start()
    thread = threading.Thread(target=run, name="review-indexer", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


class _Guard:
    """Checks every request (host, token, origin), turns BadRequest into a JSON error and adds
    the security headers (a strict Content-Security-Policy: no inline script can run)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        request = Request(scope, receive)
        review: Review = scope["app"].state.review
        try:
            _check_request(review, request, request.method not in ("GET", "HEAD"))
            await self.app(scope, receive, send_with_headers)
        except BadRequest as error:
            response = JSONResponse({"error": str(error)}, status_code=error.status)
            await response(scope, receive, send_with_headers)
        except NLUError as error:
            await JSONResponse({"error": str(error)}, status_code=500)(scope, receive, send_with_headers)
