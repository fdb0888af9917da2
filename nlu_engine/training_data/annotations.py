"""Inline entity annotations in training examples, as Rasa writes them.

Three forms, all in one example line:

- ``[New York](city)`` — the entity type; the value is the surface text;
- ``[NYC](city:New York)`` — the legacy synonym shorthand; the value is ``New York``;
- ``[NYC]{"entity": "city", "role": "to", "group": "1", "value": "New York"}`` — the JSON form
  (``entity`` is required; ``role``, ``group`` and ``value`` are optional);
- ``[NYC][{"entity": "city"}, {"entity": "location"}]`` — several entities on one span.

``parse_annotated`` turns such a line into the plain text and entity dicts
``{"entity", "start", "end", "value"[, "role"][, "group"]}`` with character offsets into the
plain text; ``to_annotated`` is the inverse, used by the writers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from nlu_engine.contract.errors import DataError

# `[text]` followed by `(type)`, `(type:value)`, `{json}` or `[json list]` — Rasa's pattern.
ENTITY_PATTERN = re.compile(
    r"\[(?P<text>[^\]]+?)\]"
    r"(?:\((?P<entity>[^:)]+?)(?::(?P<value>[^)]+))?\)"
    r"|\{(?P<dict>[^}]+?)\}"
    r"|\[(?P<list>\{.*?\})\])"
)

# Entity types the short form `(type)` can carry unchanged.
_SHORT_TYPE = re.compile(r"[^:)\s](?:[^:)]*[^:)\s])?")

ENTITY_KEYS = ("entity", "start", "end", "value", "role", "group")
_JSON_KEYS = {"entity", "role", "group", "value"}


def parse_annotated(example: str, source: str = "") -> tuple[str, list[dict[str, Any]]]:
    """Split an annotated example into its plain text and its entities.

    ``source`` names where the example comes from (e.g. ``"data/nlu.yml:12"``) for errors.
    Entities are returned in the order they appear; ``value`` is the annotated value when one
    is given, else the surface text. Raises ``DataError`` for a malformed ``{...}`` annotation.
    """
    if "[" not in example:  # fast path: most examples carry no annotation
        return example, []
    entities: list[dict[str, Any]] = []
    parts: list[str] = []
    position = 0  # in the annotated string
    length = 0  # of the plain text built so far
    for match in ENTITY_PATTERN.finditer(example):
        before = example[position : match.start()]
        parts.append(before)
        length += len(before)
        surface = match.group("text")
        start, end = length, length + len(surface)
        for attributes in _attributes(match, example, source):
            entity: dict[str, Any] = {
                "entity": attributes["entity"],
                "start": start,
                "end": end,
                "value": attributes.get("value", surface),
            }
            for key in ("role", "group"):
                if attributes.get(key) is not None:
                    entity[key] = str(attributes[key])
            entities.append(entity)
        parts.append(surface)
        length = end
        position = match.end()
    parts.append(example[position:])
    return "".join(parts), entities


def _attributes(match: re.Match[str], example: str, source: str) -> list[dict[str, Any]]:
    if match.group("entity") is not None:
        attributes: dict[str, Any] = {"entity": match.group("entity").strip()}
        if match.group("value") is not None:
            attributes["value"] = match.group("value")
        return [attributes]
    raw = "{" + match.group("dict") + "}" if match.group("dict") else "[" + match.group("list") + "]"
    where = f"{source}: " if source else ""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as error:
        raise DataError(
            f"{where}invalid JSON in entity annotation {match.group(0)!r} of example "
            f"{example!r} ({error.msg}); write it as "
            '[text]{"entity": "type", "role": "r", "group": "g", "value": "v"}'
        ) from None
    items = parsed if isinstance(parsed, list) else [parsed]
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("entity"), str):
            raise DataError(
                f"{where}entity annotation {match.group(0)!r} of example {example!r} needs an "
                '"entity" key with the entity type, e.g. [text]{"entity": "city"}'
            )
        unknown = set(item) - _JSON_KEYS
        if unknown:
            raise DataError(
                f"{where}entity annotation {match.group(0)!r} of example {example!r} has "
                f"unknown keys {sorted(unknown)}; allowed are entity, role, group, value"
            )
    return items


def synonyms_from_entities(text: str, entities: Iterable[dict[str, Any]]) -> dict[str, str]:
    """``{surface: value}`` for every entity whose annotated value differs from its text."""
    found: dict[str, str] = {}
    for entity in entities:
        surface = text[entity["start"] : entity["end"]]
        value = entity.get("value")
        if value is not None and str(value) != surface:
            found[surface] = str(value)
    return found


def to_annotated(text: str, entities: Iterable[dict[str, Any]], source: str = "") -> str:
    """Write ``text`` with its entities inline (the inverse of ``parse_annotated``).

    Uses ``[text](type)`` when an entity has no role, no group and its value is its text, else
    the JSON form. Several entities on exactly the same span use the list form. Overlapping
    spans cannot be written inline: ``DataError`` (keep such data in the JSON format).
    """
    entities = list(entities)
    annotated = _annotated(text, entities, source)
    if "[" in annotated and parse_annotated(annotated) != (text, _as_read(text, entities)):
        where = f"{source}: " if source else ""
        raise DataError(
            f"{where}example {text!r} holds brackets that would be read as an entity annotation "
            "and cannot be written inline; use the JSON format"
        )
    return annotated


def _as_read(text: str, entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entities`` as ``parse_annotated`` gives them back (in text order, values defaulted)."""
    read = []
    for entity in sorted(entities, key=lambda e: (e["start"], e["end"])):
        item = {key: entity[key] for key in ("entity", "start", "end")}
        value = entity.get("value")
        item["value"] = text[entity["start"]:entity["end"]] if value is None else value
        item.update({key: str(entity[key]) for key in ("role", "group") if entity.get(key) is not None})
        read.append(item)
    return read


