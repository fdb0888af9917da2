"""RegexEntityExtractor: entities straight from the training data's regexes and lookup tables.

Only patterns whose name is an entity type annotated somewhere in the training data are used
(a ``regex: account_number`` item extracts ``account_number`` entities only if some example
annotates an ``account_number``). A lookup table becomes one regex of its escaped elements,
each wrapped in ``\\b…\\b`` when ``use_word_boundaries`` (regexes are used as written).

At inference every match of every pattern (``re.finditer`` over the text, case-insensitive
unless ``case_sensitive``) is appended to the message's entities as
``{entity, start, end, value, extractor: "RegexEntityExtractor"}`` — without a confidence,
as in Rasa. Entities come in pattern order, then text order; an empty match is skipped (Rasa
would return an empty entity). Persisted as ``regex.json``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlu_engine.contract.component import EntityExtractor
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.patterns import PatternConfig, compile_patterns, extract_patterns

logger = logging.getLogger(__name__)

REGEX_FILE = "regex.json"
EXTRACTOR_NAME = "RegexEntityExtractor"


class RegexEntityExtractor(EntityExtractor):
    """Extracts entities whose type names a regex or lookup table of the training data."""

    requires = ()

    @dataclass(frozen=True, kw_only=True)
    class Config(PatternConfig):
        case_sensitive: bool = False

    config: Config

    def train(self, data: TrainingData) -> None:
        entity_types = set(data.entity_types)
        patterns = extract_patterns(
            data, self.config.use_regexes, self.config.use_lookup_tables, self.config.use_word_boundaries
        )
        self.patterns_ = [p for p in patterns if p["name"] in entity_types]
        self._compiled = compile_patterns(self.patterns_, self.config.case_sensitive)
        if not self.patterns_:
            logger.warning(
                f"{EXTRACTOR_NAME}: no regex or lookup table in the training data is "
                "named after an entity type, so nothing will be extracted; name a 'regex:' or "
                "'lookup:' item after an annotated entity",
            )

    def process(self, messages: list[Message]) -> None:
        if not hasattr(self, "patterns_"):
            raise RuntimeError(f"{EXTRACTOR_NAME} must be trained or loaded before use.")
        if not self.patterns_:
            return
        for message in messages:
            message.entities.extend(self.extract(message.text))

    def extract(self, text: str) -> list[dict[str, Any]]:
        """The entities the patterns find in ``text``."""
        if not text:
            return []
        entities = []
        for pattern, regex in zip(self.patterns_, self._compiled, strict=True):
            for match in regex.finditer(text):
                start, end = match.span()
                if start == end:  # a pattern that can match the empty string
                    continue
                entities.append(
                    {
                        "entity": pattern["name"],
                        "start": start,
                        "end": end,
                        "value": text[start:end],
                        "extractor": EXTRACTOR_NAME,
                    }
                )
        return entities

    def persist(self, directory: Path) -> None:
        with open(Path(directory) / REGEX_FILE, "w", encoding="utf-8") as f:
            json.dump(getattr(self, "patterns_", []), f, ensure_ascii=False, indent=1)

    @classmethod
    def load(cls, directory: Path, config: RegexEntityExtractor.Config) -> RegexEntityExtractor:
        extractor = cls(config)
        patterns = json.loads((Path(directory) / REGEX_FILE).read_text(encoding="utf-8"))
        if not isinstance(patterns, list):
            raise ValueError(f"{REGEX_FILE} must hold a list of patterns")
        extractor.patterns_ = [{"name": str(p["name"]), "pattern": str(p["pattern"])} for p in patterns]
        extractor._compiled = compile_patterns(extractor.patterns_, extractor.config.case_sensitive)
        return extractor

