"""Checks on NLU training data: counts and warnings a user can act on.

``validate(data, tokenize)`` counts examples, intents and entity types and warns about:

- the same example text under two or more intents (the classifier cannot learn both);
- the same example repeated within one intent (the loader keeps only the first of exact repeats,
  as Rasa does; repeats that differ in their annotations weigh more and can leak into test
  splits);
- entity annotations a reader dropped because their offsets do not fit the text;
- intents with fewer than two examples (they cannot be split or learned);
- retrieval intents (``faq/ask_name``) without a response (``utter_faq/ask_name``);
- examples with empty text, and examples without an intent;
- entity annotations with whitespace at their edges, and — given a ``tokenize`` function —
  annotations that cut a token (tag-based extractors skip those; an annotation that only
  reaches over punctuation the tokenizer drops, as in ``u. s. d.``, is fine).

``domain_warnings(data, domain, story_intents)`` adds what ``rasa data validate`` reports about
the NLU data against a Rasa domain.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from nlu_engine.contract.message import Token
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.bilou import misaligned_entities
from nlu_engine.training_data.domain import DEFAULT_INTENTS, Domain

MIN_EXAMPLES_PER_INTENT = 2


@dataclass
class DataCounts:
    """How much of everything a TrainingData holds."""

    examples: int = 0
    intents: int = 0
    entity_types: int = 0
    entity_annotations: int = 0
    synonyms: int = 0
    regex_features: int = 0
    lookup_tables: int = 0
    responses: int = 0
    per_intent: dict[str, int] = field(default_factory=dict)
    per_entity: dict[str, int] = field(default_factory=dict)
    per_role: dict[str, int] = field(default_factory=dict)
    per_group: dict[str, int] = field(default_factory=dict)


@dataclass
class ValidationReport:
    """``counts`` and human-readable ``warnings`` (empty when the data looks fine)."""

    counts: DataCounts
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.warnings

    def as_dict(self) -> dict[str, Any]:
        return {"counts": asdict(self.counts), "warnings": list(self.warnings)}

    def format(self) -> str:
        """A plain-text report: totals, per-intent and per-entity counts, then warnings."""
        c = self.counts
        lines = [
            f"{c.examples} examples, {c.intents} intents, {c.entity_types} entity types "
            f"({c.entity_annotations} annotations), {c.synonyms} synonyms, "
            f"{c.regex_features} regex features, {c.lookup_tables} lookup tables, "
            f"{c.responses} responses",
        ]
        for title, table in (
            ("intents", c.per_intent),
            ("entities", c.per_entity),
            ("roles", c.per_role),
            ("groups", c.per_group),
        ):
            if not table:
                continue
            lines.append(f"{title}:")
            width = max(len(name) for name in table)
            lines.extend(f"  {name:<{width}}  {count:>6}" for name, count in table.items())
        if self.warnings:
            lines.append(f"{len(self.warnings)} warnings:")
            lines.extend(f"  - {warning}" for warning in self.warnings)
        else:
            lines.append("no warnings")
        return "\n".join(lines)


def count(data: TrainingData) -> DataCounts:
    """The counts part of the report."""
    per_intent = Counter(m.intent_response_key or m.intent for m in data.messages if m.intent)
    per_entity: Counter[str] = Counter()
    per_role: Counter[str] = Counter()
    per_group: Counter[str] = Counter()
    for message in data.messages:
        for entity in message.entities:
            per_entity[entity["entity"]] += 1
            if entity.get("role") is not None:
                per_role[str(entity["role"])] += 1
            if entity.get("group") is not None:
                per_group[str(entity["group"])] += 1
    return DataCounts(
        examples=len(data.messages),
        intents=len({m.intent for m in data.messages if m.intent}),
        entity_types=len(per_entity),
        entity_annotations=sum(per_entity.values()),
        synonyms=len(data.synonyms),
        regex_features=len(data.regex_features),
        lookup_tables=len(data.lookup_tables),
        responses=len(data.responses),
        per_intent=dict(sorted(per_intent.items())),
        per_entity=dict(sorted(per_entity.items())),
        per_role=dict(sorted(per_role.items())),
        per_group=dict(sorted(per_group.items())),
    )


def validate(
    data: TrainingData,
    tokenize: Callable[[str], list[Token]] | None = None,
    duplicates: Mapping[tuple[str, str], int] | None = None,
) -> ValidationReport:
    """Count ``data`` and collect warnings; ``tokenize`` enables the token-boundary check.

    ``duplicates`` are the copies of exact duplicate examples the loader dropped
    (``Project.duplicates``): they are warned about as if they were still there. What the readers
    repaired (``data.load_warnings``) comes first.
    """
    counts = count(data)
    warnings: list[str] = list(data.load_warnings)

    intents_of: dict[str, Counter[str]] = defaultdict(Counter)
    for message in data.messages:
        name = message.intent_response_key or message.intent
        if not message.text.strip():
            warnings.append(f"an example of intent '{name}' has empty text; remove it")
            continue
        if not name:
            warnings.append(f"example '{message.text}' has no intent; give it one or remove it")
            continue
        intents_of[message.text][name] += 1
    for (text, name), copies in (duplicates or {}).items():
        if text.strip() and name:
            intents_of[text][name] += copies

    for text, intents in intents_of.items():
        if len(intents) > 1:
            names = " and ".join(f"'{i}'" for i in sorted(intents))
            warnings.append(
                f"example '{text}' appears under intents {names}; keep it under one intent"
            )
        for intent, times in sorted(intents.items()):
            if times > 1:
                warnings.append(
                    f"example '{text}' appears {times} times under intent '{intent}'; "
                    "remove the duplicates"
                )

    keys = sorted({m.intent_response_key for m in data.messages if m.intent_response_key})
    for key in keys:
        if not data.responses.get(f"utter_{key}"):
            warnings.append(f"retrieval intent '{key}' has no response 'utter_{key}'; add it under "
                            "'responses:' in the domain (--domain) or in the data")

    for intent, number in counts.per_intent.items():
        if number < MIN_EXAMPLES_PER_INTENT:
            warnings.append(
                f"intent '{intent}' has only {number} example; add at least "
                f"{MIN_EXAMPLES_PER_INTENT} (better 10 or more)"
            )

    for message in data.messages:
        clean = []
        for entity in message.entities:
            surface = message.text[entity["start"] : entity["end"]]
            if surface != surface.strip():
                warnings.append(
                    f"entity '{entity['entity']}' ('{surface}') in example '{message.text}' "
                    "starts or ends with whitespace; annotate the words only"
                )
            else:
                clean.append(entity)
        if tokenize is None or not clean:
            continue
        tokens = tokenize(message.text)
        for entity in misaligned_entities(tokens, clean):
            surface = message.text[entity["start"] : entity["end"]]
            words = [t.text for t in tokens if t.start < entity["end"] and t.end > entity["start"]]
            warnings.append(
                f"entity '{entity['entity']}' ('{surface}') in example '{message.text}' does not "
                f"fall on token boundaries (tokens: {words}); annotate whole tokens"
            )
    return ValidationReport(counts=counts, warnings=warnings)


def domain_warnings(
    data: TrainingData,
    domain: Domain,
    story_intents: Mapping[str, list[str]] | None = None,
) -> list[str]:
    """What ``rasa data validate`` reports about NLU data against a domain, and more.

    Rasa's checks (``Validator.verify_intents``, ``verify_intents_in_stories``): intents listed in
    the domain without NLU examples, intents with examples that the domain does not list, intents
    that stories or rules use but the domain does not list, and (when stories or rules were read)
    domain intents no story or rule uses; Rasa's own default intents are left out. Then what Rasa
    does not check: entities, roles and groups the domain does not list.
    """
    where = ", ".join(domain.sources) or "the domain"
    warnings: list[str] = []
    nlu_intents = set(data.intents)
    listed = set(domain.all_intents)
    for intent in domain.intents:
        if intent not in nlu_intents and intent not in DEFAULT_INTENTS:
            warnings.append(f"intent '{intent}' is listed in {where} but has no NLU examples; add "
                            "examples or remove it from the domain")
    for intent in sorted(nlu_intents - listed):
        warnings.append(f"intent '{intent}' has NLU examples but is not listed in {where}; add it "
                        "under 'intents:'")
    used = dict(story_intents or {})
    for intent, files in sorted(used.items()):
        if intent not in listed:
            warnings.append(f"intent '{intent}' is used in {', '.join(files)} but is not listed in "
                            f"{where}; add it under 'intents:'")
    if used:
        for intent in domain.intents:
            if intent not in used and intent not in DEFAULT_INTENTS:
                warnings.append(f"intent '{intent}' is not used in any story or rule")
    warnings.extend(_entity_warnings(data, domain, where))
    return warnings


def _entity_warnings(data: TrainingData, domain: Domain, where: str) -> list[str]:
    warnings = []
    annotated: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"roles": set(), "groups": set()})
    for message in data.messages:
        for entity in message.entities:
            spec = annotated[entity["entity"]]
            for kind, key in (("roles", "role"), ("groups", "group")):
                if entity.get(key) is not None:
                    spec[kind].add(str(entity[key]))
    for name, spec in sorted(annotated.items()):
        if name not in domain.entities:
            warnings.append(f"entity '{name}' is annotated in the NLU data but not listed in {where}; "
                            "add it under 'entities:'")
            continue
        for kind, values in spec.items():
            declared = domain.entities[name][kind]
            for value in sorted(values - set(declared)) if declared else []:
                warnings.append(f"{kind[:-1]} '{value}' of entity '{name}' is annotated in the NLU "
                                f"data but not listed in its {kind} in {where}")
    return warnings
