"""The calibration of ``confidence_entity`` (nlu_engine.evaluation.entity_confidence) against
hand-computed cases, and its place in ``evaluate``'s summary."""

import numpy as np
import pytest

from nlu_engine.contract.message import Message
from nlu_engine.evaluation.entity_confidence import (
    BINS,
    THRESHOLDS,
    confidence_line,
    evaluate_entity_confidence,
    span_correctness,
    threshold_table,
)
from nlu_engine.evaluation.metrics import evaluate, evaluate_entities


def ent(entity, start, end, confidence=None, extractor="DIETClassifier"):
    e = {"entity": entity, "start": start, "end": end, "extractor": extractor}
    if confidence is not None:
        e["confidence_entity"] = confidence
    return e


def test_a_prediction_is_right_when_its_type_and_span_are_a_gold_entity_not_used_before():
    gold = [("city", 0, 5), ("date", 6, 10)]
    predicted = [ent("city", 0, 5, 0.9), ent("city", 0, 5, 0.8), ent("date", 6, 9, 0.7),
                 ent("time", 6, 10, 0.6), ent("date", 6, 10)]
    assert span_correctness(gold, predicted) == [
        (0.9, True), (0.8, False), (0.7, False), (0.6, False), (None, True)]


def test_ece_bins_and_shares_by_hand():
    # two bins: 0.95 (2 entities, 1 right) and 0.25 (2 entities, none right)
    scored = [(0.95, True), (0.95, False), (0.25, False), (0.25, False)]
    evaluation = evaluate_entity_confidence(scored, num_gold=3)
    assert evaluation is not None
    assert evaluation.ece == pytest.approx(0.5 * 0.45 + 0.5 * 0.25)
    assert evaluation.max_gap == pytest.approx(0.45)
    assert [(b["low"], b["count"]) for b in evaluation.bins] == [(0.2, 2), (0.9, 2)]
    assert evaluation.mean_confidence == pytest.approx(0.6)
    assert evaluation.precision == pytest.approx(0.25)
    assert evaluation.summary()["bins"] == BINS == 10
    assert 0.0 <= evaluation.ece_p_value <= 1.0 and evaluation.ece_floor > 0


def test_a_threshold_removes_the_wrong_entities_below_it_and_counts_the_right_ones_it_costs():
    rows = threshold_table(
        confidence=np.array([0.95, 0.85, 0.45, 0.35, 0.2]),
        right=np.array([True, False, True, False, False]),
        num_gold=4, num_unscored_right=1, thresholds=(0.3, 0.5, 0.9))
    at = {row["threshold"]: row for row in rows}
    # 0.3 drops the 0.2 (wrong): 1 of 3 wrong, 0 of 2 right; kept 4 + 1 unscored, 3 right
    assert at[0.3]["wrong_removed"] == pytest.approx(1 / 3) and at[0.3]["right_removed"] == 0.0
    assert at[0.3]["precision"] == pytest.approx(3 / 5) and at[0.3]["recall"] == pytest.approx(3 / 4)
    # 0.5 drops 0.45 (right), 0.35 and 0.2 (wrong)
    assert at[0.5]["wrong_removed"] == pytest.approx(2 / 3) and at[0.5]["right_removed"] == 0.5
    assert at[0.5]["f1"] == pytest.approx(2 * 2 / (4 + 3))
    # 0.9 keeps the 0.95 and the unscored right entity
    assert at[0.9]["precision"] == 1.0 and at[0.9]["recall"] == 0.5


def test_nothing_scored_without_confidences():
    assert evaluate_entity_confidence([(None, True), (None, False)], num_gold=2) is None
    assert evaluate_entity_confidence([], num_gold=0) is None


def test_evaluate_reports_the_entity_ece_per_extractor_in_the_summary():
    text = "fly to paris tomorrow"
    golds = [Message(text, intent="fly", entities=[ent("city", 7, 12), ent("date", 13, 21)])]
    results = [{"text": text, "intent": {"name": "fly", "confidence": 0.9}, "intent_ranking": [],
                "entities": [ent("city", 7, 12, 0.99), ent("date", 13, 21, 0.4, "CRFEntityExtractor"),
                             ent("city", 0, 3, 0.4), ent("date", 13, 21, extractor="RegexEntityExtractor")]}]
    summary = evaluate(golds, results).summary()["entities"]
    diet = summary["DIETClassifier"]["confidence"]
    assert diet["num_scored"] == 2 and diet["precision"] == 0.5
    assert diet["ece"] == pytest.approx((abs(0.99 - 1) + abs(0.4 - 0)) / 2)
    assert [row["threshold"] for row in diet["thresholds"]] == list(THRESHOLDS)
    assert summary["CRFEntityExtractor"]["confidence"]["precision"] == 1.0
    assert "confidence" not in summary["RegexEntityExtractor"]  # no confidences, no calibration
    line = confidence_line("DIETClassifier", diet)
    assert "expected calibration error 0.2050 over 2 entities" in line
    assert "a threshold of 0.5 drops 100% of the wrong entities and 0% of the right ones" in line


def test_the_evaluation_keeps_the_bins_for_the_reliability_table():
    text = "to rome"
    golds = [Message(text, intent="fly", entities=[ent("city", 3, 7)])]
    results = [{"text": text, "entities": [ent("city", 3, 7, 0.97)]}]
    confidence = evaluate_entities(golds, results, "DIETClassifier").confidence
    assert confidence is not None
    assert confidence.bins == [{"low": 0.9, "high": 1.0, "count": 1, "accuracy": 1.0, "confidence": 0.97}]
    assert confidence.at(0.9)["right_removed"] == 0.0 and confidence.at(0.95) is None
