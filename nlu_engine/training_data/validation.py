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
- training data written mostly in a script its ``language`` is not written in (Japanese text
  with ``language: en``);
- entity annotations with whitespace at their edges, and — given a ``tokenize`` function (the
  tokenizer the config's ``language:`` chose) — annotations that cut a token (tag-based
  extractors skip those; an annotation that only reaches over punctuation the tokenizer drops,
  as in ``u. s. d.``, is fine);
- intents the classifier cannot tell apart: one intent only (every message gets it), intents
  that share all their examples, an intent whose every example is also another's;
- what no example teaches: a retrieval intent's response (``utter_faq/ask_x``) without examples
  of ``faq/ask_x``, a lookup table or a synonym that matches no annotated entity.

``domain_warnings(data, domain, story_intents)`` adds what ``rasa data validate`` reports about
the NLU data against a Rasa domain, and the entity types it lists that no example annotates.
``training_warnings(data, domain)`` are the ones ``nlu-engine train`` shows: what trains but
cannot work as the data means it to. Each warning is one line naming the intent, example,
section or file, and what to do; all are warnings, none stops training.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

from nlu_engine.contract.languages import script_mismatch
from nlu_engine.contract.message import RESPONSE_IDENTIFIER_DELIMITER, Token
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.bilou import misaligned_entities
from nlu_engine.training_data.domain import DEFAULT_INTENTS, Domain

MIN_EXAMPLES_PER_INTENT = 2
#: example texts quoted in a warning about a set of them, at most
QUOTED_EXAMPLES = 3


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
    domain: Domain | None = None,
    language: str | None = None,
) -> ValidationReport:
    """Count ``data`` and collect warnings; ``tokenize`` enables the token-boundary check, and
    ``language`` (the config's ``language:``) the check that the data is written in its script.

    ``duplicates`` are the copies of exact duplicate examples the loader dropped
    (``Project.duplicates``): they are warned about as if they were still there. What the readers
    repaired (``data.load_warnings``) comes first, then why intents cannot be told apart.
    ``domain`` (whose retrieval responses ``data`` holds) names the file of a response.
    """
    counts = count(data)
    warnings: list[str] = list(data.load_warnings)
    separability, explained = _separability(data)
    warnings.extend(separability)
    mismatch = script_mismatch(language, (m.text for m in data.messages)) if language else None
    if mismatch:
        warnings.append(mismatch)

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

    warnings.extend(_repeat_warnings(intents_of, explained))

    keys = sorted({m.intent_response_key for m in data.messages if m.intent_response_key})
    for key in keys:
        if not data.responses.get(f"utter_{key}"):
            warnings.append(f"retrieval intent '{key}' has no response 'utter_{key}'; add it under "
                            "'responses:' in the domain (--domain) or in the data")

    warnings.extend(response_warnings(data, domain))
    warnings.extend(section_warnings(data))

    for intent, number in counts.per_intent.items():
        if number < MIN_EXAMPLES_PER_INTENT:
            warnings.append(
                f"intent '{intent}' has only {number} example; add at least "
                f"{MIN_EXAMPLES_PER_INTENT} (better 10 or more)"
            )

    for entity, number in counts.per_entity.items():
        if number == 1:
            warnings.append(
                f"entity '{entity}' is annotated in only 1 example; it trains, but a tagger learns "
                f"little from one: annotate it in more examples (better 5 or more) or list its "
                f"values in a lookup table"
            )

    warnings.extend(_annotation_warnings(data, tokenize))
    return ValidationReport(counts=counts, warnings=warnings)


