"""A Rasa ``domain.yml``: what of it concerns NLU, and what is counted as skipped.

The engine reads from a domain the ``intents`` and ``entities`` (with their ``roles`` and
``groups``) for ``nlu-engine data validate`` and for ``/intent`` messages, and the
``responses`` of retrieval intents (``utter_faq/ask_name``) for the ResponseSelector. Slots,
forms, actions and the other responses belong to the dialogue and are only counted.

A domain is a file or a folder of YAML files, merged as Rasa merges them. Intents and entities
may be plain names or one-key mappings (``- greet: {use_entities: []}``,
``- city: {roles: [from, to]}``). A malformed domain is a one-line error naming the file and
line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nlu_engine.contract.errors import DataError, yaml_problem
from nlu_engine.contract.message import RESPONSE_IDENTIFIER_DELIMITER
from nlu_engine.training_data.rasa_markdown import read_text_file
from nlu_engine.training_data.yaml_limits import safe_load

#: the intents every Rasa domain has (rasa/shared/core/constants.py DEFAULT_INTENTS)
DEFAULT_INTENTS = ("restart", "back", "out_of_scope", "session_start", "nlu_fallback")
#: dialogue parts of a domain, counted as skipped
DIALOGUE_KEYS = ("slots", "forms", "actions")
DOMAIN_SUFFIXES = (".yml", ".yaml")


@dataclass
class Domain:
    """The NLU-relevant parts of a Rasa domain, and counts of the rest."""

    intents: list[str] = field(default_factory=list)
    #: entity type -> {"roles": [...], "groups": [...]} (empty lists when none are declared)
    entities: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: dialogue parts by kind (slots, forms, actions) -> how many there are
    dialogue: dict[str, int] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    @property
    def all_intents(self) -> list[str]:
        """The domain's intents and Rasa's default intents, as Rasa's ``Domain.intents``."""
        return sorted(set(self.intents) | set(DEFAULT_INTENTS))

    def retrieval_responses(self) -> dict[str, list[dict[str, Any]]]:
        """The responses of retrieval intents (``utter_faq/ask_name``), for the ResponseSelector."""
        return {k: v for k, v in self.responses.items() if RESPONSE_IDENTIFIER_DELIMITER in k}

    def merge(self, other: Domain) -> Domain:
        entities = {name: {kind: list(values) for kind, values in spec.items()}
                    for name, spec in self.entities.items()}
        for name, spec in other.entities.items():
            target = entities.setdefault(name, {"roles": [], "groups": []})
            for kind in ("roles", "groups"):
                target[kind] += [v for v in spec[kind] if v not in target[kind]]
        counts = dict(self.dialogue)
        for kind, number in other.dialogue.items():
            counts[kind] = counts.get(kind, 0) + number
        return Domain(
            intents=self.intents + [i for i in other.intents if i not in self.intents],
            entities=entities,
            responses={**self.responses, **other.responses},
            dialogue=counts,
            sources=self.sources + other.sources,
        )


def read_domain(path: str | Path) -> Domain:
    """The domain in a file, or merged from the YAML files of a folder (sorted, recursive)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in DOMAIN_SUFFIXES
                       and not any(part.startswith(".") for part in p.relative_to(path).parts))
        if not files:
            raise DataError(f"{path}: no domain files (.yml) in this folder")
        domain = Domain()
        for file in files:
            domain = domain.merge(parse_domain(read_text_file(file), str(file)))
        return domain
    if not path.is_file():
        raise DataError(f"{path}: domain not found; give the path of domain.yml (--domain)")
    return parse_domain(read_text_file(path), str(path))


def parse_domain(content: str, source: str) -> Domain:
    """A domain from YAML text; ``source`` names it in errors."""
    try:
        raw = safe_load(content)
    except yaml.YAMLError as error:
        line, problem = yaml_problem(error, content)
        raise DataError(f"{source}{line}: invalid YAML in the domain ({problem}); fix the syntax") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise DataError(f"{source}: a domain must be a mapping with 'intents', 'entities', "
                        "'responses', ...")
    responses = raw.get("responses") or {}
    if not isinstance(responses, dict):
        raise DataError(f"{source}: 'responses' must map 'utter_name' to a list of responses")
    return Domain(
        intents=[name for name, _ in _named_items(raw.get("intents"), "intents", source)],
        entities={name: _entity_spec(spec, name, source)
                  for name, spec in _named_items(raw.get("entities"), "entities", source)},
        responses={str(k): v for k, v in responses.items()},
        dialogue={key: len(raw[key]) for key in DIALOGUE_KEYS
                  if isinstance(raw.get(key), list | dict) and raw[key]},
        sources=[source],
    )


def _named_items(items: Any, key: str, source: str) -> list[tuple[str, Any]]:
    """``(name, properties)`` of a list of names or one-key mappings."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise DataError(f"{source}: '{key}' must be a list of names")
    found = []
    for item in items:
        if isinstance(item, str):
            found.append((item, None))
        elif isinstance(item, dict) and len(item) == 1:
            name, properties = next(iter(item.items()))
            found.append((str(name), properties))
        else:
            raise DataError(f"{source}: an item of '{key}' must be a name or 'name: {{...}}', "
                            f"got {str(item)[:80]!r}")
    return found


def _entity_spec(properties: Any, name: str, source: str) -> dict[str, list[str]]:
    spec: dict[str, list[str]] = {"roles": [], "groups": []}
    if properties is None:
        return spec
    if not isinstance(properties, dict):
        raise DataError(f"{source}: entity '{name}' must be a name or 'name: {{roles: [...]}}'")
    for kind in spec:
        values = properties.get(kind) or []
        if not isinstance(values, list):
            raise DataError(f"{source}: '{kind}' of entity '{name}' must be a list")
        spec[kind] = [str(v) for v in values]
    return spec
