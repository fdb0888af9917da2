"""The model's fallback threshold on the test data (evaluation/thresholds.py): the share of test
messages it sends to nlu_fallback and the threshold that keeps accuracy within a point, in
summary.json, the terminal summary and index.html."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from nlu_engine.classifiers.fallback import FallbackClassifier
from nlu_engine.contract.message import Message
from nlu_engine.evaluation import evaluate, evaluate_model, format_summary, write_reports
from nlu_engine.evaluation.thresholds import evaluate_threshold, model_threshold
from tests.conftest import noisy_nlu


def parsed(name: str, confidence: float, threshold: float = 0.7) -> dict[str, Any]:
    """A parse result whose FallbackClassifier (at ``threshold``) ran: below it, nlu_fallback
    heads the ranking."""
    ranking = [{"name": name, "confidence": confidence}, {"name": "other", "confidence": 0.01}]
    if confidence < threshold:
        top = {"name": "nlu_fallback", "confidence": threshold}
        return {"text": "", "intent": top, "entities": [], "intent_ranking": [top, *ranking]}
    return {"text": "", "intent": ranking[0], "entities": [], "intent_ranking": ranking}


# 10 in-scope messages: 8 right (0.5 .. 0.95), 2 wrong (0.3, 0.6); 2 out of scope (0.2, 0.4)
CASE = [("a", "a", 0.5), ("a", "a", 0.55), ("a", "a", 0.65), ("a", "a", 0.75), ("b", "b", 0.8),
        ("b", "b", 0.85), ("b", "b", 0.9), ("b", "b", 0.95), ("a", "b", 0.3), ("b", "a", 0.6),
        ("out_of_scope", "a", 0.2), ("out_of_scope", "b", 0.4)]


@pytest.fixture
def case() -> tuple[list[Message], list[dict[str, Any]]]:
    golds = [Message(text=f"m{i}", intent=gold) for i, (gold, _, _) in enumerate(CASE)]
    results = [parsed(name, confidence) for _, name, confidence in CASE]
    return golds, results


def test_share_and_suggested_threshold_on_the_test_messages(case) -> None:
    golds, results = case
    advice = evaluate_threshold(golds, results, 0.7)
    assert advice is not None
    assert advice.num_examples == 10  # out-of-scope messages are meant to fall back: left out
    # the fallback is undone: below 0.7 are 0.5, 0.55, 0.65 (right), 0.3 and 0.6 (wrong)
    assert advice.share == pytest.approx(5 / 10)
    assert advice.accuracy == pytest.approx(8 / 10)
    assert advice.accuracy_at_threshold == pytest.approx(5 / 10)
    assert advice.suggested_threshold == pytest.approx(0.5)  # the lowest right one is 0.5
    # the same messages without a FallbackClassifier: the same advice (the ranking is the same)
    plain = evaluate_threshold(golds, [parsed(n, c, threshold=0.0) for _, n, c in CASE], 0.7)
    assert plain == advice
    assert evaluate_threshold([Message(text="x")], [parsed("a", 0.9)], 0.7) is None  # no gold intent


def test_the_summary_reports_it_only_with_a_threshold(case, tmp_path: Path) -> None:
    golds, results = case
    assert "fallback_threshold" not in evaluate(golds, results).summary()
    summary = write_reports(evaluate(golds, results, fallback_threshold=0.7), tmp_path, plot=False)
    expected = {"threshold": 0.7, "share": 0.5, "suggested_threshold": 0.5, "accuracy": 0.8,
                "accuracy_at_threshold": 0.5, "num_examples": 10}
    assert summary["fallback_threshold"] == pytest.approx(expected)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["fallback_threshold"] == pytest.approx(expected)
    assert ("Fallback threshold: 0.7 sends 50.0 % of the 10 in-scope test messages to nlu_fallback "
            "(in-scope accuracy 0.5000, 0.8000 without fallback); 0.50 keeps in-scope accuracy within "
            "a point of no fallback") in format_summary(summary).splitlines()
    page = (tmp_path / "index.html").read_text()
    assert "share (in scope) below the model&#x27;s threshold 0.7" in page
    assert "Fallback threshold:" not in format_summary(evaluate(golds, results).summary())


def test_a_model_test_reports_its_fallback_classifiers_threshold(case) -> None:
    golds, results = case

    class Parser:  # what evaluate_model needs of a model: its pipeline and parse_batch
        pipeline = SimpleNamespace(components=[FallbackClassifier(threshold=0.6)])

        def parse_batch(self, texts: list[str], batch_size: int) -> list[dict[str, Any]]:
            return [results[int(t[1:])] for t in texts]

    evaluation, _, _ = evaluate_model(Parser(), golds)
    assert evaluation.fallback_threshold is not None
    assert evaluation.fallback_threshold.threshold == 0.6
    assert evaluation.fallback_threshold.share == pytest.approx(3 / 10)  # 0.5, 0.55, 0.3
    assert model_threshold([]) is None  # no FallbackClassifier: nothing to report
    Parser.pipeline = SimpleNamespace(components=[])
    assert evaluate_model(Parser(), golds)[0].fallback_threshold is None


UNSURE = {"language": "en", "pipeline": [
    {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
    {"name": "LogisticRegressionClassifier"},
    {"name": "FallbackClassifier", "threshold": 0.9, "ambiguity_threshold": 0.0}]}


def test_a_trained_models_fallbacks_are_the_share_below_its_threshold(
        tmp_path: Path, noisy_data_path: Path) -> None:
    from nlu_engine.assembly.model import Model, train
    from nlu_engine.training_data import load_data

    model = Model.load(train(UNSURE, noisy_data_path, out=tmp_path / "models", log=None))
    (tmp_path / "test.yml").write_text(noisy_nlu(seed=1, per_intent=20))
    golds = load_data([tmp_path / "test.yml"]).messages
    evaluation, _, _ = evaluate_model(model, golds)
    summary = write_reports(evaluation, tmp_path / "results", plot=False, html=False)
    advice = summary["fallback_threshold"]
    assert advice["threshold"] == 0.9 and advice["num_examples"] == 100
    # without the ambiguity rule, what fell back is exactly what the share counts
    assert summary["intent"]["num_fallbacks"] == round(advice["share"] * 100)
    assert advice["share"] > 0.1 and advice["suggested_threshold"] < 0.9
    assert advice["accuracy"] == pytest.approx(summary["intent"]["accuracy"])  # the fallback undone
    assert advice["accuracy_at_threshold"] == pytest.approx(summary["intent"]["accuracy_with_fallback"])


def test_cross_validation_reports_the_configs_threshold_over_all_folds(noisy_data_path: Path) -> None:
    from nlu_engine.evaluation import cross_validate
    from nlu_engine.training_data import load_data

    result = cross_validate(UNSURE, load_data([noisy_data_path]), folds=2)
    advice = result.evaluation.fallback_threshold
    assert advice is not None and advice.threshold == 0.9
    assert advice.num_examples == 250  # every example, in the fold that tested it
    assert [s["fallback_threshold"]["threshold"] for s in result.fold_summaries] == [0.9, 0.9]
