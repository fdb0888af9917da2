"""DucklingEntityExtractor: numbers, dates, amounts and more from a Duckling server, as in Rasa.

An HTTP client of Duckling (https://github.com/facebook/duckling), with Rasa's parameters:

* ``url``: the server, e.g. ``http://localhost:8000`` (``$RASA_DUCKLING_HTTP_URL`` wins, as in
  Rasa); each message is POSTed form-encoded to ``<url>/parse``;
* ``dimensions``: the Duckling dimensions to keep (``time``, ``number``, ``amount-of-money``,
  ...); all of them when unset;
* ``locale``: Duckling's locale; unset, Rasa's ``<language>_<LANGUAGE>`` (``en_EN``);
* ``timezone``: e.g. ``Europe/Berlin``; unset, the server's;
* ``timeout``: seconds to wait for an answer (3).

Duckling reads relative dates ("tomorrow") against ``reftime``: as Rasa, the message's time
(``Message.time``, seconds since the epoch, from the ``time`` field of ``/model/parse`` or
``Model.parse(text, time=...)``) in milliseconds, or now when the message has none.

Each match becomes a Rasa entity: ``entity`` (the dimension), ``start``, ``end``, ``text``,
``value`` (Duckling's ``value``, or ``{"from": ..., "to": ...}`` for an interval),
``additional_info`` (Duckling's whole ``value`` object), ``confidence`` 1.0 and ``extractor``.
Nothing is trained or persisted: the component is its config.

When the server cannot be reached, answers with an error status or with something that is not
Duckling's JSON, one warning is logged and parsing goes on without Duckling's entities (Rasa
logs an error per message). The server is then left alone for :data:`RETRY_SECONDS`, so a batch
does not wait ``timeout`` seconds per message; once it answers again, a later failure warns
again. The messages of a batch are sent in parallel, at most :data:`MAX_PARALLEL` at a time.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from nlu_engine.contract.component import EntityExtractor, param
from nlu_engine.contract.languages import duckling_locale
from nlu_engine.contract.message import Message

logger = logging.getLogger(__name__)

EXTRACTOR_NAME = "DucklingEntityExtractor"
URL_ENV = "RASA_DUCKLING_HTTP_URL"
RETRY_SECONDS = 30.0
MAX_PARALLEL = 8
_FORM = "application/x-www-form-urlencoded; charset=UTF-8"


class DucklingUnavailable(Exception):
    """The server did not answer with Duckling's JSON (the reason is the message)."""


