"""Experiments of nlu_engine.evaluation.experiments."""

import pytest

from nlu_engine.evaluation.experiments import aggregate_folds


def test_aggregate_folds_mean_and_population_std():
    summaries = [{"intent": {"accuracy": a, "macro_f1": a, "weighted_f1": a, "macro_precision": a,
                             "macro_recall": a}, "entities": {}} for a in (0.8, 0.9, 1.0)]
    stats = aggregate_folds(summaries)
    assert stats["intent accuracy"]["mean"] == pytest.approx(0.9)
    assert stats["intent accuracy"]["std"] == pytest.approx((0.02 / 3) ** 0.5)
    assert stats["intent accuracy"]["folds"] == [0.8, 0.9, 1.0]
