"""The review's decisions written back as Rasa 3 YAML: a file of their own in the data folder.

``reviewed.yml`` (beside the data file, or in the data folder) is the project's own YAML writer's
output (``training_data.rasa_yaml``: ``version: "3.1"``, ``nlu:`` items of ``intent:`` and an
``examples: |`` block, entities inline as ``[value](type)``), regenerated from the database after
every decision and written atomically (a temporary file in the same folder, then a rename), so a
reader never sees half a file. The file is read back before it replaces the old one: an example
the Rasa format cannot hold as it is (a message holding annotation syntax such as ``[a](b)``,
which a reader would take for an entity) is left out and reported, never written changed; it
stays in the database.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlu_engine.contract.errors import DataError, NLUError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.annotations import parse_annotated, to_annotated
from nlu_engine.training_data.rasa_yaml import dump_rasa_yaml, parse_rasa_yaml

FILE_NAME = "reviewed.yml"
HEADER = ("# Written by `nlu-engine review` from the decisions kept in its database; it is\n"
          "# regenerated after every decision, so change a label on the review page, not here.\n")
_lock = threading.Lock()


def reviewed_path(data: str | Path) -> Path:
    """Where the review writes: ``DATA/reviewed.yml`` for a folder, else beside the file."""
    path = Path(data)
    return path / FILE_NAME if path.is_dir() else path.parent / FILE_NAME


@dataclass
class WriteResult:
    path: Path
    written: int = 0
    #: ``(message_id, why)`` of the decisions the Rasa format cannot hold unchanged
    left_out: list[tuple[str, str]] = field(default_factory=list)


def example_key(text: str, intent: str, entities: Iterable[dict[str, Any]]) -> tuple[Any, ...]:
    """What a round trip must keep of an example."""
    return (text, intent, tuple(sorted(
        (e["entity"], e["start"], e["end"], str(e.get("value")), e.get("role"),
         None if e.get("group") is None else str(e.get("group"))) for e in entities)))


def to_message(text: str, intent: str, entities: list[dict[str, Any]]) -> Message:
    """A training example; ``faq/ask_name`` is a retrieval intent, as in Rasa's files."""
    if "/" in intent:
        return Message(text=text, intent=intent.split("/", 1)[0], entities=entities,
                       intent_response_key=intent)
    return Message(text=text, intent=intent, entities=entities)


def _check(text: str, intent: str, entities: list[dict[str, Any]]) -> str | None:
    """Why this example cannot be written to Rasa YAML unchanged, or None."""
    if text != text.strip() or not text:
        return "the text starts or ends with white space, which Rasa's reader strips"
    try:
        annotated = to_annotated(text, entities)
        back_text, back = parse_annotated(annotated)
    except DataError as error:
        return str(error)
    if example_key(back_text, intent, back) != example_key(text, intent, entities):
        return ("its text holds entity annotation syntax ([text](type)), which Rasa's reader would "
                "take for an entity")
    return None


def build_data(decisions: list[dict[str, Any]]) -> tuple[list[tuple[str, Message]], list[tuple[str, str]]]:
    """The examples of the labelled decisions (the newest decision of a text wins) and those
    left out with the reason."""
    latest: dict[str, dict[str, Any]] = {}
    for decision in sorted(decisions, key=lambda d: (d["decided_at"], d["message_id"])):
        latest[decision["text"]] = decision
    examples: list[tuple[str, Message]] = []
    left_out: list[tuple[str, str]] = []
    for decision in latest.values():
        text, intent = decision["text"], decision["intent"]
        entities = [dict(e) for e in decision.get("entities") or ()]
        why = _check(text, intent, entities) if intent else "no intent"
        if why is None:
            examples.append((decision["message_id"], to_message(text, intent, entities)))
        else:
            left_out.append((decision["message_id"], why))
    return examples, left_out


def _keys_read(content: str, source: str) -> Counter[tuple[Any, ...]]:
    data = parse_rasa_yaml(content, source)
    messages = [] if data is None else data.messages
    return Counter(example_key(m.text, m.intent_response_key or m.intent or "", m.entities) for m in messages)


def render(examples: list[tuple[str, Message]], source: str) -> tuple[str, list[tuple[str, str]]]:
    """The YAML text of ``examples`` and the ones a read-back did not return unchanged (left
    out of the text)."""
    left_out: list[tuple[str, str]] = []
    while True:
        content = HEADER + dump_rasa_yaml(TrainingData(messages=[m for _, m in examples]))
        found = _keys_read(content, source)
        missing = [(mid, m) for mid, m in examples
                   if found[example_key(m.text, m.intent_response_key or m.intent or "", m.entities)] < 1]
        if not missing:
            return content, left_out
        left_out += [(mid, "Rasa's YAML reader does not read it back unchanged") for mid, _ in missing]
        dropped = {mid for mid, _ in missing}
        examples = [(mid, m) for mid, m in examples if mid not in dropped]


def write_reviewed(decisions: list[dict[str, Any]], path: Path) -> WriteResult:
    """Write the labelled ``decisions`` to ``path`` atomically (no decision: the file, when the
    review wrote it, is removed)."""
    examples, left_out = build_data(decisions)
    result = WriteResult(path, left_out=left_out)
    with _lock:
        if not examples:
            if path.is_file() and path.read_text(encoding="utf-8", errors="replace").startswith(HEADER):
                path.unlink()
            return result
        content, unread = render(examples, str(path))
        result.left_out += unread
        result.written = len(examples) - len(unread)
        _atomic_write(path, content)
    return result


def check_target(path: Path) -> None:
    """Refuse to replace a file the review did not write (one line: what to do)."""
    if path.exists() and not path.is_file():
        raise NLUError(f"{path} is not a file: the review cannot write its decisions there")
    if path.is_file() and not path.read_text(encoding="utf-8", errors="replace").startswith(HEADER):
        raise NLUError(f"{path} exists and was not written by nlu-engine review: rename it (its "
                       "examples stay training data) so the review can write its decisions there")


def _atomic_write(path: Path, content: str) -> None:
    check_target(path)
    descriptor, temporary = tempfile.mkstemp(prefix=".reviewed-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
