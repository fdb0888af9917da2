"""DIET's side of the calibration (``classifiers/calibration.py``): what it holds out, what it
predicts for the fit, when it trains again on everything, and how a parse is calibrated.

A mixin of :class:`~nlu_engine.classifiers.diet.component.DIETClassifier` (and so of
ResponseSelector): it reads the component's config, intents and prediction, and calls its
``_train_network`` for the small-data refit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nlu_engine.classifiers import calibration
from nlu_engine.classifiers.diet.encoders import with_tuned_features
from nlu_engine.classifiers.diet.resume import example_hashes
from nlu_engine.contract.message import Message

#: the vector the in-scope score reads: the transformer's output at the sentence position [U]
IN_SCOPE_VECTOR = "sentence"


class CalibratedDIET:
    """Calibration steps of DIET's training and parsing (see the module's docstring)."""

    config: Any
    intents_: list[str]
    trainable_encoders: Any
    in_scope_score: bool
    calibration_: calibration.Calibration
    out_of_scope_intent_: str | None
    # the component's own, used here
    label_of: Callable[[Message], str | None]
    component_name: Callable[[], str]
    predict_arrays: Callable[[list[Message]], list[dict[str, np.ndarray]]]
    _train_network: Callable[..., None]

    def _hold_out_for_calibration(
        self, examples: list[Message], trained_on: np.ndarray | None = None
    ) -> tuple[list[Message], list[Message]]:
        """(the examples the network trains on, those held out to calibrate it); never one of
        ``trained_on`` (a stored model's example hashes, when fine-tuning)."""
        self.out_of_scope_intent_ = None
        if not self.config.intent_classification or len(self.intents_) < 2:
            return examples, []
        self.out_of_scope_intent_ = calibration.out_of_scope_intent(
            self.config.out_of_scope_intent, self.intents_, self.component_name())
        # keyed by each example's content: a fine-tune holds out what the stored model held out
        keys = example_hashes(examples, self.label_of)
        trained = None if trained_on is None else np.isin(keys, trained_on)
        train, held = calibration.holdout([self.label_of(m) for m in examples],
                                          self.config.calibration, self.config.calibration_share,
                                          self.config.random_seed, self.component_name(), keys, trained)
        return [examples[i] for i in train], [examples[i] for i in held]

    def _calibrate(self, train: list[Message], held: list[Message], previous: Any = None) -> None:
        """Fit the calibration on the held-out examples; on small data, then train the network
        again on every example (``_refits``) and carry the calibration over to it."""
        label_of = self.label_of
        self.calibration_ = calibration.fit_calibration(self._calibration_predict, self.intents_, train, held,
                                                        label_of, self.out_of_scope_intent_,
                                                        self.config.random_seed)
        if not held or not self._refits(len(train) + len(held), previous):
            return
        # small data: what the held-out share costs in accuracy is most, and a second training
        # least; the network learns from every example, the calibration stays
        everything = train + held
        self._train_network(everything, None, None)
        self.calibration_ = calibration.refit_in_scope(
            self.calibration_, self._calibration_predict, self.intents_, everything, label_of,
            self.out_of_scope_intent_, self.config.random_seed)

    def _refits(self, examples: int, previous: Any) -> bool:
        """Whether the network trains again on every example once the calibration is fitted:
        with fewer than ``calibration_refit_below`` examples, when it neither resumes a stored
        model nor fine-tunes a language model (whose tuned weights the first training changed)."""
        return (examples < self.config.calibration_refit_below and previous is None
                and not self.trainable_encoders)

    def _calibration_predict(self, messages: list[Message]) -> tuple[np.ndarray, np.ndarray | None]:
        """Raw intent probabilities [B, N] and in-scope vectors [B, U] of training messages,
        their fine-tuned encoders' features computed anew with the tuned weights."""
        results = self.predict_arrays(with_tuned_features(messages, self.trainable_encoders))
        vectors = np.stack([r[IN_SCOPE_VECTOR] for r in results]) if self.in_scope_score else None
        return np.stack([r["intent"] for r in results]), vectors

    def _calibrated(self, probabilities: list[np.ndarray], vectors: list[np.ndarray]) -> Iterator[np.ndarray]:
        """Each message's calibrated intent confidences, in order; the bot's own out-of-scope
        intent is not discounted for being out of scope."""
        if not probabilities:
            return iter(())
        own = self.intents_.index(self.out_of_scope_intent_) if self.out_of_scope_intent_ else None
        return iter(self.calibration_.apply(np.stack(probabilities), np.stack(vectors), exempt=own))
