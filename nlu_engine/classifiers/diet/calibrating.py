"""DIET's side of the calibration, which ``classifiers/held_out.py`` fits: what it holds out, what it
predicts for the fit, when the held-out examples join the training late, and how a parse is calibrated; and,
on few examples an intent, the sentence head that ranks the intents instead of the network
(``classifiers/sentence_head.py``), calibrated by cross-fitting.

A mixin of :class:`~nlu_engine.classifiers.diet.component.DIETClassifier` (and so of
ResponseSelector): it reads the component's config, intents and prediction, and calls its
``_train_network`` for the small-data training in which the held-out examples join late.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from nlu_engine.classifiers import calibration, held_out, sentence_head
from nlu_engine.classifiers.diet.encoders import with_pretrained_features, with_tuned_features
from nlu_engine.classifiers.diet.resume import example_hashes
from nlu_engine.classifiers.diet.spec import resolve_epochs
from nlu_engine.classifiers.entity_calibration import EntityCalibration
from nlu_engine.contract.errors import NOTICE
from nlu_engine.contract.message import Message
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.extractors.entity_chooser import record_held_out

logger = logging.getLogger(__name__)

#: the vector the in-scope score reads: the transformer's output at the sentence position [U]
#: (the sentence head's input, when the head ranks the intents)
IN_SCOPE_VECTOR = "sentence"
#: when the sentence head ranks the intents, the network learns the entities: by default for
#: about this many optimizer steps and at least ``HEAD_EPOCHS`` epochs, not 1,200 steps and up to
#: 300 epochs (BENCHMARKS.md, "Few examples an intent")
HEAD_STEPS, HEAD_EPOCHS = 200, 50


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
    scorer_name: Callable[[], str]
    predict_arrays: Callable[[list[Message]], list[dict[str, np.ndarray]]]
    _train_network: Callable[..., None]
    _entities: Callable[..., list[dict[str, Any]]]
    #: the map of ``confidence_entity`` (``classifiers/entity_calibration.py``), fitted on the
    #: entities predicted for held-out examples (``entity_calibration`` in the config)
    entity_calibration_: EntityCalibration = EntityCalibration()
    tag_vocab_: dict[str, list[str]]
    _tune_contrastively: Callable[[list[Message]], list[dict[str, np.ndarray]]]
    fit_calibrated: Callable[..., None]
    #: (the stored model, the fine-tuning options) while ``_fit`` trains
    _resuming: tuple[Any, Any]
    #: the sentence head, when it ranks the intents (few examples an intent)
    head_: sentence_head.SentenceHead | None = None
    #: whether the sentence head may rank this component's labels
    uses_sentence_head: bool = True
    #: whether the network's raw intent probabilities are left for a combiner
    #: (``classifiers/scores.py``): the held-out examples' when calibrating, each parse's
    records_intent_scores: bool = True
    #: set by the pipeline when an ``EntityChooser`` names this component (its ``Link`` asks
    #: it): it records the entities it predicts for the examples it holds out, and on few
    #: examples an intent holds out a share that joins late
    records_held_out_entities: bool = False
    index: int

    # --- few examples an intent: the sentence head ------------------------------------------
    def _head_vectors(self, messages: list[Message]) -> np.ndarray | None:
        """The head's input [B, D]: the dense sentence features DIET reads."""
        return sentence_head.sentence_vectors(messages, self.config.featurizers or None)

    def _uses_head(self, examples: list[Message]) -> bool:
        """Whether the sentence head ranks the intents: the median intent has fewer than
        ``sentence_head_below`` examples and the messages have dense sentence features. A
        language model offered for fine-tuning is then kept as pretrained (``_keep_pretrained``)."""
        if (not self.uses_sentence_head or not self.config.intent_classification
                or len(self.intents_) < 2 or not self.config.sentence_head_below):
            return False
        counts = Counter(self.label_of(m) for m in examples)
        if float(np.median(list(counts.values()))) >= self.config.sentence_head_below:
            return False
        return self._head_vectors(examples[:1]) is not None

    def _head_epochs(self, examples: int) -> int:
        """The network's epochs when the head ranks the intents (``HEAD_STEPS``)."""
        return resolve_epochs(self.config.epochs, self.config.batch_size, examples, HEAD_STEPS, HEAD_EPOCHS)

    def _train_for_entities(self, examples: list[Message], previous: Any, options: Any) -> None:
        """The network's training when the head ranks the intents (``HEAD_STEPS``): it learns
        the entities. Trained from scratch on entities for an ``EntityChooser``
        (``records_held_out_entities``) or to calibrate the entity confidences
        (``entity_calibration: hold_out``), a share of the examples (``calibration_share``, at
        least ``calibration.MIN_HELD_OUT``) joins the last epochs, and the entities predicted for
        them just before are recorded (``extractors/entity_chooser.py``) and fit the map of their
        confidences; the network learns from every example either way."""
        epochs = self._head_epochs(len(examples))
        held: list[Message] = []
        holds = self.records_held_out_entities or self.config.entity_calibration == "hold_out"
        if previous is None and holds and self.tag_vocab_.get("entity"):
            _, index = held_out.holdout(
                [self.label_of(m) for m in examples], True, self.config.calibration_share,
                self.config.random_seed, self.component_name(), keys=self.example_keys(examples),
                notice=False)
            held = [examples[i] for i in index]
        if not held:
            self._train_network(examples, previous, options, epochs=epochs)
            return
        chosen = {id(m) for m in held}
        self._train_network([m for m in examples if id(m) not in chosen], None, None, epochs=epochs,
                            late=held, on_join=self._record_joining)

    def _record_joining(self, held: list[Message]) -> None:
        self._record_held_out_entities(held, self.predict_arrays(held))

    def _keep_pretrained(self, examples: list[Message]) -> None:
        """Few examples an intent: tuning a language model's top layers on them would learn
        less than its pretrained sentence vector gives the head, and take the most time. Each
        encoder offered for fine-tuning keeps its pretrained weights; its (frozen) features are
        computed on the examples in place of its featurizer's placeholders, and the network
        reads them as any other's. With ``contrastive_pairs`` the encoders are first tuned on
        pairs of the examples (``_tune_contrastively``), and the features are computed with those
        weights."""
        tuned = self._tune_contrastively(examples)
        for i, encoder in enumerate(self.trainable_encoders):
            encoder.adopt(tuned[i] if tuned else encoder.pretrained_weights())
        if self.trainable_encoders:
            with_pretrained_features(examples, self.trainable_encoders)
        self.trainable_encoders = ()

    def _fit_head(self, examples: list[Message]) -> None:
        """Train the head on every example and calibrate it on its cross-fitted predictions."""
        vectors = self._head_vectors(examples)
        assert vectors is not None  # _uses_head checked
        index = {name: i for i, name in enumerate(self.intents_)}
        labels = np.array([index[self.label_of(m) or ""] for m in examples])
        self.out_of_scope_intent_ = calibration.out_of_scope_intent(
            self.config.out_of_scope_intent, self.intents_, self.component_name())
        seed = self.config.random_seed
        self.calibration_ = calibration.Calibration()
        n = len(self.intents_)

        def fit_predict(train: np.ndarray, train_labels: np.ndarray, held: np.ndarray) -> np.ndarray:
            head = sentence_head.SentenceHead.fit(vectors[train], train_labels, n, seed)
            return head.predict_proba(vectors[held])

        with single_blas_thread():  # small products: threads cost far more than they give
            self.head_ = sentence_head.SentenceHead.fit(vectors, labels, n, seed)
            if self.config.calibration:
                own = index.get(self.out_of_scope_intent_ or "")
                self.calibration_ = held_out.calibrate_cross_fitted(fit_predict, labels, n, vectors,
                                                                    own, seed)
        if self.config.calibration:
            self._notice_head_calibration(examples)

    def _notice_head_calibration(self, examples: list[Message]) -> None:
        """One notice when an intent has one example (never held out) or the head could not be
        calibrated (too few examples to cross-fit)."""
        single = sorted(name for name, n in Counter(self.label_of(m) for m in examples).items() if n < 2)
        if not self.calibration_.calibrated:
            never = f" (intents with one example are never held out: {', '.join(single)})" if single else ""
            logger.log(NOTICE, "%s: too few examples to hold %d out by cross-fitting%s; its "
                       "confidences are not calibrated", self.component_name(),
                       calibration.MIN_HELD_OUT, never)
        elif single:
            logger.log(NOTICE, "%s: intents with one example cannot be held out (%s); their "
                       "confidences are calibrated on the other intents' examples",
                       self.component_name(), ", ".join(single))

    def _head_predictions(self, messages: list[Message], results: list[dict[str, np.ndarray]]) -> None:
        """The head's intent probabilities [N] and input vector [D] in each result, in place of
        the network's."""
        vectors = self._head_vectors(messages)
        if vectors is None:  # messages without the features: the head sees a blank vector
            vectors = np.zeros((len(messages), self.head_.weights.shape[0]), np.float32)
        probabilities = self.head_.predict_proba(vectors)
        for result, p, v in zip(results, probabilities, vectors, strict=True):
            if "intent" in result:
                result["intent"], result[IN_SCOPE_VECTOR] = p, v

    # --- the hooks of CalibratedIntentClassifier.fit_calibrated ---------------------------------------
    def _fit_calibrated(self, examples: list[Message], trained_on: np.ndarray | None) -> None:
        """Train the network with calibrated confidences (``CalibratedIntentClassifier.fit_calibrated``);
        never hold out one of ``trained_on`` (a stored model's example hashes, when fine-tuning)."""
        self.out_of_scope_intent_ = None
        if self.holds_out() and len(self.intents_) >= 2:
            self.out_of_scope_intent_ = calibration.out_of_scope_intent(
                self.config.out_of_scope_intent, self.intents_, self.component_name())
        self.fit_calibrated(examples, self.intents_, self.config.random_seed, trained_on)

    def example_keys(self, examples: list[Message]) -> np.ndarray:
        """Each example's content hash: a fine-tune holds out what the stored model held out."""
        return example_hashes(examples, self.label_of)

    def holds_out(self) -> bool:
        """Only the intents are calibrated: nothing is held out without intent classification."""
        return bool(self.config.intent_classification)

    def fit_examples(self, examples: list[Message]) -> None:
        self._train_network(examples, *self._resuming)

    def calibration_out_of_scope(self) -> str | None:
        return self.out_of_scope_intent_

    def calibrate(self, train: list[Message], held: list[Message], names: list[str],
                  seed: int | None) -> None:
        """Fit ``calibration_`` on the held-out examples' predictions, and leave those raw
        predictions on the held-out examples for a combiner (``records_intent_scores``): they
        were made before the network learned from them."""
        def predict(messages: list[Message]) -> tuple[np.ndarray, np.ndarray | None]:
            results = self.predict_arrays(with_tuned_features(messages, self.trainable_encoders))
            if messages is held:
                self._record_held_out_entities(messages, results)
            return self._intent_arrays(results)

        self.calibration_ = held_out.fit_calibration(
            predict, names, train, held, self.label_of, self.calibration_out_of_scope(), seed,
            record_as=self.scorer_name() if self.records_intent_scores else None)

    def refits(self, examples: int) -> bool:
        """Above ``calibration_refit_below`` examples, or when resuming, the held-out examples
        stay out of the training (small data joins them late instead: ``joins_late``)."""
        return False

    def joins_late(self, examples: int) -> bool:
        """Whether the held-out examples join the training once the calibration is fitted:
        with fewer than ``calibration_refit_below`` examples, when it neither resumes a stored
        model nor fine-tunes a language model (whose tuned weights the first training changed)."""
        return (examples < self.config.calibration_refit_below and self._resuming[0] is None
                and not self.trainable_encoders)

    def fit_joining_late(self, train: list[Message], held: list[Message]) -> None:
        """Small data (``joins_late``): one training in which the held-out examples join the last
        ``calibration_join_share`` of the epochs. The calibration is fitted on the network's
        predictions just before they join (``_train_network`` calls ``calibrate``), and its
        in-scope reference again once the network has learned from every example. (It trained
        twice before: on the rest, then on everything.)"""
        self._train_network(train, None, None, late=held)
        self.calibration_ = held_out.refit_in_scope(
            self.calibration_, self.calibration_predict, self.intents_, train + held, self.label_of,
            self.out_of_scope_intent_, self.config.random_seed)

    def calibration_predict(self, messages: list[Message]) -> tuple[np.ndarray, np.ndarray | None]:
        """Raw intent probabilities [B, N] and in-scope vectors [B, U] of training messages,
        their fine-tuned encoders' features computed anew with the tuned weights."""
        results = self.predict_arrays(with_tuned_features(messages, self.trainable_encoders))
        return self._intent_arrays(results)

    def _intent_arrays(self, results: list[dict[str, np.ndarray]]) -> tuple[np.ndarray, np.ndarray | None]:
        vectors = np.stack([r[IN_SCOPE_VECTOR] for r in results]) if self.in_scope_score else None
        return np.stack([r["intent"] for r in results]), vectors

    def _record_held_out_entities(self, held: list[Message], results: list[dict[str, np.ndarray]]) -> None:
        """The entities predicted for the held-out examples, before the network learned from
        them (raw confidences): left for an ``EntityChooser`` (``extractors/entity_chooser.py``)
        and, unless ``entity_calibration`` is off, the map of their confidences fitted on them
        (kept when they are too few to fit one: a resumed model keeps its own)."""
        calibrate = self.config.entity_calibration != "off"
        if not (self.records_held_out_entities or calibrate) or not self.tag_vocab_.get("entity"):
            return
        predicted = [self._entities(m, r, calibrated=False) for m, r in zip(held, results, strict=True)]
        if self.records_held_out_entities:
            for message, entities in zip(held, predicted, strict=True):
                record_held_out(message, "DIETClassifier", entities)
        if not calibrate:
            return
        fitted = EntityCalibration.fit([(m.entities, p) for m, p in zip(held, predicted, strict=True)])
        if fitted.calibrated:
            self.entity_calibration_ = fitted
            logger.info("%s: entity confidences calibrated on %d held-out entities (%d wrong): "
                        "slope %.3f, bias %.3f", self.component_name(), fitted.entities,
                        fitted.wrong, fitted.slope, fitted.bias)

    def _calibrated(self, probabilities: list[np.ndarray], vectors: list[np.ndarray]) -> Iterator[np.ndarray]:
        """Each message's calibrated intent confidences, in order; the bot's own out-of-scope
        intent is not discounted for being out of scope."""
        if not probabilities:
            return iter(())
        own = self.intents_.index(self.out_of_scope_intent_) if self.out_of_scope_intent_ else None
        return iter(self.calibration_.apply(np.stack(probabilities), np.stack(vectors), exempt=own))
