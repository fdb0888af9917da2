"""The Platt map of entity confidences (classifiers/entity_calibration.py): fitted on held-out
entities, monotone, stored as two numbers."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.classifiers.entity_calibration import (
    MIN_EACH,
    MIN_ENTITIES,
    STATE_FILE,
    EntityCalibration,
    exactly_right,
)


def entity(kind: str, start: int, end: int, confidence: float | None = None) -> dict:
    e = {"entity": kind, "start": start, "end": end, "value": "x"}
    if confidence is not None:
        e["confidence_entity"] = confidence
    return e


def overconfident(n: int, seed: int = 0) -> list[tuple[list[dict], list[dict]]]:
    """``n`` held-out examples with one entity predicted at a confidence of 0.7-1.0 and right
    with probability 0.6: overconfident."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        right = rng.random() < 0.6
        pairs.append(([entity("city", 0, 5)],
                      [entity("city" if right else "date", 0, 5, float(rng.uniform(0.7, 1.0)))]))
    return pairs


def test_a_prediction_is_exactly_right_once_per_gold_entity() -> None:
    gold = [entity("city", 0, 5), entity("date", 6, 9)]
    predicted = [entity("city", 0, 5), entity("city", 0, 5), entity("date", 6, 8), entity("date", 6, 9)]
    assert exactly_right(gold, predicted) == [True, False, False, True]


def test_overconfident_held_out_entities_fit_a_map_that_lowers_them() -> None:
    fitted = EntityCalibration.fit(overconfident(1500))
    assert fitted.calibrated and fitted.entities == 1500 and 450 < fitted.wrong < 750
    mapped = [fitted.apply(c) for c in np.linspace(0.7, 0.99, 30)]
    assert all(b >= a for a, b in itertools.pairwise(mapped))  # monotone: same ranking
    # on fresh data of the same kind the mapped confidences average about the share right
    test = overconfident(2000, seed=1)
    confidences = np.array([fitted.apply(p[0]["confidence_entity"]) for _, p in test])
    right = np.array([g[0]["entity"] == p[0]["entity"] for g, p in test])
    assert abs(confidences.mean() - right.mean()) < 0.03
    assert np.mean([p[0]["confidence_entity"] for _, p in test]) - right.mean() > 0.2  # before


def test_too_few_held_out_entities_or_errors_fit_nothing() -> None:
    assert not EntityCalibration.fit(overconfident(MIN_ENTITIES - 1)).calibrated
    all_right = [([entity("city", 0, 5)], [entity("city", 0, 5, 0.9)])] * 100
    assert not EntityCalibration.fit(all_right).calibrated
    few_wrong = all_right + [([entity("city", 0, 5)], [entity("date", 0, 5, 0.9)])] * (MIN_EACH - 1)
    assert not EntityCalibration.fit(few_wrong).calibrated
    assert EntityCalibration().apply(0.42) == 0.42  # unfitted: the CRF's own number


def test_apply_to_maps_only_entities_with_a_confidence() -> None:
    fitted = EntityCalibration(slope=0.5, bias=-1.0, entities=100, wrong=30)
    entities = [entity("city", 0, 5, 0.9), entity("date", 6, 9)]
    fitted.apply_to(entities)
    z = 0.5 * np.log(0.9 / 0.1) - 1.0
    assert entities[0]["confidence_entity"] == pytest.approx(1 / (1 + np.exp(-z)))
    assert "confidence_entity" not in entities[1]


def test_persist_and_load(tmp_path: Path) -> None:
    EntityCalibration().persist(tmp_path)
    assert not (tmp_path / STATE_FILE).exists()  # nothing fitted, nothing stored
    assert EntityCalibration.load(tmp_path) == EntityCalibration()
    fitted = EntityCalibration(slope=0.6, bias=-0.5, entities=90, wrong=25)
    fitted.persist(tmp_path)
    assert EntityCalibration.load(tmp_path) == fitted


@pytest.mark.parametrize("state", [{"slope": "x", "bias": 0, "entities": 5}, {"bias": 0, "entities": 5},
                                   {"slope": -1, "bias": 0, "entities": 5},
                                   {"slope": 1, "bias": float("nan"), "entities": 5},
                                   {"slope": 1, "bias": 0, "entities": 0}])
def test_a_broken_file_is_refused_with_its_name(tmp_path: Path, state: dict) -> None:
    (tmp_path / STATE_FILE).write_text(json.dumps(state), encoding="utf-8")
    with pytest.raises(ValueError, match=STATE_FILE):
        EntityCalibration.load(tmp_path)
