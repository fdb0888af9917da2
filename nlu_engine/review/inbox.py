"""The inbox: the logged messages not yet labelled, grouped and ranked, as the page shows them.

Every value here comes from the log, which holds what users typed: it is passed on as data (the
page renders it as text) and checked for shape, never trusted. Entities whose offsets do not fit
their text are dropped from the view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nlu_engine.review.decisions import LABELLED
from nlu_engine.review.grouping import group_texts
from nlu_engine.review.ranking import FALLBACK, group_priority

#: intents of a message's logged ranking the page shows (keys 1-9 pick them)
RANKING_SHOWN = 9
ENTITY_KEYS = ("entity", "start", "end", "value", "role", "group")


def clean_entities(text: str, entities: Any) -> list[dict[str, Any]]:
    """The entities of a logged row or a request that fit ``text``: sorted, not overlapping, with
    a string type and in-range offsets; the keys a training example keeps."""
    kept: list[dict[str, Any]] = []
    candidates = [e for e in entities or () if isinstance(e, dict)]
    for entity in sorted(candidates, key=lambda e: (_int(e.get("start")), _int(e.get("end")))):
        start, end, name = _int(entity.get("start")), _int(entity.get("end")), entity.get("entity")
        if not (isinstance(name, str) and name.strip() and 0 <= start < end <= len(text)):
            continue
        if kept and start < kept[-1]["end"]:
            continue
        value = entity.get("value")
        item: dict[str, Any] = {"entity": name.strip(), "start": start, "end": end,
                                "value": value if isinstance(value, str) else text[start:end]}
        for key in ("role", "group"):
            if isinstance(entity.get(key), str | int) and not isinstance(entity.get(key), bool):
                item[key] = str(entity[key])
        kept.append(item)
    return kept


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def ranking_of(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The logged intent ranking the page shows: names and confidences, the fallback left out."""
    shown = []
    for entry in row.get("intent_ranking") or ():
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"] != FALLBACK:
            confidence = entry.get("confidence")
            shown.append({"name": entry["name"],
                          "confidence": float(confidence) if isinstance(confidence, int | float) else 0.0})
    return shown[:RANKING_SHOWN]


def message_view(row: dict[str, Any], decision: dict[str, Any] | None) -> dict[str, Any]:
    text = row["text"]
    return {
        "id": row["id"],
        "text": text,
        "parsed_at": row.get("parsed_at"),
        "intent": row.get("intent"),
        "confidence": row.get("confidence"),
        "out_of_scope": row.get("out_of_scope"),
        "ranking": ranking_of(row),
        "entities": clean_entities(text, row.get("entities")),
        "version": 0 if decision is None else int(decision["version"]),
    }


def build_inbox(messages: Sequence[dict[str, Any]], decisions: dict[str, dict[str, Any]],
                threshold: float = 0.8) -> list[dict[str, Any]]:
    """The groups of messages not labelled yet, highest priority first."""
    pending = [row for row in messages
               if (decisions.get(row["id"]) or {}).get("status") != LABELLED and isinstance(row["text"], str)]
    groups = []
    for members in group_texts([row["text"] for row in pending], threshold):
        rows = [pending[i] for i in members]
        score, reasons = group_priority(rows)
        groups.append({"id": rows[0]["id"], "score": round(score, 4), "reasons": reasons,
                       "messages": [message_view(row, decisions.get(row["id"])) for row in rows]})
    groups.sort(key=lambda group: (-group["score"], group["id"]))
    return groups


def carry_entities(text: str, entities: Sequence[dict[str, Any]], other: str) -> list[dict[str, Any]]:
    """``entities`` of ``text`` placed on a near-duplicate ``other``: each where its surface text
    first occurs in ``other`` after the previous one (exactly, else ignoring case); an entity whose
    surface is not there is left out."""
    placed: list[dict[str, Any]] = []
    position = 0
    folded = other.casefold() if len(other.casefold()) == len(other) else None
    for entity in sorted(entities, key=lambda e: e["start"]):
        surface = text[entity["start"]:entity["end"]]
        start = other.find(surface, position)
        if start < 0 and folded is not None:
            start = folded.find(surface.casefold(), position)
        if start < 0:
            continue
        end = start + len(surface)
        value = entity.get("value")
        moved = {**entity, "start": start, "end": end}
        moved["value"] = other[start:end] if value in (None, surface) else value
        placed.append(moved)
        position = end
    return placed