def _annotated(text: str, entities: list[dict[str, Any]], source: str) -> str:
    ordered = sorted(entities, key=lambda e: (e["start"], e["end"]))
    if not ordered:
        return text
    groups: list[list[dict[str, Any]]] = []
    for entity in ordered:
        if groups and (groups[-1][0]["start"], groups[-1][0]["end"]) == (
            entity["start"],
            entity["end"],
        ):
            groups[-1].append(entity)
        else:
            groups.append([entity])
    parts: list[str] = []
    position = 0
    for group in groups:
        start, end = group[0]["start"], group[0]["end"]
        if start < position or not 0 <= start < end <= len(text):
            where = f"{source}: " if source else ""
            raise DataError(
                f"{where}entities of example {text!r} overlap or fall outside the text "
                "and cannot be written as inline annotations; use the JSON format"
            )
        surface = text[start:end]
        if "]" in surface or "\n" in surface:
            where = f"{source}: " if source else ""
            raise DataError(
                f"{where}entity text {surface!r} of example {text!r} contains ']' or a line "
                "break and cannot be written as an inline annotation; use the JSON format"
            )
        parts.append(text[position:start])
        parts.append(f"[{surface}]")
        dicts = [_entity_json(entity, surface) for entity in group]
        if len(group) == 1 and list(dicts[0]) == ["entity"] and _SHORT_TYPE.fullmatch(
            str(group[0]["entity"])
        ):
            parts.append(f"({group[0]['entity']})")
        else:
            parts.append(_json_annotation(dicts[0] if len(group) == 1 else dicts))
        position = end
    parts.append(text[position:])
    return "".join(parts)


def _json_annotation(value: Any) -> str:
    """The JSON of an annotation, with '}' in its strings escaped (a '}' ends the annotation)."""
    if isinstance(value, list):
        return "[" + ", ".join(_json_annotation(item) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{_json_annotation(k)}: {_json_annotation(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return json.dumps(value, ensure_ascii=False).replace("}", "\\u007d")


def _entity_json(entity: dict[str, Any], surface: str) -> dict[str, Any]:
    result: dict[str, Any] = {"entity": entity["entity"]}
    for key in ("role", "group"):
        if entity.get(key) is not None:
            result[key] = entity[key]
    value = entity.get("value")
    if value is not None and value != surface:
        result["value"] = value
    return result
