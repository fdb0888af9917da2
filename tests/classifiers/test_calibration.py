"""The calibration every intent classifier shares (classifiers/calibration.py, fitted by
classifiers/held_out.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nlu_engine.classifiers import calibration, held_out
from nlu_engine.classifiers.calibration import (
    Calibration,
    InScope,
    expected_calibration_error,
)
from nlu_engine.classifiers.held_out import fit_temperature
from nlu_engine.contract.errors import NOTICE, ConfigError


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_the_temperature_that_made_the_labels_is_found() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, size=(4000, 8))
    truth = 2.5
    probabilities = softmax(logits / truth)
    targets = np.array([rng.choice(8, p=p) for p in probabilities])
    assert fit_temperature(logits, targets) == pytest.approx(truth, rel=0.1)


def test_temperature_scaling_repairs_overconfidence_without_changing_any_ranking() -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 2, size=(3000, 5))
    targets = np.array([rng.choice(5, p=p) for p in softmax(logits)])
    overconfident = softmax(logits * 4)  # what an overtrained network reports
    fitted = Calibration(temperature=fit_temperature(np.log(overconfident), targets), examples=3000)
    repaired = fitted.apply(overconfident)
    correct = overconfident.argmax(1) == targets
    before, _, _ = expected_calibration_error(overconfident.max(1), correct)
    after, _, _ = expected_calibration_error(repaired.max(1), correct)
    assert before > 0.15 and after < 0.03
    assert np.array_equal(repaired.argmax(1), overconfident.argmax(1))


def test_ece_of_known_bins() -> None:
    confidences = np.array([0.95, 0.95, 0.95, 0.95, 0.55, 0.55])
    correct = np.array([1, 1, 1, 0, 1, 0], bool)
    ece, gap, bins = expected_calibration_error(confidences, correct, bins=10)
    # bin 0.9-1.0: accuracy 0.75 for 0.95 (gap 0.2, weight 4/6); bin 0.5-0.6: 0.5 for 0.55 (gap 0.05)
    assert ece == pytest.approx(4 / 6 * 0.2 + 2 / 6 * 0.05)
    assert gap == pytest.approx(0.2)
    assert [b["count"] for b in bins] == [2, 4]


def clusters(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    centres = np.array([[5.0, 0, 0], [0, 5.0, 0], [0, 0, 5.0]])
    labels = rng.integers(0, 3, size=n)
    return centres[labels] + rng.normal(0, 1, size=(n, 3)), labels


def test_the_in_scope_score_lowers_messages_far_from_every_intent_only() -> None:
    rng = np.random.default_rng(2)
    train, labels = clusters(rng, 900)
    held, _ = clusters(rng, 500)
    model = InScope.fit(train, labels, held, alpha=0.05)
    fresh, _ = clusters(rng, 2000)
    far = rng.normal(0, 1, size=(200, 3)) + np.array([-8.0, -8.0, 8.0])
    lowered = (model.factors(fresh) < 1).mean()
    assert lowered == pytest.approx(0.05, abs=0.03)  # in scope: about alpha of them
    assert (model.factors(far) < 0.1).all()


def test_a_calibration_round_trips_as_plain_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    train, labels = clusters(rng, 300)
    held, _ = clusters(rng, 100)
    fitted = Calibration(temperature=1.7, in_scope=InScope.fit(train, labels, held), examples=100,
                         notes={"held_out_accuracy": 0.9})
    fitted.persist(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.json", "calibration.npz"]
    loaded = Calibration.load(tmp_path)
    probabilities = softmax(rng.normal(size=(50, 3)))
    vectors, _ = clusters(rng, 50)
    np.testing.assert_array_equal(loaded.apply(probabilities, vectors), fitted.apply(probabilities, vectors))


def test_a_folder_without_calibration_is_uncalibrated_and_changes_nothing(tmp_path: Path) -> None:
    loaded = Calibration.load(tmp_path)
    probabilities = softmax(np.random.default_rng(4).normal(size=(5, 4)))
    assert not loaded.calibrated
    np.testing.assert_array_equal(loaded.apply(probabilities), probabilities)


def test_a_tampered_temperature_is_refused(tmp_path: Path) -> None:
    (tmp_path / "calibration.json").write_text('{"temperature": -1, "examples": 3}')
    with pytest.raises(ValueError, match="temperature must be a positive number"):
        Calibration.load(tmp_path)


def test_data_too_small_trains_without_calibration_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    labels = ["a"] * 12 + ["b"] * 12
    with caplog.at_level(NOTICE):
        train, held = held_out.holdout(labels, True, 0.1, 42, "DIETClassifier")
    assert len(train) == 24 and not len(held)
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1 and "not calibrated" in notices[0] and "DIETClassifier" in notices[0]
    assert caplog.records[0].levelname == "NOTICE"


def test_calibration_off_holds_nothing_out() -> None:
    train, held = held_out.holdout(["a"] * 100 + ["b"] * 100, False, 0.1, 42, "X")
    assert len(train) == 200 and not len(held)


def test_the_out_of_scope_intent_defaults_to_rasas_and_must_exist_when_named() -> None:
    assert calibration.out_of_scope_intent(None, ["greet", "out_of_scope"], "DIET") == "out_of_scope"
    assert calibration.out_of_scope_intent(None, ["greet", "bye"], "DIET") is None
    assert calibration.out_of_scope_intent("chitchat", ["greet", "chitchat"], "DIET") == "chitchat"
    with pytest.raises(ConfigError, match="out_of_scope_intent 'nonsense' is not an intent"):
        calibration.out_of_scope_intent("nonsense", ["greet", "bye"], "DIETClassifier")


@pytest.mark.parametrize(("slope", "bias"), [(0.3, -2.0), (3.0, 1.0), (1.0, -4.0)])
def test_the_top_labels_platt_scaling_keeps_every_ranking(slope: float, bias: float) -> None:
    probabilities = softmax(np.random.default_rng(5).normal(0, 2, size=(500, 6)))
    scaled = Calibration(top_slope=slope, top_bias=bias, examples=500).apply(probabilities)
    assert np.array_equal(scaled.argmax(1), probabilities.argmax(1))
    assert (scaled.max(1) > np.sort(scaled, 1)[:, -2]).all()  # no ties
    assert (scaled.sum(1) <= 1 + 1e-9).all()
    grew = scaled.max(1) >= probabilities.max(1)  # there the others share the rest exactly
    np.testing.assert_allclose(scaled[grew].sum(1), 1.0, atol=1e-9)


def test_a_refit_keeps_the_temperature_and_rescales_the_reference() -> None:
    from nlu_engine.contract.message import Message

    rng = np.random.default_rng(3)
    names = ["a", "b"]
    examples = [Message(text=f"{name} {i}", intent=name) for name in names for i in range(60)]
    first = rng.normal(size=(120, 4)) + np.repeat([[0, 0, 0, 0], [3, 0, 0, 0]], 60, axis=0)
    labels = np.repeat([0, 1], 60)
    in_scope = InScope.fit(first, labels, rng.normal(size=(30, 4)) * 1.5)
    fitted = Calibration(temperature=1.7, top_slope=1.2, top_bias=-0.2, in_scope=in_scope, examples=30)
    second = first * 2.0 + 1.0  # the retrained network's vectors for the same examples

    def predict(messages: list[Message]) -> tuple[np.ndarray, np.ndarray]:
        rows = [examples.index(m) for m in messages]
        return np.full((len(rows), 2), 0.5), second[rows]

    refit = held_out.refit_in_scope(fitted, predict, names, examples, lambda m: m.intent)
    assert (refit.temperature, refit.top_slope, refit.top_bias, refit.examples) == (1.7, 1.2, -0.2, 30)
    assert np.allclose(refit.in_scope.means[0], first[:60].mean(0) * 2 + 1)
    scale = refit.notes["reference_scale"]
    assert scale == pytest.approx(refit.in_scope.train_median / in_scope.train_median)
    assert refit.in_scope.reference == pytest.approx(in_scope.reference * scale)
    # an uncalibrated or vector-less calibration is left as it was
    untouched = held_out.refit_in_scope(Calibration(), predict, names, examples, lambda m: m.intent)
    assert untouched.examples == 0


@pytest.mark.parametrize("wrong, platt", [(5, False), (60, True)])
def test_the_top_label_scaling_needs_enough_held_out_errors(wrong: int, platt: bool) -> None:
    from nlu_engine.contract.message import Message

    rng = np.random.default_rng(5)
    held = [Message(text=str(i), intent="a" if i % 2 else "b") for i in range(300)]
    targets = np.array([0 if m.intent == "a" else 1 for m in held])
    predicted = targets.copy()
    predicted[:wrong] = 1 - predicted[:wrong]  # the first ``wrong`` predictions are wrong
    top = rng.uniform(0.9, 0.999, len(held))  # over-confident on the wrong ones too
    probabilities = np.where(np.arange(2)[None, :] == predicted[:, None], top[:, None], 1 - top[:, None])

    fitted = held_out.fit_calibration(lambda messages: (probabilities, None), ["a", "b"], [], held,
                                      lambda m: m.intent)
    assert fitted.examples == 300
    assert ((fitted.top_slope, fitted.top_bias) != (1.0, 0.0)) is platt




def test_in_scope_fits_on_one_example_a_class() -> None:
    """A cross-fitting fold of a bot with two examples an intent holds one of each: no spread
    within a class, so the spread of all the vectors stands in (it raised a singular matrix)."""
    rng = np.random.default_rng(0)
    train = rng.normal(size=(6, 8))
    labels = np.arange(6)
    model = InScope.fit(train, labels, rng.normal(size=(4, 8)))
    own, far = model.distances(train), model.distances(train[:1] + 10.0)[0]
    assert np.all(np.isfinite(own)) and own.max() < 1e-3 * far  # each at its own mean, in float32
    same = InScope.fit(np.ones((3, 8)), np.arange(3), np.ones((2, 8)))  # no spread at all
    assert np.all(np.isfinite(same.reference))
