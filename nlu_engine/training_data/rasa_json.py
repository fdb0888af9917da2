"""Reader and writer for Rasa's JSON NLU format.

    {"rasa_nlu_data": {
        "common_examples": [{"text": "...", "intent": "...", "entities": [
            {"start": 0, "end": 5, "value": "...", "entity": "...", "role": "?", "group": "?"}]}],
        "regex_features": [{"name": "...", "pattern": "..."}],
        "lookup_tables": [{"name": "...", "elements": ["...", ...] or "path/to/file.txt"}],
        "entity_synonyms": [{"value": "...", "synonyms": ["...", ...]}]}}

The deprecated ``intent_examples`` and ``entity_examples`` lists are read like
``common_examples``. An example may carry ``metadata``; it is kept as is. Responses are not part
of this format and are not written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nlu_engine.contract.errors import DataError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.rasa_markdown import (
    checked_pattern,
    expand_lookup_files,
    lookup_file,
    missing_lookup_file,
    read_lookup_file,
    split_retrieval_intent,
)

ROOT_KEY = "rasa_nlu_data"
_EXAMPLE_LISTS = ("common_examples", "intent_examples", "entity_examples")
_GOLD_ENTITY_KEYS = ("entity", "start", "end", "value", "role", "group")


def load_json(content: str, source: str) -> Any:
    """``json.loads`` with a one-line ``DataError`` naming the file and line."""
    try:
        return json.loads(content)
    except json.JSONDecodeError as error:
        raise DataError(
            f"{source}:{error.lineno}: invalid JSON ({error.msg} at column {error.colno}); "
            "fix the syntax"
        ) from None


def parse_rasa_json(
    content: str, source: str = "<json>", base_dir: Path | None = None
) -> TrainingData:
    """Parse Rasa JSON text; ``source`` names it in errors."""
    document = load_json(content, source)
    if not isinstance(document, dict) or not isinstance(document.get(ROOT_KEY), dict):
        raise DataError(
            f"{source}: not Rasa NLU JSON; the file must be an object with a "
            f"'{ROOT_KEY}' object holding 'common_examples'"
        )
    return from_rasa_json_dict(document[ROOT_KEY], source, base_dir)


def from_rasa_json_dict(
    section: dict[str, Any], source: str = "<json>", base_dir: Path | None = None
) -> TrainingData:
    """Build TrainingData from the object under ``rasa_nlu_data``."""
    data = TrainingData()
    for list_name in _EXAMPLE_LISTS:
        for index, example in enumerate(_list(section, list_name, source)):
            where = f"{source}: {list_name}[{index}]"
            message = _message(example, where, data.load_warnings)
            data.messages.append(message)  # synonyms in annotations: learnt from the values, as
            # Rasa's JSON reader leaves them to EntitySynonymMapper (only its YAML reader lists them)

    for index, item in enumerate(_list(section, "entity_synonyms", source)):
        where = f"{source}: entity_synonyms[{index}]"
        value, synonyms = _field(item, "value", where), _field(item, "synonyms", where)
        if not isinstance(synonyms, list):
            raise DataError(f"{where}: 'synonyms' must be a list of strings")
        for synonym in synonyms:
            data.synonyms[str(synonym)] = str(value)

    for index, item in enumerate(_list(section, "regex_features", source)):
        where = f"{source}: regex_features[{index}]"
        name, pattern = str(_field(item, "name", where)), str(_field(item, "pattern", where))
        data.regex_features.append({"name": name, "pattern": checked_pattern(pattern, name, where)})

    for index, item in enumerate(_list(section, "lookup_tables", source)):
        where = f"{source}: lookup_tables[{index}]"
        name, elements = str(_field(item, "name", where)), _field(item, "elements", where)
        if isinstance(elements, str) and lookup_file(elements, base_dir) is None:
            # Rasa reads the file only when a featurizer needs it: the rest of the data loads
            kept = f"the table '{name}' is kept empty"
            data.load_warnings.append(f"{missing_lookup_file(elements, where)}; {kept}")
            elements = []
        elif isinstance(elements, str):
            elements = read_lookup_file(elements, base_dir, where)
        elif not isinstance(elements, list):
            raise DataError(f"{where}: 'elements' must be a list of strings or a file path")
        elements = expand_lookup_files([str(e) for e in elements], base_dir, where)
        data.lookup_tables.append({"name": name, "elements": elements})
    return data


def _list(section: dict[str, Any], key: str, source: str) -> list[Any]:
    value = section.get(key) or []
    if not isinstance(value, list):
        raise DataError(f"{source}: '{ROOT_KEY}.{key}' must be a list")
    return value


def _field(item: Any, key: str, where: str) -> Any:
    if not isinstance(item, dict) or key not in item:
        raise DataError(f"{where}: missing '{key}'")
    return item[key]


def _message(example: Any, where: str, warnings: list[str]) -> Message:
    """One example; an entity whose offsets do not fit its text is dropped (as Rasa ignores it
    when training) and named in ``warnings``, so one bad annotation does not stop a project."""
    text = _field(example, "text", where)
    if not isinstance(text, str):
        raise DataError(f"{where}: 'text' must be a string")
    intent = example.get("intent") or None
    if intent is not None and not isinstance(intent, str):
        raise DataError(f"{where}: 'intent' must be a string")
    response_key = None
    if intent is not None:  # a retrieval intent "faq/ask_name" is intent "faq" (as in Rasa)
        intent, response_key = split_retrieval_intent(intent, where)
    raw_entities = example.get("entities") or []
    if not isinstance(raw_entities, list):
        raise DataError(f"{where}: 'entities' must be a list")
    entities = []
    for number, raw in enumerate(raw_entities):
        entity_where = f"{where}.entities[{number}]"
        for key in ("start", "end", "entity"):
            _field(raw, key, entity_where)
        start, end = raw["start"], raw["end"]
        offsets = (start, end)
        if not (all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                and 0 <= start < end <= len(text)):
            warnings.append(
                f"{entity_where}: entity '{raw['entity']}' at start={start!r}, end={end!r} does "
                f"not fit the text {text!r} ({len(text)} characters); the annotation is dropped "
                "and the example kept; fix the offsets (start < end <= len(text))"
            )
            continue
        entity: dict[str, Any] = {
            "entity": str(raw["entity"]),
            "start": start,
            "end": end,
            "value": raw.get("value", text[start:end]),
        }
        for key in ("role", "group"):
            if raw.get(key) is not None:
                entity[key] = str(raw[key])
        entities.append(entity)
    metadata = example.get("metadata")
    return Message(
        text=text,
        intent=intent,
        entities=entities,
        metadata=metadata if isinstance(metadata, dict) else None,
        intent_response_key=response_key,
    )


def to_rasa_json_dict(data: TrainingData) -> dict[str, Any]:
    """The ``{"rasa_nlu_data": ...}`` document for ``data``."""
    examples = []
    for message in data.messages:
        example: dict[str, Any] = {"text": message.text}
        intent = message.intent_response_key or message.intent
        if intent:
            example["intent"] = intent
        example["entities"] = [
            {key: entity[key] for key in _GOLD_ENTITY_KEYS if entity.get(key) is not None}
            for entity in message.entities
        ]
        if message.metadata:
            example["metadata"] = message.metadata
        examples.append(example)
    by_value: dict[str, list[str]] = {}
    for surface, value in data.synonyms.items():
        if surface != value:
            by_value.setdefault(value, []).append(surface)
    return {
        ROOT_KEY: {
            "common_examples": examples,
            "regex_features": [dict(r) for r in data.regex_features],
            "lookup_tables": [
                {"name": t["name"], "elements": list(t["elements"])} for t in data.lookup_tables
            ],
            "entity_synonyms": [{"value": v, "synonyms": s} for v, s in by_value.items()],
        }
    }


def dump_rasa_json(data: TrainingData) -> str:
    """Rasa JSON text for ``data`` (indented, UTF-8 characters kept)."""
    return json.dumps(to_rasa_json_dict(data), indent=2, ensure_ascii=False) + "\n"


def write_rasa_json(data: TrainingData, path: str | Path) -> Path:
    """Write ``data`` as Rasa JSON; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_rasa_json(data), encoding="utf-8")
    return path
