"""The one owner of held-out predictions and calibration (classifiers/held_out.py)."""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers import held_out, scores
from nlu_engine.classifiers.held_out import block_folds, cross_fit, cross_fit_folds
from nlu_engine.contract.message import Message


def test_folds_never_hold_out_a_single_example_nor_all_of_a_label() -> None:
    labels = np.array([0] * 10 + [1] * 3 + [2] + [3] * 2)
    folds = cross_fit_folds(labels, folds=5, seed=1)
    assert folds[labels == 2].tolist() == [-1]  # one example: always trains
    for label in (0, 1, 3):
        assert len(set(folds[labels == label].tolist())) >= 2  # never all out at once
    assert set(folds[labels != 2].tolist()) == set(range(5))
    assert (np.bincount(folds[labels == 0]) == 2).all()  # ten examples over five folds, evenly
    assert (cross_fit_folds(labels, folds=5, seed=1) == folds).all()  # seeded


def test_folds_are_fewer_when_no_label_has_that_many_examples() -> None:
    folds = cross_fit_folds(np.array([0, 0, 1, 1, 2, 2]), folds=5)
    assert set(folds.tolist()) == {0, 1}
    assert (cross_fit_folds(np.array([0, 1, 2]), folds=5) == -1).all()


def test_block_folds_cut_an_order_into_libsvms_contiguous_blocks() -> None:
    order = np.array([3, 0, 4, 1, 2, 6, 5])
    folds = block_folds(order, 3)
    # 7 // 3 a block, the last one the rest
    assert [sorted(np.flatnonzero(folds == k).tolist()) for k in range(3)] == [[0, 3], [1, 4], [2, 5, 6]]


def test_cross_fit_predicts_each_example_by_a_fit_without_its_fold() -> None:
    labels = np.array([0, 1] * 10)
    assignment = cross_fit_folds(labels, folds=5, seed=0)
    seen: list[tuple[set[int], set[int]]] = []

    def fit_predict(train: np.ndarray, train_labels: np.ndarray, held: np.ndarray) -> np.ndarray:
        assert (train_labels == labels[train]).all()
        seen.append((set(train.tolist()), set(held.tolist())))
        return np.tile([0.25, 0.75], (len(held), 1))

    probabilities, rows = cross_fit(fit_predict, labels, 2, assignment)
    assert sorted(rows.tolist()) == list(range(20)) and probabilities.shape == (20, 2)
    assert all(not (train & held) and len(train | held) == 20 for train, held in seen)




def test_the_held_out_predictions_are_recorded_for_a_combiner() -> None:
    held = [Message(text=str(i), intent="a" if i % 2 else "b") for i in range(40)]
    probabilities = np.tile([0.6, 0.4], (40, 1))
    held_out.fit_calibration(lambda messages: (probabilities, None), ["a", "b"], [], held,
                             lambda m: m.intent, record_as="Scorer_1")
    assert scores.scorers_on(held) == ["Scorer_1"]
    gathered, present = scores.gather(held, "Scorer_1", ["a", "b"])
    assert present.all() and np.allclose(gathered, probabilities)
