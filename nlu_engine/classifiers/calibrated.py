"""The base of an intent classifier whose confidences ``held_out.py`` calibrates.

A classifier is an estimator: it fits on examples and gives raw label probabilities; it never
calibrates itself. It subclasses :class:`CalibratedIntentClassifier`, calls ``fit_calibrated``
in its ``train`` (``held_out.fit_holding_out``: hold out a share, fit on the rest, calibrate on
the held-out ones, fit again on everything), and gives two hooks: ``fit_examples`` (fit on
examples) and ``calibration_predict`` (raw probabilities of messages). At parse it hands its raw
probabilities to ``rank``, which records them for a combiner (``classifiers/scores.py``) and
writes the calibrated ranking unless a later classifier replaces it. That is all a new intent
classifier needs to be calibrated and to join the ``IntentCombiner``: the held-out
predictions the combiner weighs it on are recorded while it calibrates.

DIET alone uses the other hooks (``label_of``, ``example_keys``, ``holds_out``,
``calibration_out_of_scope``, ``refits``, ``joins_late``, ``fit_joining_late``: the held-out
examples join the last epochs of one training on small data).
"""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers import calibration, held_out, scores
from nlu_engine.classifiers.ranking import write_intent
from nlu_engine.contract.component import IntentClassifier
from nlu_engine.contract.message import Message


class CalibratedIntentClassifier(IntentClassifier):
    """An intent classifier trained by ``fit_calibrated`` (see the module's docstring)."""

    calibration_: calibration.Calibration
    #: whether its raw probabilities are left for a combiner (``classifiers/scores.py``): the
    #: held-out examples' when calibrating, each parse's
    records_intent_scores: bool = True

    def fit_calibrated(self, examples: list[Message], names: list[str], seed: int | None,
                       trained_on: np.ndarray | None = None) -> None:
        """Train on ``examples`` with calibrated confidences (``held_out.fit_holding_out``);
        sets ``calibration_``."""
        held_out.fit_holding_out(self, examples, names, seed, trained_on)

    def hold_out(self, examples: list[Message], names: list[str], seed: int | None,
                 trained_on: np.ndarray | None = None) -> tuple[list[Message], list[Message]]:
        """(the examples to fit on, those held out to calibrate): ``calibration_share`` of each
        label's examples (``held_out.holdout``, seeded by ``seed``), none when calibration is
        off, ``holds_out`` says so, with fewer than two labels or too little data. With
        ``example_keys``, which examples are held out follows their content, and none whose key
        is in ``trained_on`` (a stored model's, when fine-tuning) is."""
        enabled = self.config.calibration and len(names) >= 2 and self.holds_out()
        keys = self.example_keys(examples) if enabled else None
        trained = None if trained_on is None or keys is None else np.isin(keys, trained_on)
        train_index, held_index = held_out.holdout(
            [self.label_of(m) for m in examples], enabled, self.config.calibration_share, seed,
            self.component_name(), keys, trained)
        return [examples[i] for i in train_index], [examples[i] for i in held_index]

    def rank(self, messages: list[Message], names: list[str], probabilities: np.ndarray,
             ranking_length: int) -> None:
        """At parse: record the raw ``probabilities`` [B, N] over ``names`` for a combiner, and,
        unless a later classifier replaces the ranking, write the calibrated one."""
        if self.records_intent_scores:
            for message, row in zip(messages, probabilities, strict=True):
                scores.record(message, self.scorer_name(), names, row)
        if self.ranking_superseded:
            return
        for message, row in zip(messages, self.calibration_.apply(probabilities), strict=True):
            write_intent(message, names, row, ranking_length)

    # --- the hooks of fit_calibrated ------------------------------------------------------
    def fit_examples(self, examples: list[Message]) -> None:
        """Fit the classifier on ``examples``."""
        raise NotImplementedError(f"{self.component_name()}.fit_examples")

    def calibration_predict(self, messages: list[Message]) -> tuple[np.ndarray, np.ndarray | None]:
        """Raw label probabilities [B, N] of ``messages`` and their in-scope vectors [B, D]
        (None: no in-scope score)."""
        raise NotImplementedError(f"{self.component_name()}.calibration_predict")

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

    def calibration_out_of_scope(self) -> str | None:
        """The label whose examples are out of scope, kept out of the in-scope score's fit."""
        return None

    def calibrate(self, train: list[Message], held: list[Message], names: list[str],
                  seed: int | None) -> None:
        """Fit ``calibration_`` on the held-out examples' predictions (the in-scope score's
        class means on the training examples'), recording them for a combiner."""
        self.calibration_ = held_out.fit_calibration(
            self.calibration_predict, names, train, held, self.label_of,
            self.calibration_out_of_scope(), seed,
            record_as=self.scorer_name() if self.records_intent_scores else None)

    def refits(self, examples: int) -> bool:
        """Whether the held-out examples are trained on once the calibration is fitted."""
        return True

    def joins_late(self, examples: int) -> bool:
        """Whether ``fit_joining_late`` replaces fitting, calibrating and refitting."""
        return False

    def fit_joining_late(self, train: list[Message], held: list[Message]) -> None:
        """One training in which ``held`` joins late, calling ``calibrate`` before it joins."""
        raise NotImplementedError(f"{self.component_name()}.fit_joining_late")
