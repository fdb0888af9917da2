"""The combiner's stacking (classifiers/stacking.py): weights by likelihood, the sign test."""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers.stacking import combine, fit_weights, likeliest_weights, surely_better


def test_a_member_replaces_the_combination_only_whensurely_better() -> None:
    both = np.ones(300, bool)
    one, other = both.copy(), both.copy()
    one[:2] = True
    other[:2] = False  # two examples in 300: chance
    assert not surely_better(one, other)
    other[:40] = False  # forty the member gets right and the combination not, none the other way
    assert surely_better(one, other)
    assert not surely_better(other, one)


def testlikeliest_weights_find_the_sharper_of_two_members() -> None:
    rng = np.random.default_rng(1)
    targets = rng.integers(0, 4, 300)
    sharp = np.eye(4)[targets] * 3 + rng.normal(size=(300, 4))
    blurred = rng.normal(size=(300, 4))
    logs = np.stack([sharp - np.log(np.exp(sharp).sum(1, keepdims=True)),
                     blurred - np.log(np.exp(blurred).sum(1, keepdims=True))])
    w = likeliest_weights(logs, targets)
    assert w[0] > 0.5 and w[1] < 0.2


def test_a_member_surely_better_than_the_combination_is_kept_alone() -> None:
    rng = np.random.default_rng(2)
    targets = rng.integers(0, 4, 400)
    right = np.eye(4)[targets] * 4 + rng.normal(size=(400, 4))
    wrong = np.eye(4)[(targets + 1) % 4] * 4 + rng.normal(size=(400, 4))  # right on none
    held = [np.exp(z) / np.exp(z).sum(1, keepdims=True) for z in (right, wrong)]
    fitted = fit_weights(held, targets)
    assert fitted is not None
    weights, notes = fitted
    assert weights[1] == 0.0 and weights[0] > 0
    assert notes["held_out"] == 400 and notes["members_accuracy"][0] > notes["members_accuracy"][1]
    assert fit_weights(held[:1], targets) is None  # one member: nothing to weigh


def test_the_combination_is_a_weighted_geometric_mean() -> None:
    p = np.array([[0.7, 0.3]])
    q = np.array([[0.2, 0.8]])
    z = 2 * np.log(p) + 1 * np.log(q)
    np.testing.assert_allclose(combine([p, q], [2.0, 1.0]), np.exp(z) / np.exp(z).sum())
