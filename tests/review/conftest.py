"""A message log made in process (the rows ``serve --log-messages`` writes) and a data folder."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

DATA = """version: "3.1"
nlu:
- intent: greet
  examples: |
    - hi
    - hello there
- intent: book_flight
  examples: |
    - fly to [Paris](city)
    - book a flight to [Rome](city)
"""

#: hostile texts a user may type: each must be shown as text and written to YAML unchanged
HOSTILE = [
    "<script>document.title='pwned'</script>",
    "<img src=x onerror=\"document.title='pwned'\">",
    "\u202eevil\u202c right-to-left \u05e9\u05dc\u05d5\u05dd",
    "zero\u200bwidth\u200djoiner\ufeff",
    "- item: {a: b} # not a comment | > &anchor *alias !!tag",
    "\"quoted\" 'single' \\backslash %percent @at `tick`",
]


def row(text: str, intent: str | None, confidence: float, ranking: list[tuple[str, float]] | None = None,
        entities: list[dict[str, Any]] | None = None, parsed_at: float = 1.0,
        out_of_scope: float | None = None) -> dict[str, Any]:
    ranking = ranking if ranking is not None else ([(intent, confidence)] if intent else [])
    result = {"text": text, "intent": {"name": intent, "confidence": confidence},
              "entities": entities or [],
              "intent_ranking": [{"name": n, "confidence": c} for n, c in ranking]}
    return {"id": uuid.uuid4().hex, "parsed_at": parsed_at, "endpoint": "parse", "worker": "w",
            "model_id": "m", "model_file": "m.tar.gz", "sender_id": None, "message_id": None,
            "text": text, "intent": intent, "confidence": confidence, "out_of_scope": out_of_scope,
            "intent_ranking": result["intent_ranking"], "entities": result["entities"],
            "parse_result": result}


def make_log(path: Path | str, rows: list[dict[str, Any]]) -> Path | str:
    """A message log at ``path`` (a file, or a database URL) holding ``rows``."""
    from nlu_engine.server.message_store import open_store

    store = open_store(str(path))
    try:
        store.insert(rows)
    finally:
        store.close()
    return path


def default_rows() -> list[dict[str, Any]]:
    """A small traffic: a confident greeting, unsure flights, a near-duplicate group, a fallback."""
    city = [{"entity": "city", "start": 14, "end": 20, "value": "Berlin"}]
    return [
        row("hello there", "greet", 0.97, [("greet", 0.97), ("book_flight", 0.03)], parsed_at=1),
        row("a flight to Berlin please", "book_flight", 0.55, [("book_flight", 0.55), ("greet", 0.45)],
            parsed_at=2),
        row("I want to fly Berlin today", "book_flight", 0.5, [("book_flight", 0.5), ("greet", 0.5)],
            entities=city, parsed_at=3),
        row("where is my order", "nlu_fallback", 0.3,
            [("nlu_fallback", 0.3), ("greet", 0.2), ("book_flight", 0.1)], parsed_at=4),
        row("Where is my order?", "nlu_fallback", 0.3,
            [("nlu_fallback", 0.3), ("greet", 0.2), ("book_flight", 0.1)], parsed_at=5),
        row("where is my order ??", "nlu_fallback", 0.31,
            [("nlu_fallback", 0.31), ("greet", 0.2), ("book_flight", 0.1)], parsed_at=6),
    ]


@pytest.fixture
def project(tmp_path: Path) -> dict[str, Path]:
    """``data/nlu.yml`` and ``log.db`` holding :func:`default_rows`."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "nlu.yml").write_text(DATA, encoding="utf-8")
    return {"root": tmp_path, "data": data, "db": make_log(tmp_path / "log.db", default_rows())}
