"""Corpus files with every kind of row the readers must handle (the logreg model they parse
with, ``logreg_archive``, is in tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA = PROJECT_ROOT / "data" / "nlu.yml"

#: messages, and rows that cannot be parsed, in the order a corpus file holds them
MESSAGES = [
    "hi there",
    "book a table for two in Berlin tomorrow",
    "what's the weather like in paris",
    "thanks, bye",
    "completely unknown words",
]


def corpus_texts(repeat: int = 1) -> list[str]:
    """Distinct messages (a number keeps them apart), ``repeat`` rounds of :data:`MESSAGES`."""
    return [f"{text} {i}" for i in range(repeat) for text in MESSAGES]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def mixed_text_file(tmp_path: Path) -> Path:
    """A text file with good lines, an empty line, a line that is not UTF-8, CRLF endings and an
    over-long line, without a final newline."""
    lines = [b"hi there", b"", b"book a table\r", b"\xff\xfe not utf-8", b"x" * 50, b"thanks, bye"]
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"\n".join(lines))
    return path
