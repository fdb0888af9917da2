"""Calibration, out-of-scope scores and the fallback sweep of an evaluation (evaluation/confidence.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.contract.message import Message
from nlu_engine.evaluation import evaluate
from nlu_engine.evaluation.confidence import auroc, ece_noise_floor, evaluate_confidence, suggested_threshold
from nlu_engine.evaluation.reports import format_summary, write_reports
from tests.extras import requires_extra


def parsed(name: str, confidence: float, fallback: float | None = None) -> dict[str, Any]:
    ranking = [{"name": name, "confidence": confidence}]
    if fallback is not None and confidence < fallback:
        top = {"name": "nlu_fallback", "confidence": fallback}
        return {"text": "", "intent": top, "entities": [], "intent_ranking": [top, *ranking]}
    return {"text": "", "intent": ranking[0], "entities": [], "intent_ranking": ranking}


def test_out_of_scope_messages_are_caught_by_the_fallback_or_by_their_own_intent() -> None:
    golds = [Message(text=str(i), intent=i) for i in ("a", "a", "b", "b", "out_of_scope", "out_of_scope",
                                                        "out_of_scope")]
    results = [parsed("a", 0.9, 0.5), parsed("a", 0.4, 0.5), parsed("a", 0.8, 0.5), parsed("b", 0.7, 0.5),
               parsed("a", 0.2, 0.5), parsed("out_of_scope", 0.9, 0.5), parsed("b", 0.6, 0.5)]
    scores = evaluate_confidence(golds, results)
    assert scores is not None and scores.num_out_of_scope == 3
    oos = scores.out_of_scope
    assert oos["out_of_scope_recall"] == pytest.approx(2 / 3)  # a fallback and its own intent
    assert oos["out_of_scope_precision"] == pytest.approx(2 / 3)  # one in-scope message fell back
    assert oos["in_scope_accuracy"] == pytest.approx(2 / 4)  # the right one that fell back is an error
    assert oos["in_scope_accuracy_without_fallback"] == pytest.approx(3 / 4)  # one "b" was taken for "a"
    # in scope 0.9, 0.4, 0.8, 0.7 against 0.2, 0.9, 0.6: 7 of 12 pairs ranked right, one tie
    assert oos["auroc"] == pytest.approx(7.5 / 12)


def test_the_sweep_suggests_the_largest_threshold_within_one_point() -> None:
    golds = [Message(text=str(i), intent="a") for i in range(200)]
    # right with confidences 0.50..0.99, two wrong at 0.3
    results = [parsed("a", 0.5 + (i % 50) / 100) for i in range(198)] + [parsed("b", 0.3)] * 2
    scores = evaluate_confidence(golds, results)
    assert scores is not None
    # a threshold of 0.51 drops the four messages at 0.50 (2 points); 0.50 drops none of the right ones
    assert scores.suggested_threshold == pytest.approx(0.5)
    assert suggested_threshold(scores.sweep) == scores.suggested_threshold
    assert scores.accuracy == pytest.approx(0.99) and not scores.out_of_scope


def test_the_ece_noise_floor_tells_calibrated_confidences_from_overconfident_ones() -> None:
    import numpy as np

    from nlu_engine.classifiers.calibration import expected_calibration_error

    rng = np.random.default_rng(7)
    confidences = rng.uniform(0.3, 1.0, 600)
    calibrated = rng.random(600) < confidences  # right as often as they say
    overconfident = rng.random(600) < confidences - 0.15
    for correct, real in ((calibrated, False), (overconfident, True)):
        ece = expected_calibration_error(confidences, correct)[0]
        floor, p_value = ece_noise_floor(confidences, ece)
        assert 0.0 < floor < 0.06  # a calibrated model shows an ECE above 0 on 600 messages
        assert (p_value < 0.05) is real, (ece, floor, p_value)
    # more messages, a lower floor; the same inputs, the same answer (seeded)
    assert ece_noise_floor(np.repeat(confidences, 10), 0.0)[0] < ece_noise_floor(confidences, 0.0)[0]
    assert ece_noise_floor(confidences, 0.03) == ece_noise_floor(confidences, 0.03)
    assert ece_noise_floor(np.zeros(0), 0.1) == (0.0, 1.0)


def test_auroc_of_separated_and_identical_scores() -> None:
    import numpy as np

    assert auroc(np.array([0.9, 0.8]), np.array([0.1, 0.2])) == 1.0
    assert auroc(np.array([0.5, 0.5]), np.array([0.5])) == 0.5


def test_reports_carry_calibration_and_a_notice_without_out_of_scope_data(tmp_path: Path) -> None:
    golds = [Message(text=str(i), intent="a" if i % 2 else "b") for i in range(40)]
    results = [parsed("a" if i % 2 else "b", 0.9 if i % 5 else 0.6) for i in range(40)]
    evaluation = evaluate(golds, results)
    summary = write_reports(evaluation, tmp_path, plot=False)
    confidence = json.loads((tmp_path / "summary.json").read_text())["confidence"]
    assert confidence["ece"] == pytest.approx(summary["confidence"]["ece"])
    assert confidence["ece"] == pytest.approx(0.8 * 0.1 + 0.2 * 0.4)  # all right: gaps 0.1 and 0.4
    assert 0.0 < confidence["ece_floor"] < confidence["ece"] and confidence["ece_p_value"] < 0.05
    assert "miscalibrated beyond chance" in format_summary(summary)
    assert any("no examples of the out-of-scope intent 'out_of_scope'" in n for n in summary["notices"])
    assert "Confidence" in (tmp_path / "index.html").read_text()


@requires_extra("plot")
def test_plots_include_the_reliability_diagram_and_the_sweep(tmp_path: Path) -> None:
    golds = [Message(text=str(i), intent="a" if i % 2 else "out_of_scope") for i in range(40)]
    results = [parsed("a", 0.3 + i / 80, 0.5) for i in range(40)]
    summary = write_reports(evaluate(golds, results), tmp_path, plot=True)
    assert {"intent_reliability.png", "fallback_sweep.png"} <= set(summary["files"])
    assert (tmp_path / "fallback_sweep.png").stat().st_size > 5000


def test_held_out_intents_are_seeded_and_leave_two_to_train() -> None:
    from nlu_engine.contract.errors import DataError
    from nlu_engine.contract.training_data import TrainingData
    from nlu_engine.evaluation.experiments import held_out_intents, without_intents

    data = TrainingData(messages=[Message(text=f"{i} {n}", intent=n) for n in "abcde" for i in range(3)])
    chosen = held_out_intents(data, 2, seed=42)
    assert chosen == held_out_intents(data, 2, seed=42) and len(set(chosen)) == 2
    with pytest.raises(DataError, match="--hold-out-intents 4: the data has 5 intents"):
        held_out_intents(data, 4, seed=42)
    test = [Message(text="x", intent=chosen[0], entities=[{"entity": "e", "start": 0, "end": 1}]),
            Message(text="y", intent=next(n for n in "abcde" if n not in chosen))]
    train, relabelled = without_intents(data, test, chosen, "out_of_scope")
    assert not set(chosen) & {m.intent for m in train.messages}
    assert relabelled[0].intent == "out_of_scope" and relabelled[0].entities == []
    assert relabelled[1] is test[1]
