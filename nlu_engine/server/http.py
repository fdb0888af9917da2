"""HTTP plumbing shared by the endpoints: Rasa's error JSON, bounded JSON bodies, text checks."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from nlu_engine import __version__


class RequestError(Exception):
    """A client's mistake: answered with ``status`` and a one-line message, never a traceback."""

    def __init__(self, status: int, message: str, reason: str | None = None, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason or _REASONS.get(status, "Error")
        # the body was left unread: the answer closes the connection, so the server does not
        # go on reading (and discarding) the rest of it
        self.close = close


_REASONS = {
    400: "BadRequest",
    401: "NotAuthenticated",
    403: "NotAuthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    408: "RequestTimeout",
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


async def read_json(request: Request, limit: int, timeout: float = 30.0) -> Any:
    """The request body as JSON; 413 over ``limit`` bytes (declared or streamed: never read
    further), 408 when it takes longer than ``timeout`` seconds to arrive, 400 when not JSON."""
    length = request.headers.get("content-length")
    if length is not None:
        try:
            declared = int(length)
        except ValueError:
            raise RequestError(400, "invalid Content-Length header", close=True) from None
        if declared > limit:
            raise RequestError(413, f"request body is {declared} bytes; the limit is {limit}", close=True)
    try:
        async with asyncio.timeout(timeout):
            body = await _read_body(request, limit)
    except TimeoutError:
        raise RequestError(408, f"the request body took longer than {timeout:g} s to arrive; "
                                "send it at once", close=True) from None
    if not body.strip():
        raise RequestError(400, "empty request body; send JSON such as {\"text\": \"hello\"}")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        detail = str(error).splitlines()[0][:200] if isinstance(error, ValueError) else "nested too deeply"
        raise RequestError(400, f"request body is not valid JSON ({detail})") from None


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, chunk by chunk, refused (413) as soon as it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(413, f"request body is over the limit of {limit} bytes", close=True)
            chunks.append(chunk)
    except ClientDisconnect:
        raise RequestError(400, "the client closed the connection before sending the body") from None
    return b"".join(chunks)


def check_time(value: Any, field: str = "time") -> float | None:
    """A message's time from a request (Rasa's ``time``): seconds since the epoch (years 1 to
    9999), a number or a numeric string, or an ISO 8601 date-time (UTC when it names no zone);
    None when absent."""
    from nlu_engine.server.openapi import EARLIEST_TIME, LATEST_TIME

    if value is None:
        return None
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value) if EARLIEST_TIME <= value <= LATEST_TIME else None
    elif isinstance(value, str) and value.strip():
        seconds = _seconds(value.strip())
    if seconds is not None and EARLIEST_TIME <= seconds <= LATEST_TIME:
        return seconds
    raise RequestError(400, f"'{field}' must be the message's time in seconds since the epoch "
                            "(e.g. 1700000000) or an ISO 8601 date-time")


def _seconds(value: str) -> float | None:
    """Seconds since the epoch from a numeric string or an ISO 8601 date-time; None for neither."""
    try:
        return float(value)  # NaN fails the range check
    except ValueError:
        pass
    try:  # RFC 3339 allows a lower-case 't' and 'z'
        moment = datetime.datetime.fromisoformat(value.upper())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):
        return None


def check_text(text: Any, field: str, max_chars: int) -> str:
    """A message text from a request: a string of at most ``max_chars`` valid Unicode characters."""
    if not isinstance(text, str):
        raise RequestError(400, f"'{field}' must be a string, got {type(text).__name__}")
    if len(text) > max_chars:
        raise RequestError(413, f"'{field}' has {len(text)} characters; the limit is {max_chars}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(400, f"'{field}' is not valid Unicode (a lone surrogate escape)") from None
    return text
