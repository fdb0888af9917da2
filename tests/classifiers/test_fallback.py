"""FallbackClassifier: threshold, ambiguity, Rasa 3's ranking, and gibberish in a trained model."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.classifiers.fallback import FallbackClassifier, undo_fallback_prediction
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message


def predicted(*ranking: tuple[str, float]) -> Message:
    message = Message("text")
    message.intent_ranking = [{"name": n, "confidence": c} for n, c in ranking]
    if ranking:
        message.intent, message.intent_confidence = ranking[0]
    return message


def test_low_confidence_falls_back_with_threshold_as_confidence() -> None:
    message = predicted(("greet", 0.25), ("bye", 0.05))
    FallbackClassifier().process([message])
    assert message.as_parse_result()["intent"] == {"name": "nlu_fallback", "confidence": 0.3}
    assert message.intent_ranking == [
        {"name": "nlu_fallback", "confidence": 0.3},
        {"name": "greet", "confidence": 0.25},
        {"name": "bye", "confidence": 0.05},
    ]


def test_ambiguous_top_two_fall_back() -> None:
    message = predicted(("greet", 0.48), ("bye", 0.42), ("thank", 0.1))
    FallbackClassifier(threshold=0.3, ambiguity_threshold=0.1).process([message])
    assert message.intent == "nlu_fallback"
    assert [r["name"] for r in message.intent_ranking] == ["nlu_fallback", "greet", "bye", "thank"]


def test_confident_prediction_is_kept() -> None:
    message = predicted(("greet", 0.7), ("bye", 0.2))
    FallbackClassifier().process([message])
    assert (message.intent, message.intent_confidence) == ("greet", 0.7)
    assert [r["name"] for r in message.intent_ranking] == ["greet", "bye"]


def test_single_intent_ranking_is_never_ambiguous() -> None:
    message = predicted(("greet", 0.35))
    FallbackClassifier(ambiguity_threshold=0.5).process([message])
    assert message.intent == "greet"


def test_no_prediction_falls_back() -> None:
    message = Message("text")  # e.g. a keyword classifier that matched nothing
    FallbackClassifier(threshold=0.6).process([message])
    assert (message.intent, message.intent_confidence) == ("nlu_fallback", 0.6)
    assert message.intent_ranking == [{"name": "nlu_fallback", "confidence": 0.6}]


def test_undo() -> None:
    message = predicted(("greet", 0.2), ("bye", 0.1))
    FallbackClassifier().process([message])
    undo_fallback_prediction(message)
    assert (message.intent, message.intent_confidence) == ("greet", 0.2)
    assert [r["name"] for r in message.intent_ranking] == ["greet", "bye"]


def test_needs_an_intent_classifier_before_it() -> None:
    from nlu_engine.assembly.config import load_config

    with pytest.raises(ConfigError, match="intent"):
        load_config(
            {
                "pipeline": [
                    {"name": "WhitespaceTokenizer"},
                    {"name": "nlu_engine.classifiers.fallback.FallbackClassifier"},
                ]
            }
        )


def test_gibberish_gives_nlu_fallback(tmp_path: Path) -> None:
    from nlu_engine.assembly.model import Model, train
    from nlu_engine.contract.training_data import TrainingData

    examples = {
        "greet": ["hello", "hi there", "good morning", "hey"],
        "bye": ["goodbye", "see you later", "bye bye", "good night"],
        "thank": ["thanks", "thank you", "many thanks", "cheers"],
        "weather": ["is it raining", "weather forecast", "will it snow", "how hot is it"],
    }
    data = TrainingData(
        messages=[Message(text, intent=intent) for intent, texts in examples.items() for text in texts]
    )
    config = {
        "language": "en",
        "pipeline": [
            {"name": "WhitespaceTokenizer"},
            {"name": "CountVectorsFeaturizer"},
            {"name": "LogisticRegressionClassifier"},
            {"name": "nlu_engine.classifiers.fallback.FallbackClassifier", "threshold": 0.4},
        ],
    }
    model = Model.load(train(config, data, out=tmp_path, fixed_model_name="fallback", log=None))
    gibberish = model.parse("qwxz vbnmk plorf")
    assert gibberish["intent"] == {"name": "nlu_fallback", "confidence": 0.4}
    assert gibberish["intent_ranking"][0] == {"name": "nlu_fallback", "confidence": 0.4}
    assert {r["name"] for r in gibberish["intent_ranking"][1:]} == set(examples)
    assert model.parse("thank you so much")["intent"]["name"] == "thank"