def rasa_entities(matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Duckling's matches in Rasa's entity format (``convert_duckling_format_to_rasa``)."""
    entities = []
    for match in matches:
        info = match.get("value") or {}
        if info.get("type") == "interval":
            value: Any = {"to": (info.get("to") or {}).get("value"),
                          "from": (info.get("from") or {}).get("value")}
        else:
            value = info.get("value")
        entities.append({
            "start": match["start"],
            "end": match["end"],
            "text": match.get("body", match.get("text")),
            "value": value,
            "confidence": 1.0,
            "additional_info": info,
            "entity": match["dim"],
        })
    return entities


class DucklingEntityExtractor(EntityExtractor):
    """Adds the entities a Duckling server finds in each message."""

    requires = ()

    @dataclass(frozen=True, kw_only=True)
    class Config(EntityExtractor.Config):
        url: str | None = None
        dimensions: list[str] | None = None
        locale: str | None = None
        timezone: str | None = None
        timeout: float = param(3, low=0.001)

    config: Config

    # --- the server -------------------------------------------------------------------------
    def server_url(self) -> str | None:
        """``$RASA_DUCKLING_HTTP_URL``, else ``url`` (as Rasa)."""
        return os.environ.get(URL_ENV) or self.config.url

    def locale(self) -> str:
        return self.config.locale or duckling_locale(self.language)

    def payload(self, text: str, reference_time: int) -> dict[str, str]:
        """The form fields Rasa sends (fields without a value are left out, as requests does)."""
        fields = {
            "text": text,
            "locale": self.locale(),
            "tz": self.config.timezone,
            "dims": json.dumps(self.config.dimensions),
            "reftime": str(reference_time),
        }
        return {key: value for key, value in fields.items() if value is not None}

    def request(self, url: str, text: str, reference_time: int) -> list[dict[str, Any]]:
        """Duckling's matches for ``text``; DucklingUnavailable when it gives none."""
        parse_url = urllib.parse.urljoin(url, "/parse")  # as Rasa: an absolute path
        body = urllib.parse.urlencode(self.payload(text, reference_time)).encode("utf-8")
        request = urllib.request.Request(parse_url, data=body, headers={"Content-Type": _FORM})
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise DucklingUnavailable(f"it answered {error.code} at {parse_url}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", None) or error
            raise DucklingUnavailable(f"cannot reach {parse_url} ({reason})") from None
        try:
            matches = json.loads(raw)
        except ValueError:
            raise DucklingUnavailable(f"{parse_url} did not answer with JSON") from None
        if not isinstance(matches, list) or not all(_is_match(m) for m in matches):
            raise DucklingUnavailable(f"{parse_url} did not answer with a list of Duckling matches")
        return matches

    # --- failures: warn once, then leave the server alone for a while ------------------------
    def _health(self) -> dict[str, Any]:
        health = getattr(self, "_health_state", None)
        if health is None:
            health = {"lock": threading.Lock(), "warned": False, "retry_at": 0.0}
            self._health_state = health
        return health

    def _failed(self, reason: str) -> None:
        health = self._health()
        with health["lock"]:
            health["retry_at"] = time.monotonic() + RETRY_SECONDS
            if health["warned"]:
                return
            health["warned"] = True
        logger.warning(
            f"{EXTRACTOR_NAME}: {reason}; parsing continues without Duckling's entities (the "
            f"server is tried again after {RETRY_SECONDS:.0f} s); start it (e.g. `docker run -p "
            f"8000:8000 rasa/duckling`) or fix `url` / ${URL_ENV}"
        )

    def _answered(self) -> None:
        health = self._health()
        with health["lock"]:
            health["warned"] = False

    def _resting(self) -> bool:
        return time.monotonic() < self._health()["retry_at"]

    # --- the component ----------------------------------------------------------------------
    def extract(self, text: str, reference_time: int) -> list[dict[str, Any]]:
        """The Rasa entities of ``text``, filtered by ``dimensions``; [] when Duckling is down."""
        url = self.server_url()
        if url is None or self._resting():
            return []
        try:
            matches = self.request(url, text, reference_time)
        except DucklingUnavailable as error:
            self._failed(str(error))
            return []
        self._answered()
        entities = rasa_entities(matches)
        if self.config.dimensions:
            entities = [e for e in entities if e["entity"] in self.config.dimensions]
        return [{**entity, "extractor": EXTRACTOR_NAME} for entity in entities]

    def process(self, messages: list[Message]) -> None:
        health = self._health()  # made before the worker threads need it
        if not messages:
            return
        if self.server_url() is None:
            if not health["warned"]:
                health["warned"] = True
                logger.warning(f"{EXTRACTOR_NAME}: no `url` in the config and ${URL_ENV} is not "
                               "set; it extracts nothing")
            return
        now = int(time.time()) * 1000  # Rasa: now, in milliseconds, for a message without a time
        jobs = [(message.text, reference_time(message, now)) for message in messages]
        if len(jobs) == 1:
            found = [self.extract(*jobs[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(jobs))) as pool:
                found = list(pool.map(lambda job: self.extract(*job), jobs))
        for message, entities in zip(messages, found, strict=True):
            message.entities.extend(entities)


def reference_time(message: Message, now: int) -> int:
    """Duckling's ``reftime`` for ``message``: its time in milliseconds, else ``now`` (as Rasa's
    ``_reference_time_from_message``)."""
    if message.time is None:
        return now
    return round(float(message.time) * 1000)


def _is_match(match: Any) -> bool:
    return (isinstance(match, dict) and isinstance(match.get("start"), int)
            and isinstance(match.get("end"), int) and isinstance(match.get("dim"), str)
            and isinstance(match.get("value", {}), dict))
