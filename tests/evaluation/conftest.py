"""A small scored case shared by the metrics and reports tests."""

import pytest

from nlu_engine.contract.message import Message


def _entity(entity, start, end, text, extractor="X"):
    return {"entity": entity, "start": start, "end": end, "extractor": extractor,
            "value": text[start:end]}


def _result(text, intent, confidence, entities=()):
    tokens, position = [], 0
    for word in text.split(" "):
        tokens.append([position, position + len(word)])
        position += len(word) + 1
    return {"text": text, "intent": {"name": intent, "confidence": confidence},
            "entities": list(entities), "text_tokens": tokens, "intent_ranking": []}


@pytest.fixture
def booking_case():
    """Four gold messages and their parse results: one intent error, one entity too long, and a
    pre-trained extractor's entity."""
    texts = ["book paris", "hello", "book rome now", "bye"]
    golds = [
        Message(texts[0], intent="book", entities=[_entity("city", 5, 10, texts[0])]),
        Message(texts[1], intent="greet"),
        Message(texts[2], intent="book", entities=[_entity("city", 5, 9, texts[2])]),
        Message(texts[3], intent="bye"),
    ]
    results = [
        _result(texts[0], "book", 0.8, [_entity("city", 5, 10, texts[0], "DIETClassifier")]),
        _result(texts[1], "greet", 0.95),
        _result(texts[2], "greet", 0.55, [_entity("city", 5, 13, texts[2], "DIETClassifier")]),
        _result(texts[3], "bye", 0.7, [_entity("date", 0, 3, texts[3], "DucklingEntityExtractor")]),
    ]
    return golds, results