def _annotation_warnings(data: TrainingData, tokenize: Callable[[str], list[Token]] | None) -> list[str]:
    """Entity annotations that start or end with whitespace and, with ``tokenize``, those that do
    not fall on token boundaries."""
    found: list[str] = []
    for message in data.messages:
        clean = []
        for entity in message.entities:
            surface = message.text[entity["start"] : entity["end"]]
            if surface != surface.strip():
                found.append(
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
            found.append(
                f"entity '{entity['entity']}' ('{surface}') in example '{message.text}' does not "
                f"fall on token boundaries (tokens: {words}); annotate whole tokens"
            )
    return found


def _repeat_warnings(intents_of: Mapping[str, Counter[str]], explained: set[frozenset[str]]) -> list[str]:
    """An example text under several intents (unless a separability warning already names each
    pair of them), or repeated under one."""
    warnings = []
    for text, intents in intents_of.items():
        if len(intents) > 1 and not all(frozenset(pair) in explained
                                        for pair in combinations(intents, 2)):
            names = " and ".join(f"'{i}'" for i in sorted(intents))
            warnings.append(f"example '{text}' appears under intents {names}; keep it under one intent")
        for intent, times in sorted(intents.items()):
            if times > 1:
                warnings.append(f"example '{text}' appears {times} times under intent '{intent}'; "
                                "remove the duplicates")
    return warnings


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
    does not check: entities, roles and groups the domain does not list, and entity types it
    lists that no example annotates.
    """
    where = _where(domain)
    warnings = _intents_without_examples(data, domain)
    nlu_intents = set(data.intents)
    listed = set(domain.all_intents)
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
    warnings.extend(_entities_never_annotated(data, domain))
    return warnings


def training_warnings(data: TrainingData, domain: Domain | None = None) -> list[str]:
    """The warnings ``nlu-engine train`` shows (``data validate`` shows them too): why intents
    cannot be told apart, and what the data or the domain declares that no example teaches (a
    retrieval response, a lookup table, a synonym, a domain's intent or entity type)."""
    warnings = [*separability_warnings(data), *response_warnings(data, domain), *section_warnings(data)]
    if domain is not None:
        warnings += [*_intents_without_examples(data, domain), *_entities_never_annotated(data, domain)]
    return warnings


# --- intents the classifier cannot tell apart ------------------------------------------------
def _texts_of(data: TrainingData) -> dict[str, set[str]]:
    """Each intent (a retrieval intent by its full key) -> the texts of its examples."""
    texts: dict[str, set[str]] = defaultdict(set)
    for message in data.messages:
        name = message.intent_response_key or message.intent
        if name and message.text.strip():
            texts[name].add(message.text)
    return texts


def _same_examples(data: TrainingData) -> list[list[str]]:
    """The groups (two intents or more, sorted) whose examples are the same texts."""
    by_texts: dict[frozenset[str], list[str]] = defaultdict(list)
    for name, texts in sorted(_texts_of(data).items()):
        by_texts[frozenset(texts)].append(name)
    return [names for names in by_texts.values() if len(names) > 1]


def _quoted(texts: set[str]) -> str:
    shown = ", ".join(f"'{t}'" for t in sorted(texts)[:QUOTED_EXAMPLES])
    return shown + (f", ... ({len(texts)} examples)" if len(texts) > QUOTED_EXAMPLES else "")


def _names(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def separability_warnings(data: TrainingData) -> list[str]:
    """Why the classifier cannot tell intents apart, one warning per cause: a single intent
    (every message is classified as it), intents whose examples are the same texts, an intent
    whose every example is also an example of others."""
    return _separability(data)[0]


def _separability(data: TrainingData) -> tuple[list[str], set[frozenset[str]]]:
    """The warnings of :func:`separability_warnings`, and the pairs of intents they explain (an
    example under both then needs no warning of its own)."""
    intents = data.intents
    if len(intents) == 1:
        return [f"only one intent, '{intents[0]}': every message will be classified as "
                f"'{intents[0]}'; add a second intent (what the bot should not act on can go "
                "under 'out_of_scope')"], set()
    texts_of = _texts_of(data)
    warnings: list[str] = []
    explained: set[frozenset[str]] = set()
    grouped: dict[str, frozenset[str]] = {}
    for names in _same_examples(data):
        grouped.update(dict.fromkeys(names, frozenset(names)))
        explained.update(frozenset(pair) for pair in combinations(names, 2))
        warnings.append(f"intents {_names(names)} share all their examples "
                        f"({_quoted(texts_of[names[0]])}): the classifier cannot tell them apart; "
                        "give each examples of its own, or merge them into one intent")
    intents_of: dict[str, set[str]] = defaultdict(set)
    for name, texts in texts_of.items():
        for text in texts:
            intents_of[text].add(name)
    for name, texts in sorted(texts_of.items()):
        others = set.intersection(*(intents_of[t] for t in texts)) - grouped.get(name, frozenset([name]))
        if others:
            explained.update(frozenset((name, other)) for other in others)
            warnings.append(f"every example of intent '{name}' is also an example of "
                            f"{_names(sorted(others))}: the classifier cannot tell '{name}' apart; "
                            f"give '{name}' examples of its own, or remove them from the others")
    return warnings, explained


# --- what no example teaches -----------------------------------------------------------------
def _where(domain: Domain) -> str:
    return ", ".join(domain.sources) or "the domain"


def response_warnings(data: TrainingData, domain: Domain | None = None) -> list[str]:
    """A retrieval intent's response (``utter_faq/ask_x``) without examples of ``faq/ask_x``:
    the ResponseSelector never selects it. ``domain`` names the file it came from."""
    keys = {m.intent_response_key for m in data.messages if m.intent_response_key}
    warnings = []
    for name in sorted(data.responses):
        key = name.removeprefix("utter_")
        if RESPONSE_IDENTIFIER_DELIMITER not in name or not name.startswith("utter_") or key in keys:
            continue
        where = (_where(domain) if domain is not None and name in domain.responses
                 else "the NLU data's 'responses:'")
        warnings.append(f"response '{name}' in {where} has no examples of retrieval intent "
                        f"'{key}', so the ResponseSelector never selects it; add examples under "
                        f"'- intent: {key}' or remove the response")
    return warnings


def _annotated_surfaces(data: TrainingData) -> set[str]:
    """The lower-cased text and value of every entity annotation."""
    found = set()
    for message in data.messages:
        for entity in message.entities:
            found.add(message.text[int(entity["start"]) : int(entity["end"])].lower())
            if entity.get("value") is not None:
                found.add(str(entity["value"]).lower())
    return found


def section_warnings(data: TrainingData) -> list[str]:
    """Lookup tables and synonyms that match no annotated entity: no extractor learns from a
    lookup no example annotates (RegexEntityExtractor uses only those named after an annotated
    entity type), and EntitySynonymMapper maps only values an extractor finds."""
    types, surfaces = set(data.entity_types), _annotated_surfaces(data)
    warnings = []
    for table in data.lookup_tables:
        name, elements = str(table["name"]), [str(e) for e in table.get("elements") or []]
        if name not in types and not any(e.lower() in surfaces for e in elements):
            warnings.append(f"lookup table '{name}' matches no annotated entity (no example "
                            f"annotates an entity of type '{name}' or any of its {len(elements)} "
                            "elements), "
                            "so no extractor learns from it; annotate a few of its elements as "
                            f"'{name}' entities in examples")
    forms: dict[str, list[str]] = defaultdict(list)
    for surface, value in data.synonyms.items():
        forms[str(value)].append(str(surface))
    for value, written in sorted(forms.items()):
        if not any(form.lower() in surfaces for form in [value, *written]):
            warnings.append(f"synonym '{value}' ({', '.join(sorted(written))}) matches no annotated "
                            "entity: EntitySynonymMapper maps only the values an extractor finds, "
                            "and no example teaches one to find these; annotate a few of them as "
                            "entities in examples")
    return warnings


def _intents_without_examples(data: TrainingData, domain: Domain) -> list[str]:
    nlu_intents = set(data.intents)
    return [f"intent '{intent}' is listed in {_where(domain)} but has no NLU examples; add "
            "examples or remove it from the domain"
            for intent in domain.intents if intent not in nlu_intents and intent not in DEFAULT_INTENTS]


def _entities_never_annotated(data: TrainingData, domain: Domain) -> list[str]:
    annotated = set(data.entity_types)
    return [f"entity '{name}' is listed in {_where(domain)} but no example annotates it, so no "
            "trained extractor finds it; annotate it in a few examples, or remove it from the "
            "domain (unless a pretrained extractor such as Duckling or spaCy sets it)"
            for name in domain.entities if name not in annotated]


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
