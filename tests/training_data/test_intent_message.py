"""``/intent@confidence{entities}`` messages, unpacked as Rasa's ``unpack_regex_message`` does."""

from __future__ import annotations

import logging

import pytest

from nlu_engine.training_data.intent_message import unpack_intent_message

INTENTS = {"greet", "inform", "restart"}


def test_an_intent_alone() -> None:
    assert unpack_intent_message("  /greet ", INTENTS) == {
        "text": "/greet", "intent": {"name": "greet", "confidence": 1.0},
        "intent_ranking": [{"name": "greet", "confidence": 1.0}], "entities": []}


def test_confidence_and_entities() -> None:
    text = '/inform@0.75{"city": "Paris", "date": ["monday", "friday"]}'
    result = unpack_intent_message(text, INTENTS)
    assert result is not None and result["intent"] == {"name": "inform", "confidence": 0.75}
    start, end = text.index("{"), len(text)
    assert result["entities"] == [
        {"entity": "city", "value": "Paris", "start": start, "end": end, "extractor": "RegexMessageHandler"},
        {"entity": "date", "value": "monday", "start": start, "end": end, "extractor": "RegexMessageHandler"},
        {"entity": "date", "value": "friday", "start": start, "end": end, "extractor": "RegexMessageHandler"},
    ]


@pytest.mark.parametrize(("confidence", "expected"), [("@2", 1.0), ("@0.1.2", 0.0), ("@.5", 0.5)])
def test_confidence_is_clipped_or_zero(confidence: str, expected: float) -> None:
    result = unpack_intent_message(f"/greet{confidence}", INTENTS)
    assert result is not None and result["intent"]["confidence"] == expected


def test_entities_outside_the_domain_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        result = unpack_intent_message('/inform{"city": "Rome", "color": "red"}', INTENTS, {"city"})
    assert result is not None and [e["entity"] for e in result["entities"]] == ["city"]
    assert any("'color'" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("text", ['/inform{"city": }', '/inform{"city" "x"}', '/inform{[1]}'])
def test_broken_entities_keep_the_intent(text: str) -> None:
    result = unpack_intent_message(text, INTENTS)
    assert result is not None and result["intent"]["name"] == "inform" and result["entities"] == []


def test_what_follows_the_entities_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        result = unpack_intent_message('/inform{"city": "Rome"} and more', INTENTS)
    assert result is not None and [e["value"] for e in result["entities"]] == ["Rome"]
    assert any("ignored what follows" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("text", ["hello /greet", "greet", "/unknown_intent", "/", "/{}", ""])
def test_other_text_is_not_an_intent_message(text: str) -> None:
    assert unpack_intent_message(text, INTENTS) is None
