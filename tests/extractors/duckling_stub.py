"""A local stand-in for a Duckling server: POST /parse answers in Duckling's documented format.

Duckling's README shows the exchange (``curl -XPOST http://0.0.0.0:8000/parse --data
'locale=en_GB&text=tomorrow at eight'``): a form-encoded body with ``text``, ``locale`` and
optionally ``tz``, ``dims`` (a JSON list) and ``reftime`` (ms), answered by a JSON list of
``{"body", "start", "end", "dim", "latent", "value": {...}}``; an interval's ``value`` has
``type: interval`` with ``from`` / ``to``. This stub knows a few phrases (number words and digits,
``tomorrow``, ``this weekend``, ``N dollars``, and ``today``: the UTC day of ``reftime``, as
Duckling reads relative dates against it), honours ``dims``, records every request and can be
told to fail (``status``) or to answer something that is not JSON (``garbage``).
"""

from __future__ import annotations

import datetime
import json
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10}
TOMORROW = "2013-02-13T00:00:00.000-02:00"
WEEKEND = ("2013-02-15T18:00:00.000-02:00", "2013-02-18T00:00:00.000-02:00")


def matches(text: str, reftime: int | None = None) -> list[dict[str, Any]]:
    """What Duckling would answer for ``text`` at ``reftime`` (ms; None: now), for the phrases
    this stub knows."""
    found: list[dict[str, Any]] = []
    taken: list[tuple[int, int]] = []

    def add(start: int, end: int, dim: str, value: dict[str, Any]) -> None:
        if any(start < e and s < end for s, e in taken):
            return
        taken.append((start, end))
        found.append({"body": text[start:end], "start": start, "end": end, "dim": dim,
                      "latent": False, "value": value})

    for m in re.finditer(r"(\d+) dollars", text):
        add(m.start(), m.end(), "amount-of-money", {"value": int(m.group(1)), "type": "value", "unit": "$"})
    for m in re.finditer(r"\btomorrow\b", text):
        value = {"value": TOMORROW, "grain": "day", "type": "value"}
        add(m.start(), m.end(), "time", {**value, "values": [value]})
    for m in re.finditer(r"\btoday\b", text):
        seconds = time.time() if reftime is None else reftime / 1000
        day = datetime.datetime.fromtimestamp(seconds, datetime.UTC).date().isoformat()
        value = {"value": f"{day}T00:00:00.000Z", "grain": "day", "type": "value"}
        add(m.start(), m.end(), "time", {**value, "values": [value]})
    for m in re.finditer(r"\bthis weekend\b", text):
        interval = {"type": "interval", "from": {"value": WEEKEND[0], "grain": "hour"},
                    "to": {"value": WEEKEND[1], "grain": "hour"}}
        add(m.start(), m.end(), "time", {**interval, "values": [dict(interval)]})
    for m in re.finditer(r"\b(\d+|" + "|".join(NUMBERS) + r")\b", text):
        word = m.group(1)
        add(m.start(), m.end(), "number", {"value": int(word) if word.isdigit() else NUMBERS[word],
                                           "type": "value"})
    return sorted(found, key=lambda f: f["start"])


class DucklingStub:
    """``with DucklingStub() as stub:`` serves on ``stub.url`` until the block ends."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.status = 200
        self.garbage = False
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode("utf-8")))
                stub.requests.append({"path": self.path, "content_type": self.headers.get("Content-Type", ""),
                                      **form})
                if self.path != "/parse" or stub.status != 200:
                    self.reply(stub.status if stub.status != 200 else 404, b"error")
                    return
                if stub.garbage:
                    self.reply(200, b"<html>not duckling</html>")
                    return
                reftime = form.get("reftime")
                found = matches(form.get("text", ""), int(reftime) if reftime else None)
                dims = json.loads(form.get("dims") or "null")
                if dims:
                    found = [f for f in found if f["dim"] in dims]
                self.reply(200, json.dumps(found).encode("utf-8"))

            def reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> DucklingStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
