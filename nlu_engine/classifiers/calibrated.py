"""The one sequence by which an intent classifier gets calibrated confidences: hold out a
stratified share of the examples, fit on the rest, calibrate on the held-out ones, then bring
them back (``calibration.py`` does the fitting, ``training_data.split`` the split).

A classifier subclasses :class:`CalibratedIntentClassifier`, calls ``fit_calibrated`` in its
``train`` and gives the hooks: ``fit_examples`` and ``calibration_predict`` always;
``label_of``, ``example_keys``, ``holds_out``, ``calibration_out_of_scope``, ``refits``,
``joins_late`` and ``fit_joining_late`` where it differs (DIET: the held-out examples join the
last epochs of one training on small data, and stay out on large data or when fine-tuning).
"""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers import calibration
from nlu_engine.contract.component import IntentClassifier
from nlu_engine.contract.message import Message


class CalibratedIntentClassifier(IntentClassifier):
    """An intent classifier trained by ``fit_calibrated`` (see the module's docstring)."""

    calibration_: calibration.Calibration

    def fit_calibrated(self, examples: list[Message], names: list[str], seed: int | None,
                       trained_on: np.ndarray | None = None) -> None:
        """Train on ``examples`` with calibrated confidences, the one sequence every intent
        classifier follows: hold out a share of each label's examples (``hold_out``), fit on the
        rest (``fit_examples``), fit the calibration on the held-out ones (``calibrate``), then,
        as ``refits`` says, fit again on every example. When ``joins_late`` says so,
        ``fit_joining_late`` does the last three steps in one training instead. Nothing held out
        (calibration off, one label, too little data): the classifier trains once on every
        example, uncalibrated. Sets ``calibration_``."""
        self.calibration_ = calibration.Calibration()
        train, held = self.hold_out(examples, names, seed, trained_on)
        if held and self.joins_late(len(examples)):
            self.fit_joining_late(train, held)
            return
        self.fit_examples(train)
        if held:
            self.calibrate(train, held, names, seed)
            if self.refits(len(examples)):
                self.fit_examples(examples)

    def hold_out(self, examples: list[Message], names: list[str], seed: int | None,
                 trained_on: np.ndarray | None = None) -> tuple[list[Message], list[Message]]:
        """(the examples to fit on, those held out to calibrate): ``calibration_share`` of each
        label's examples, by the one stratified split (``training_data.split.stratified_holdout``,
        seeded by ``seed``), none when calibration is off, ``holds_out`` says so, with fewer than
        two labels or too little data. With ``example_keys``, which examples are held out
        follows their content, and none whose key is in ``trained_on`` (a stored model's, when
        fine-tuning) is."""
        enabled = self.config.calibration and len(names) >= 2 and self.holds_out()
        keys = self.example_keys(examples) if enabled else None
        trained = None if trained_on is None or keys is None else np.isin(keys, trained_on)
        train_index, held_index = calibration.holdout(
            [self.label_of(m) for m in examples], enabled, self.config.calibration_share, seed,
            self.component_name(), keys, trained)
        return [examples[i] for i in train_index], [examples[i] for i in held_index]

    # --- the hooks of fit_calibrated ------------------------------------------------------
    def label_of(self, message: Message) -> str | None:
        """The label a training example teaches (its intent here)."""
        return message.intent

    def example_keys(self, examples: list[Message]) -> np.ndarray | None:
        """One uint64 per example (a hash of its content) that decides whether it is held out;
        None: a seeded random draw."""
        return None

    def holds_out(self) -> bool:
        """Whether anything may be held out for calibration (beyond the config's switch)."""
        return True

    def fit_examples(self, examples: list[Message]) -> None:
        """Fit the classifier on ``examples``."""
        raise NotImplementedError(f"{self.component_name()}.fit_examples")

    def calibration_predict(self, messages: list[Message]) -> tuple[np.ndarray, np.ndarray | None]:
        """Raw label probabilities [B, N] of ``messages`` and their in-scope vectors [B, D]
        (None: no in-scope score)."""
        raise NotImplementedError(f"{self.component_name()}.calibration_predict")

    def calibration_out_of_scope(self) -> str | None:
        """The label whose examples are out of scope, kept out of the in-scope score's fit."""
        return None

    def calibrate(self, train: list[Message], held: list[Message], names: list[str],
                  seed: int | None) -> None:
        """Fit ``calibration_`` on the held-out examples' predictions (the in-scope score's
        class means on the training examples')."""
        self.calibration_ = calibration.fit_calibration(
            self.calibration_predict, names, train, held, self.label_of,
            self.calibration_out_of_scope(), seed)

    def refits(self, examples: int) -> bool:
        """Whether the held-out examples are trained on once the calibration is fitted."""
        return True

    def joins_late(self, examples: int) -> bool:
        """Whether ``fit_joining_late`` replaces fitting, calibrating and refitting."""
        return False

    def fit_joining_late(self, train: list[Message], held: list[Message]) -> None:
        """One training in which ``held`` joins late, calling ``calibrate`` before it joins."""
        raise NotImplementedError(f"{self.component_name()}.fit_joining_late")
