"""Response selection scores, checked against scikit-learn's report (what Rasa writes)."""

from __future__ import annotations

import pytest

from nlu_engine.contract.message import Message
from nlu_engine.evaluation.metrics import evaluate
from nlu_engine.evaluation.responses import evaluate_response_selection, predicted_response


def selector_output(retrieval: str | None, key: str | None, confidence: float = 0.8) -> dict:
    """What ResponseSelectors write: under the retrieval intent's name, or under default."""
    name = retrieval or "default"
    prediction = {"responses": [{"text": "..."}], "confidence": confidence,
                  "intent_response_key": key, "utter_action": f"utter_{key}"}
    ranking = [{"confidence": confidence, "intent_response_key": key}]
    return {"all_retrieval_intents": ["faq", "chitchat"],
            name: {"response": prediction, "ranking": ranking}}


def result(text: str, intent: str, selector: dict | None) -> dict:
    parsed = {"text": text, "intent": {"name": intent, "confidence": 0.9}, "entities": [],
              "intent_ranking": [{"name": intent, "confidence": 0.9}]}
    if selector is not None:
        parsed["response_selector"] = selector
    return parsed


def gold(text: str, key: str | None, intent: str | None = None) -> Message:
    return Message(text, intent=intent or (key.split("/")[0] if key else "greet"), intent_response_key=key)


def test_the_selector_of_the_gold_intent_else_default() -> None:
    both = {**selector_output("faq", "faq/ask_name"), **selector_output(None, "chitchat/ask_weather")}
    assert predicted_response("faq", result("x", "faq", both)) == ("faq/ask_name", 0.8)
    assert predicted_response("chitchat", result("x", "faq", both)) == ("chitchat/ask_weather", 0.8)
    assert predicted_response("greet", result("x", "greet", None)) == ("", 0.0)


def test_scores_match_scikit_learn_and_rasas_files() -> None:
    from sklearn import metrics

    golds = [gold("a", "faq/ask_name"), gold("b", "faq/ask_name"), gold("c", "faq/ask_age"),
             gold("d", "chitchat/ask_weather"), gold("e", None)]
    results = [
        result("a", "faq", selector_output("faq", "faq/ask_name", 0.9)),
        result("b", "faq", selector_output("faq", "faq/ask_age", 0.6)),
        result("c", "faq", selector_output("faq", "faq/ask_age", 0.7)),
        result("d", "chitchat", selector_output("faq", "faq/ask_name", 0.5)),  # no chitchat selector
        result("e", "greet", selector_output("faq", "faq/ask_name")),
    ]
    evaluation = evaluate_response_selection(golds, results)
    assert evaluation is not None and evaluation.num_examples == 4  # e has no response key
    targets = ["faq/ask_name", "faq/ask_name", "faq/ask_age", "chitchat/ask_weather"]
    predictions = ["faq/ask_name", "faq/ask_age", "faq/ask_age", ""]
    expected = metrics.classification_report(targets, predictions, labels=sorted(set(targets)),
                                             output_dict=True, zero_division=0)
    report = evaluation.report
    for key in sorted(set(targets)):
        for field in ("precision", "recall", "f1-score", "support"):
            assert report[key][field] == pytest.approx(expected[key][field]), (key, field)
    assert report["accuracy"] == pytest.approx(metrics.accuracy_score(targets, predictions))
    assert report["weighted avg"]["f1-score"] == pytest.approx(expected["weighted avg"]["f1-score"])
    assert report["faq/ask_name"]["confused_with"] == {"faq/ask_age": 1}
    assert report["chitchat/ask_weather"]["confused_with"] == {"": 1}
    assert evaluation.errors == [
        {"text": "b", "intent_response_key_target": "faq/ask_name",
         "intent_response_key_prediction": {"name": "faq/ask_age", "confidence": 0.6}},
        {"text": "d", "intent_response_key_target": "chitchat/ask_weather",
         "intent_response_key_prediction": {"name": "", "confidence": 0.0}},
    ]
    assert evaluation.correct_confidences == [0.9, 0.7] and evaluation.wrong_confidences == [0.6, 0.0]


def test_fewer_than_two_response_keys_are_not_scored() -> None:
    golds = [gold("a", "faq/ask_name"), gold("b", None)]
    results = [result("a", "faq", selector_output(None, "faq/ask_name")), result("b", "greet", None)]
    assert evaluate_response_selection(golds, results) is None
    assert evaluate(golds, results).summary().get("response_selection") is None


def test_the_summary_has_response_selection() -> None:
    golds = [gold("a", "faq/ask_name"), gold("b", "faq/ask_age")]
    results = [result("a", "faq", selector_output(None, "faq/ask_name")),
               result("b", "faq", selector_output(None, "faq/ask_name"))]
    summary = evaluate(golds, results).summary()["response_selection"]
    assert summary["accuracy"] == 0.5 and summary["num_examples"] == 2 and summary["num_errors"] == 1
