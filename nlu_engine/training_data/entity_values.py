"""What users already wrote about their entities, by entity type: the values they annotated, the
surface forms of their synonyms and the elements of their lookup tables.

Read by the gazetteer featurizer (``featurizers/sparse/gazetteer.py``: which tokens lie in a
known value of a type) and by DIET's multiplied examples (``classifiers/diet/multiplying.py``:
a message's values swapped for others of the same type).

- an annotated value is the annotation's text as written (``text[start:end]``), of its type;
- a lookup table is of the entity type it is named after (Rasa's convention; a table named after
  no annotated type is a type of its own for the gazetteer, and gives no swaps);
- a synonym's surface form and its canonical value are of each type annotated with either.

Values are matched after :func:`normalize` (case folded, runs of white space as one space).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData


def normalize(value: str) -> str:
    """``value`` as the gazetteer compares it: case folded, white space collapsed, stripped."""
    return " ".join(value.split()).casefold()


def annotated(message: Message) -> list[tuple[str, str]]:
    """``(surface text, type)`` of each well-formed entity annotation of ``message``."""
    pairs = []
    for entity in message.entities:
        start, end, kind = entity.get("start"), entity.get("end"), entity.get("entity")
        if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(message.text) and kind:
            pairs.append((message.text[start:end], str(kind)))
    return pairs


@dataclass
class EntityValues:
    """Surface values by entity type: ``annotated`` (each with how many annotations hold it) and
    ``listed`` (from lookup tables and synonyms), both keyed by the normalized value."""

    annotated: dict[str, Counter[str]] = field(default_factory=dict)
    listed: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def types(self) -> list[str]:
        return sorted(set(self.annotated) | set(self.listed))

    def surfaces(self, kind: str) -> list[str]:
        """Every distinct value of ``kind`` as first written (annotations first), in a stable order."""
        seen: dict[str, str] = {}
        for value in self.annotated.get(kind, Counter()):
            seen.setdefault(normalize(value), value)
        for key, value in self.listed.get(kind, {}).items():
            seen.setdefault(key, value)
        return list(seen.values())


def collect(data: TrainingData, messages: Iterable[Message] | None = None, *,
            lookup_tables: bool = True, synonyms: bool = True) -> EntityValues:
    """The values of ``messages`` (default: the data's) and, when asked, of ``data``'s lookup
    tables and synonyms. Duplicates count once in ``listed``; empty values are left out."""
    values = EntityValues()
    for message in data.messages if messages is None else messages:
        for text, kind in annotated(message):
            if normalize(text):
                values.annotated.setdefault(kind, Counter())[text] += 1
    if lookup_tables:
        for table in data.lookup_tables:
            listed = values.listed.setdefault(str(table.get("name", "")), {})
            for element in table.get("elements", []) or []:
                if (key := normalize(str(element))):
                    listed.setdefault(key, str(element).strip())
        values.listed.pop("", None)
    if synonyms and data.synonyms:
        _add_synonyms(values, data.synonyms)
    return values


def _add_synonyms(values: EntityValues, synonyms: dict[str, str]) -> None:
    """Each synonym's surface form and canonical value under each type annotated with either."""
    types_of: dict[str, set[str]] = {}
    for kind, counts in values.annotated.items():
        for text in counts:
            types_of.setdefault(normalize(text), set()).add(kind)
    groups: dict[str, set[str]] = {}
    for surface, canonical in synonyms.items():
        groups.setdefault(str(canonical), {str(canonical)}).add(str(surface))
    for members in groups.values():
        kinds = set().union(*(types_of.get(normalize(m), set()) for m in members))
        for kind in sorted(kinds):
            listed = values.listed.setdefault(kind, {})
            for member in sorted(members):
                if (key := normalize(member)):
                    listed.setdefault(key, member.strip())
