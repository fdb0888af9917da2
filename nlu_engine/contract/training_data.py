"""TrainingData: examples plus the synonym, regex and lookup sections of Rasa NLU data."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from nlu_engine.contract.message import Message


@dataclass
class TrainingData:
    """What a set of Rasa NLU files holds.

    ``synonyms`` maps a surface form (as written) to its canonical value;
    ``regex_features`` is a list of ``{"name", "pattern"}``; ``lookup_tables`` a list of
    ``{"name", "elements"}``; ``responses`` maps ``utter_faq/ask_name`` to Rasa response dicts.
    ``load_warnings`` are what the readers repaired while reading (an entity annotation dropped
    because its offsets do not fit its text), one line each naming the file and the example:
    the loader logs them and ``data validate`` reports them.
    """

    messages: list[Message] = field(default_factory=list)
    synonyms: dict[str, str] = field(default_factory=dict)
    regex_features: list[dict[str, str]] = field(default_factory=list)
    lookup_tables: list[dict[str, Any]] = field(default_factory=list)
    responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    load_warnings: list[str] = field(default_factory=list)

    # --- views -------------------------------------------------------------------------------
    @property
    def intent_examples(self) -> list[Message]:
        return [m for m in self.messages if m.intent]

    @property
    def intents(self) -> list[str]:
        return sorted({m.intent for m in self.messages if m.intent})

    @property
    def entity_types(self) -> list[str]:
        return sorted({e["entity"] for m in self.messages for e in m.entities})

    @property
    def roles(self) -> list[str]:
        return sorted({e["role"] for m in self.messages for e in m.entities if e.get("role")})

    @property
    def groups(self) -> list[str]:
        return sorted({str(e["group"]) for m in self.messages for e in m.entities if e.get("group")})

    def intent_counts(self) -> Counter[str]:
        return Counter(m.intent for m in self.messages if m.intent)

    # --- combining ---------------------------------------------------------------------------
    def merge(self, other: TrainingData) -> TrainingData:
        return TrainingData(
            messages=self.messages + other.messages,
            synonyms={**self.synonyms, **other.synonyms},
            regex_features=self.regex_features + other.regex_features,
            lookup_tables=_merge_lookups(self.lookup_tables, other.lookup_tables),
            responses={**self.responses, **other.responses},
            load_warnings=self.load_warnings + other.load_warnings,
        )

    def with_messages(self, messages: list[Message]) -> TrainingData:
        """The same sections with another list of examples (for splits and folds)."""
        return TrainingData(
            messages=messages,
            synonyms=dict(self.synonyms),
            regex_features=list(self.regex_features),
            lookup_tables=list(self.lookup_tables),
            responses=dict(self.responses),
            load_warnings=list(self.load_warnings),
        )

    def fingerprint(self, sections: bool = True) -> str:
        """A stable hash of the content (examples, annotations and, unless ``sections`` is
        False, the synonym, regex, lookup and response sections)."""
        payload: dict[str, Any] = {
            "examples": [
                [m.text, m.intent, m.intent_response_key, m.entities] for m in self.messages
            ],
        }
        if sections:
            payload.update(synonyms=self.synonyms, regex=self.regex_features,
                           lookup=self.lookup_tables, responses=self.responses)
        raw = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def _merge_lookups(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: dict[str, list[str]] = {}
    for table in a + b:
        merged.setdefault(table["name"], [])
        for element in table["elements"]:
            if element not in merged[table["name"]]:
                merged[table["name"]].append(element)
    return [{"name": name, "elements": elements} for name, elements in merged.items()]
