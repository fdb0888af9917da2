"""The inbox: the logged messages not yet labelled, grouped and ranked, as the page shows them.

A group's ``accept`` is the intent Enter labels it with, or None when a guess would be labelled:
when the fallback caught one of its messages, or a message's intent is below the fallback
threshold (the one its model logged with the fallback's entry, else the review's). Then the
reviewer picks an intent (``guard`` says why).

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

#: the fallback threshold a message is held to when its model logged none (FallbackClassifier's
#: default; ``nlu-engine review --fallback-threshold`` sets the review's)
FALLBACK_THRESHOLD = 0.3

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


def acceptable(row: dict[str, Any], threshold: float = FALLBACK_THRESHOLD) -> tuple[str | None, str | None]:
    """(the intent Enter may label ``row`` with, None) or (None, why it may not): not when the
    fallback caught it, nor when its intent's confidence is below the fallback threshold (the
    fallback entry's of its logged ranking, the threshold its model applied, else ``threshold``)."""
    ranking = [e for e in row.get("intent_ranking") or () if isinstance(e, dict)]
    logged = [e.get("confidence") for e in ranking if e.get("name") == FALLBACK]
    if row.get("intent") == FALLBACK or logged:
        return None, "the fallback caught this message"
    intent, confidence = row.get("intent"), row.get("confidence")
    if not (isinstance(intent, str) and intent.strip()):
        return None, "the model gave this message no intent"
    if not isinstance(confidence, int | float) or isinstance(confidence, bool):
        return None, "the model logged no confidence for this message"
    if confidence < threshold:
        return None, (f"the model's intent {intent} ({confidence:.3f}) is below the fallback "
                      f"threshold ({threshold:g})")
    return intent, None


def message_view(row: dict[str, Any], decision: dict[str, Any] | None,
                 threshold: float = FALLBACK_THRESHOLD) -> dict[str, Any]:
    text = row["text"]
    accept, guard = acceptable(row, threshold)
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
        "accept": accept,
        "guard": guard,
    }


def group_view(rows: Sequence[dict[str, Any]], decisions: dict[str, dict[str, Any]],
               fallback_threshold: float = FALLBACK_THRESHOLD) -> dict[str, Any]:
    """A group as the page shows it, from its pending ``rows`` (oldest first). Its ``accept``: its
    first message's, unless any of its messages may not be accepted (``guard``: the first reason)."""
    score, reasons = group_priority(rows)
    views = [message_view(row, decisions.get(row["id"]), fallback_threshold) for row in rows]
    guard = next((view["guard"] for view in views if view["guard"]), None)
    return {"id": rows[0]["id"], "score": score, "reasons": reasons,
            "accept": None if guard else views[0]["accept"], "guard": guard, "messages": views}


def build_inbox(messages: Sequence[dict[str, Any]], decisions: dict[str, dict[str, Any]],
                threshold: float = 0.8,
                fallback_threshold: float = FALLBACK_THRESHOLD) -> list[dict[str, Any]]:
    """The groups of messages not labelled yet, highest priority first, computed from the whole
    log (``messages`` oldest first): the texts of every message are grouped, labelled or not, and
    each group shows its pending ones. The review's index (:mod:`nlu_engine.review.index`) keeps
    the same groups as messages arrive; this is its reference."""
    rows = [row for row in messages if isinstance(row["text"], str)]
    groups = []
    for members in group_texts([row["text"] for row in rows], threshold):
        pending = [rows[i] for i in members if (decisions.get(rows[i]["id"]) or {}).get("status") != LABELLED]
        if pending:
            groups.append(group_view(pending, decisions, fallback_threshold))
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
