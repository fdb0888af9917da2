"""FallbackClassifier: threshold, ambiguity, Rasa 3's ranking, gibberish in a trained model, and
what a threshold does to held-out predictions (the training notice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.classifiers.calibration import Calibration
from nlu_engine.classifiers.fallback import (
    FallbackClassifier,
    held_out_predictions,
    threshold_advice,
    training_notice,
    undo_fallback_prediction,
)
from nlu_engine.contract.component import INTENT, RESPONSE, Component
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


# --- what a threshold does to held-out predictions ------------------------------------------------
# 20 predictions: 16 right (confidences 0.45..0.95), 4 wrong (0.2..0.5)
RIGHT = [0.45, 0.5, 0.55, 0.6, 0.62, 0.65, 0.7, 0.72, 0.75, 0.8, 0.82, 0.85, 0.88, 0.9, 0.92, 0.95]
WRONG = [0.2, 0.3, 0.4, 0.5]
CONFIDENCES = RIGHT + WRONG
CORRECT = [True] * len(RIGHT) + [False] * len(WRONG)


def test_share_and_suggested_threshold() -> None:
    advice = threshold_advice(CONFIDENCES, CORRECT, 0.7)
    assert advice is not None
    # below 0.7: six right ones (0.45 .. 0.65) and the four wrong ones
    assert advice.share == pytest.approx(10 / 20)
    assert advice.accuracy == pytest.approx(16 / 20)
    assert advice.accuracy_at_threshold == pytest.approx(10 / 20)
    # no right prediction is below 0.45: every threshold up to it keeps all 16 (0.80); above it
    # the first right one falls back, 15 / 20 = 0.75 is more than a point lower
    assert advice.suggested_threshold == pytest.approx(0.45)
    assert advice.num_examples == 20
    assert threshold_advice([], [], 0.7) is None


def test_the_suggested_threshold_may_give_up_one_point_and_no_more() -> None:
    # 100 predictions, all right: losing one (0.01) is within the budget, losing two is not
    confidences = [0.3, 0.5] + [0.9] * 98
    advice = threshold_advice(confidences, [True] * 100, 0.3)
    assert advice is not None and advice.share == 0.0
    assert advice.suggested_threshold == pytest.approx(0.5)  # 0.51 would lose both
    # the grid stops at 0.99: a threshold of 1 would send everything to the fallback
    assert threshold_advice([1.0] * 10, [True] * 10, 0.3).suggested_threshold == pytest.approx(0.99)


class Classifier(Component):
    """A trained intent classifier as the notice sees it: what its calibration noted."""

    provides = (INTENT,)

    def __init__(self, notes: dict | None = None) -> None:
        super().__init__()
        if notes is not None:
            self.calibration_ = Calibration(examples=len(notes.get("held_out_correct", [])), notes=notes)


class Selector(Classifier):
    """A response selector: its own held-out predictions are of responses, not intents."""

    provides = (RESPONSE,)


def held_out(confidences: list[float], correct: list[bool]) -> dict:
    return {"held_out_accuracy": 0.8, "held_out_confidence": confidences, "held_out_correct": correct}


def test_the_notice_names_the_share_and_the_threshold_that_keeps_accuracy() -> None:
    pipeline = [Classifier(held_out(CONFIDENCES, CORRECT)), FallbackClassifier(threshold=0.7)]
    assert training_notice(pipeline) == (
        "FallbackClassifier threshold 0.7 sends 50.0 % of the held-out examples to nlu_fallback; "
        "0.45 keeps in-scope accuracy within a point of no fallback (confidences here are "
        "calibrated: README, Rasa projects)"
    )


def test_no_notice_up_to_a_tenth_of_the_held_out_examples() -> None:
    def notice(threshold: float) -> str | None:
        return training_notice([Classifier(held_out(CONFIDENCES, CORRECT)),
                                FallbackClassifier(threshold=threshold)])

    assert notice(0.35) is None  # 0.2 and 0.3 fall back: a tenth of 20
    assert notice(0.3) is None  # one of 20
    assert "sends 15.0 % of the held-out examples" in (notice(0.45) or "")  # 0.2, 0.3, 0.4


def test_no_notice_without_held_out_predictions() -> None:
    fallback = FallbackClassifier(threshold=0.9)
    assert training_notice([Classifier(), fallback]) is None  # no calibration_ at all
    assert training_notice([Classifier({}), fallback]) is None  # not calibrated: no notes
    assert training_notice([Classifier({"held_out_accuracy": 0.9}), fallback]) is None  # notes of before
    assert training_notice([Classifier(held_out([], [])), fallback]) is None
    assert training_notice([Classifier(held_out([0.5, 0.6], [True])), fallback]) is None  # do not match
    assert training_notice([Classifier(held_out(CONFIDENCES, CORRECT))]) is None  # no FallbackClassifier


def test_the_notice_reads_the_last_intent_classifier_before_the_fallback() -> None:
    sure = held_out([0.99] * 20, [True] * 20)
    unsure = held_out(CONFIDENCES, CORRECT)
    fallback = FallbackClassifier(threshold=0.7)
    # the response selector's held-out predictions are not the intents'
    assert training_notice([Classifier(sure), Selector(unsure), fallback]) is None
    assert training_notice([Classifier(unsure), Selector(sure), fallback]) is not None
    # a later intent classifier without notes is passed over; one after the fallback is not read
    assert held_out_predictions([Classifier(sure), Classifier(unsure), Classifier()]) == (
        CONFIDENCES, CORRECT)
    assert training_notice([Classifier(sure), fallback, Classifier(unsure)]) is None


def test_the_notice_reads_a_stored_calibration(tmp_path: Path) -> None:
    Calibration(examples=20, notes=held_out(CONFIDENCES, CORRECT)).persist(tmp_path)
    classifier = Classifier()
    classifier.calibration_ = Calibration.load(tmp_path)
    notice = training_notice([classifier, FallbackClassifier(threshold=0.7)])
    assert notice is not None and notice.startswith("FallbackClassifier threshold 0.7 sends 50.0 %")
