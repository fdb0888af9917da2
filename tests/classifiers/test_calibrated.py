"""The one calibration sequence of intent classifiers (classifiers/calibrated.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nlu_engine.classifiers.calibrated import CalibratedIntentClassifier
from nlu_engine.contract.message import Message


class Recorder(CalibratedIntentClassifier):
    """Predicts each intent's share of the examples it was fitted on, and records each step."""

    @dataclass(frozen=True, kw_only=True)
    class Config(CalibratedIntentClassifier.Config):
        late: bool = False
        refit: bool = True

    config: Config

    def __init__(self, *args: object, **params: object) -> None:
        super().__init__(*args, **params)  # type: ignore[arg-type]
        self.steps: list[tuple[str, int]] = []

    def fit_examples(self, examples: list[Message]) -> None:
        self.steps.append(("fit", len(examples)))
        self.fitted_ = examples

    def calibration_predict(self, messages: list[Message]) -> tuple[np.ndarray, None]:
        self.steps.append(("predict", len(messages)))
        names = ["a", "b"]
        share = np.array([sum(m.intent == n for m in self.fitted_) for n in names], float)
        return np.tile(share / share.sum(), (len(messages), 1)), None

    def refits(self, examples: int) -> bool:
        return self.config.refit

    def joins_late(self, examples: int) -> bool:
        return self.config.late

    def fit_joining_late(self, train: list[Message], held: list[Message]) -> None:
        self.steps.append(("fit late", len(train) + len(held)))
        self.fitted_ = train
        self.calibrate(train, held, ["a", "b"], 0)


def examples() -> list[Message]:
    return [Message(text=f"{intent} {i}", intent=intent) for intent in "ab" for i in range(150)]


def test_hold_out_fit_calibrate_then_refit_on_everything() -> None:
    classifier = Recorder()
    classifier.fit_calibrated(examples(), ["a", "b"], 42)
    assert classifier.steps == [("fit", 270), ("predict", 30), ("fit", 300)]
    assert classifier.calibration_.calibrated and classifier.calibration_.examples == 30
    assert len(classifier.fitted_) == 300


def test_without_refit_the_held_out_examples_stay_out() -> None:
    classifier = Recorder(refit=False)
    classifier.fit_calibrated(examples(), ["a", "b"], 42)
    assert classifier.steps == [("fit", 270), ("predict", 30)] and len(classifier.fitted_) == 270


def test_joining_late_replaces_fit_calibrate_and_refit() -> None:
    classifier = Recorder(late=True)
    classifier.fit_calibrated(examples(), ["a", "b"], 42)
    assert classifier.steps == [("fit late", 300), ("predict", 30)]
    assert classifier.calibration_.calibrated


def test_calibration_off_or_one_intent_fits_once_on_everything() -> None:
    for classifier, names in ((Recorder(calibration=False), ["a", "b"]), (Recorder(), ["a"])):
        classifier.fit_calibrated(examples(), names, 42)
        assert classifier.steps == [("fit", 300)] and not classifier.calibration_.calibrated
