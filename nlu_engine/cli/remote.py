"""A client for a running server (``nlu-engine shell --server URL``), standard library only."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from nlu_engine.contract.errors import NLUError

PARSE_PATH = "/model/parse"


class RemoteParser:
    """``parse(text)`` through ``POST {url}/model/parse``; the token goes as a Bearer header."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(url.strip() if "://" in url else f"http://{url.strip()}")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise NLUError(f"--server '{url}' is not an http(s) URL such as http://localhost:5005")
        path = parts.path.rstrip("/")
        if not path.endswith(PARSE_PATH):
            path += PARSE_PATH
        self.url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))
        self.base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path[: -len(PARSE_PATH)], "", ""))
        self.token = token
        self.timeout = timeout

    def parse(self, text: str) -> dict[str, Any]:
        body = json.dumps({"text": text}, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            raise NLUError(f"server {self.base} answered {error.code}: {_message(error)}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise NLUError(
                f"cannot reach the server at {self.base} ({reason}); is nlu-engine serve running?"
            ) from None
        try:
            result = json.loads(payload)
        except ValueError:
            raise NLUError(
                f"server {self.base} did not answer JSON; is it an nlu-engine or Rasa server?"
            ) from None
        if not isinstance(result, dict):
            raise NLUError(f"server {self.base} answered an unexpected {type(result).__name__}")
        return result


def _message(error: urllib.error.HTTPError) -> str:
    try:
        data = json.loads(error.read() or b"{}")
    except (ValueError, OSError):
        data = {}
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return data["message"]
    return str(error.reason)
