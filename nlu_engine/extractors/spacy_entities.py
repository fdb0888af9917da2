"""SpacyEntityExtractor: the named entities of the spaCy pipeline SpacyNLP loads, as in Rasa.

spaCy's pre-trained NER (``PERSON``, ``GPE``, ``ORG``, ``DATE``, ``MONEY``, ...) runs on each
message's text as written: SpacyNLP's docs are lowercased by default (``case_sensitive: false``)
and have NER switched off for speed, so this component parses the text again with the same spaCy
model with NER on (loaded once per process, without the parser). When SpacyNLP already made a doc
of the original text with NER (``case_sensitive: true`` and ``disable`` without ``ner``), its
entities are used as they are.

``dimensions`` keeps only the listed labels (all when unset). Each entity is Rasa's
``{entity, value, start, end, confidence: null, extractor}``. Nothing is trained or persisted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nlu_engine.contract.component import SPACY_DOC, EntityExtractor
from nlu_engine.contract.message import TEXT, Message
from nlu_engine.loaders.spacy_nlp import MODEL_KEY, get_doc, load_pipeline

EXTRACTOR_NAME = "SpacyEntityExtractor"
#: what the NER pipeline leaves out: the dependency parser (NER does not need it)
NER_DISABLE = ["parser"]


class SpacyEntityExtractor(EntityExtractor):
    """Adds spaCy's named entities to each message."""

    requires = (SPACY_DOC,)

    @dataclass(frozen=True, kw_only=True)
    class Config(EntityExtractor.Config):
        dimensions: list[str] | None = None

    config: Config

    def entities(self, doc: Any) -> list[dict[str, Any]]:
        """Rasa's entity dicts of a parsed doc, filtered by ``dimensions``."""
        found = [
            {"entity": ent.label_, "value": ent.text, "start": ent.start_char,
             "confidence": None, "end": ent.end_char, "extractor": EXTRACTOR_NAME}
            for ent in doc.ents
        ]
        if self.config.dimensions:
            found = [e for e in found if e["entity"] in self.config.dimensions]
        return found

    def process(self, messages: list[Message]) -> None:
        todo: dict[str, list[Message]] = {}
        for message in messages:
            doc = get_doc(message, TEXT)
            if doc is not None and doc.text == message.text and doc.has_annotation("ENT_IOB"):
                message.entities.extend(self.entities(doc))
            else:
                model = message.extra.get(MODEL_KEY)
                if model is None:
                    raise RuntimeError(f"{EXTRACTOR_NAME} needs SpacyNLP before it in the pipeline")
                todo.setdefault(model, []).append(message)
        for model, group in todo.items():
            nlp = load_pipeline(model, NER_DISABLE)
            for message, doc in zip(group, nlp.pipe([m.text for m in group]), strict=True):
                message.entities.extend(self.entities(doc))
