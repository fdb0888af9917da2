"""EntitySynonymMapper: replace an extracted entity's value by its canonical form.

Training learns ``{surface form (lower-cased): value}`` from the data's ``synonym:`` items
(``TrainingData.synonyms``) and from every annotated entity whose ``value`` differs from its
text (``[NYC](city:New York)``). A surface form mapped to two different values is a conflict:
a warning names it and the last definition wins, as in Rasa.

At inference, for each entity already in the message (from any earlier extractor), if
``str(value).lower()`` is a known surface form, ``value`` becomes the canonical value and
``"EntitySynonymMapper"`` is appended to the entity's ``processors``. Nothing else of the
entity changes: type, span, confidences, ``role``, ``group`` and ``extractor`` are kept.
It must come after the entity extractors. Persisted as ``synonyms.json``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from nlu_engine.contract.component import ENTITIES, Component
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData

logger = logging.getLogger(__name__)

SYNONYMS_FILE = "synonyms.json"
PROCESSOR_NAME = "EntitySynonymMapper"


class EntitySynonymMapper(Component):
    """Maps entity values to their synonyms' canonical values (case-insensitive lookup)."""

    requires = (ENTITIES,)
    provides = ()

    # --- training ---------------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        self.synonyms_: dict[str, str] = {}
        for surface, value in data.synonyms.items():
            self._add(surface, value)
        for message in data.messages:
            for entity in message.entities:
                value = entity.get("value")
                if value is None:
                    continue
                self._add(message.text[int(entity["start"]) : int(entity["end"])], value)

    def _add(self, surface: Any, value: Any) -> None:
        original, replacement = str(surface), str(value)
        if original == replacement:
            return
        key = original.lower()
        previous = self.synonyms_.get(key)
        if previous is not None and previous != replacement:
            logger.warning(
                f"{PROCESSOR_NAME}: conflicting synonyms for '{key}': "
                f"'{previous}' is replaced by '{replacement}'; remove one of the definitions "
                "from the training data",
            )
        self.synonyms_[key] = replacement

    # --- inference --------------------------------------------------------------------------
    def process(self, messages: list[Message]) -> None:
        synonyms = getattr(self, "synonyms_", None)
        if synonyms is None:
            raise RuntimeError(f"{PROCESSOR_NAME} must be trained or loaded before use.")
        if not synonyms:
            return
        for message in messages:
            for entity in message.entities:
                replace_synonym(entity, synonyms)

    # --- persistence ------------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        with open(Path(directory) / SYNONYMS_FILE, "w", encoding="utf-8") as f:
            json.dump(getattr(self, "synonyms_", {}), f, ensure_ascii=False, indent=1, sort_keys=True)

    @classmethod
    def load(cls, directory: Path, config: EntitySynonymMapper.Config) -> EntitySynonymMapper:
        mapper = cls(config)
        path = Path(directory) / SYNONYMS_FILE
        synonyms = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        if not isinstance(synonyms, dict):
            raise ValueError(f"{path} must hold a mapping of surface forms to values")
        mapper.synonyms_ = {str(k).lower(): str(v) for k, v in synonyms.items()}
        return mapper


def replace_synonym(entity: dict[str, Any], synonyms: dict[str, str]) -> bool:
    """Map one entity's value in place; True if it was replaced."""
    value = entity.get("value")
    if value is None:
        return False
    canonical = synonyms.get(str(value).lower())
    if canonical is None:
        return False
    entity["value"] = canonical
    processors = entity.get("processors")
    if isinstance(processors, list):
        processors.append(PROCESSOR_NAME)
    else:
        entity["processors"] = [PROCESSOR_NAME]
    return True
