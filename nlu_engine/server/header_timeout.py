"""A bound on how long a request's headers may take: uvicorn's HTTP protocol with a header timer.

uvicorn closes an idle keep-alive connection (``timeout_keep_alive``) but has no timeout for
headers that are still arriving: a client sending a byte a second keeps its connection (and a file
descriptor) for as long as it likes, and a thousand such clients hold a thousand. Here the timer
starts when the server waits for a request's headers (the connection opened, or the previous
response sent) and stops when they are complete; when it fires first, the client gets ``408
Request Timeout`` (the API's error JSON) and the connection is closed (RFC 9110, 15.5.9). The
body's own bound is the app's (``--body-timeout``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nlu_engine.server.http import error_response

#: the default bound (seconds) of ``serve --header-timeout``
HEADER_TIMEOUT = 15.0


def timeout_response(seconds: float) -> bytes:
    """The whole 408 answer, status line to body, that closes the connection."""
    response = error_response(408, f"the request's headers took longer than {seconds:g} s to arrive "
                                   "(--header-timeout): the connection is closed", "RequestTimeout")
    head = [b"HTTP/1.1 408 Request Timeout\r\n"]
    head += [name + b": " + value + b"\r\n" for name, value in response.raw_headers]
    return b"".join([*head, b"connection: close\r\n\r\n", response.body])


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose request headers must complete within
    ``config.header_timeout`` seconds (the config is :class:`nlu_engine.server.run.NoDelayConfig`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = float(getattr(self.config, "header_timeout", HEADER_TIMEOUT))
        self.header_timer: asyncio.TimerHandle | None = None
        self.timeout_answer = timeout_response(self.header_timeout)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        self._stop_header_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:  # waiting for the next headers
            self._start_header_timer()

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self.header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _stop_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _headers_too_slow(self) -> None:
        self.header_timer = None
        if self.transport.is_closing():
            return
        self.transport.write(self.timeout_answer)
        self.transport.close()
