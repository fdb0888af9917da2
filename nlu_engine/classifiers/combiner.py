"""IntentCombiner: the intent scorers of a pipeline combined, calibrated once.

A pipeline has more than one way to rank intents, and none is best at every data size: with ten
examples an intent a linear probe on a pre-trained sentence vector beats DIET, with thousands
DIET catches up and the probes on different encoders err on different messages. The combiner is
the last intent classifier of the pipeline. Its members:

* a **sentence head** (``sentence_head.SentenceHead``, a logistic regression) on each encoder's
  dense sentence vector the messages carry, one member per featurizer;
* with fewer than ``sparse_head_below`` examples, an **n-gram head**
  (``sparse_head.SparseHead``, TF-IDF logistic regression) on the sparse counts: what a bot in a
  language no encoder knows learns its intents from;
* every **recorded scorer** before it (DIET, any ``CalibratedIntentClassifier``:
  ``classifiers/scores.py``), whose raw probabilities
  it reads from the message.

**A stacking**, in four parts that each read on their own:

* the **members** (``combiner_members.py``): each fitted, with its held-out predictions: the
  heads' by cross-fitting on ``held_out.cross_fit_folds`` (every example predicted by a head
  trained without its fold; the n-gram head's ``C`` chosen on them), a recorded scorer's on the
  examples it held out for its own calibration. A recorded scorer with fewer than
  ``calibration.MIN_HELD_OUT`` held-out predictions (DIET on a few examples an intent) is left
  out, with one notice;
* the **weights** (``stacking.py``): a weighted geometric mean, ``softmax(sum_m w_m log p_m)``,
  with ``w_m >= 0`` fitted by likelihood on the examples every member predicted held out, or the
  best member alone when a sign test says it beats the combination;
* the **calibration**, once, of what the user sees (``held_out.cross_fitted``, the one owner of
  calibration): the temperature (and top-label scaling) from the combination's held-out
  predictions, the in-scope score on the heads' input vectors. The ranking, the fallback and
  the out-of-scope discount read these confidences;
* the **persistence** (``combiner_state.py``).

**Parse**: one product ``[B, D] @ [D, N]`` per head, the recorded scores, a weighted sum of logs.
The n-gram head's log probabilities are weighed by the share of the message's tokens its
vocabulary knows (``ngram_coverage``), at parse and on the held-out predictions the weights are
fitted on (there each example's tokens against the other folds' vocabulary): a message in a
language the training data is not in is ranked by the multilingual sentence encoders rather
than by chance n-gram overlaps.
Everything learned is plain numbers (``combiner.json``, one folder per head, ``calibration.*``).
Language views (``language_views.py``) are the same stacking over the members a language trusts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.classifiers import calibration, combiner_members, combiner_state, held_out, stacking
from nlu_engine.classifiers.combiner_members import HeldOut, Member
from nlu_engine.classifiers.language_views import (
    View,
    member_languages,
    member_sets,
    trained_languages,
    view_of,
)
from nlu_engine.classifiers.ranking import write_intent
from nlu_engine.classifiers.sentence_head import sentence_vectors
from nlu_engine.contract.component import FEATURES, INTENT, Component, IntentClassifier, Link, param
from nlu_engine.contract.errors import NOTICE
from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.contract.training_data import TrainingData

logger = logging.getLogger(__name__)

#: kept for code that reads it from here
STATE_FILE = combiner_state.STATE_FILE


class IntentCombiner(IntentClassifier):
    """The pipeline's intent scorers combined and calibrated once (see the module's docstring)."""

    requires = (FEATURES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(IntentClassifier.Config):
        #: a sentence head on each featurizer's dense sentence vector
        sentence_heads: bool = True
        #: the featurizers whose sentence vectors get a head (empty: all); a fine-tuned language
        #: model left out of them has DIET as its one reader (``Component.reads_features_from``)
        featurizers: list[str] = param([])
        #: a TF-IDF logistic regression on the sparse n-gram counts joins with fewer training
        #: examples than this (above it DIET, which reads them too, has the data to); 0: never
        sparse_head_below: int = param(2000, low=0)
        #: the n-gram head's log probabilities weigh by the share of a message's tokens its
        #: vocabulary knows (``sparse_head.token_coverage``): a message in another language
        #: than the training data's is ranked by the sentence encoders
        ngram_coverage: bool = True
        #: the recorded scorers (DIET) join when they held enough examples out
        recorded_scorers: bool = True
        #: a message the language identifier places outside the bot's languages is ranked by
        #: the members whose encoders read its language (``language_views``)
        language_views: bool = True
        ranking_length: int = param(10, low=0)
        renormalize_confidences: bool = False
        random_seed: int | None = 42

    config: Config
    #: whether the n-gram head weighs by coverage (False in a model from before it did)
    ngram_coverage_: bool = False
    #: the languages each possible member reads, by name (``language_views.member_languages``;
    #: None: every language), from the components before it (``link``)
    member_languages_: dict[str, list[str] | None] = {}
    #: the bot's own languages, and the combinations over the members other languages trust
    own_languages_: list[str] = []
    views_: list[View] = []

    @classmethod
    def links(cls, config: IntentCombiner.Config) -> tuple[Link, ...]:
        """An intent classifier before it whose raw scores it weighs (DIET, logistic regression)."""
        return (Link("an intent classifier", provides=INTENT, able="records_intent_scores",
                     advice="add DIETClassifier or LogisticRegressionClassifier above it"),)

    def link(self, before: Sequence[Component]) -> None:
        self.member_languages_ = member_languages(before) if self.config.language_views else {}

    # --- training -------------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        examples = [m for m in data.intent_examples if m.intent]
        self.intents_ = sorted({m.intent for m in examples if m.intent})
        self.out_of_scope_intent_ = calibration.out_of_scope_intent(
            self.config.out_of_scope_intent, self.intents_, self.component_name())
        self.calibration_ = calibration.Calibration()
        self.members_: list[Member] = []
        self.origins_: list[str] = []
        self.ngram_coverage_ = self.config.ngram_coverage
        self.member_languages_ = dict(self.member_languages_)  # link's, or none
        self.own_languages_, self.views_ = [], []
        if not examples:
            return
        index = {name: i for i, name in enumerate(self.intents_)}
        labels = np.array([index[m.intent or ""] for m in examples])
        assignment = held_out.cross_fit_folds(labels, seed=self.config.random_seed)
        held = self._fit_members(examples, labels, assignment)
        if not self.members_:
            logger.log(NOTICE, "%s: no scorer to combine (no dense sentence features and no "
                       "intent scores recorded before it); every intent ranks the same",
                       self.component_name())
            return
        self.origins_ = [m.name for m in self.members_ if m.kind == "head"]
        rows = np.flatnonzero(np.logical_and.reduce([held[m.name][1] for m in self.members_]))
        everyone = tuple(range(len(self.members_)))
        weights, notes = self._fit_weights([held[m.name][0][rows] for m in self.members_],
                                           labels[rows], everyone)
        for member, weight in zip(self.members_, weights, strict=True):
            member.weight = weight
        self.calibration_ = self._calibrate(examples, labels, assignment, held, rows, notes, everyone)
        self._fit_views(examples, labels, assignment, held, rows)

    def _fit_members(self, examples: list[Message], labels: np.ndarray,
                     assignment: np.ndarray) -> dict[str, HeldOut]:
        """Every member (``combiner_members``), each with its held-out predictions, by name."""
        held: dict[str, HeldOut] = {}
        n, seed = len(self.intents_), self.config.random_seed
        fitted: list[tuple[Member, HeldOut]] = []
        with single_blas_thread():  # small products: threads cost more than they give
            if self.config.sentence_heads:
                fitted += [combiner_members.sentence_head(examples, origin, labels, n, seed, assignment)
                           for origin in combiner_members.head_origins(examples, self.config.featurizers)]
            if len(examples) < self.config.sparse_head_below:
                ngrams = combiner_members.ngram_head(examples, labels, n, seed, assignment,
                                                     self.ngram_coverage_)
                fitted += [ngrams] if ngrams is not None else []
        if self.config.recorded_scorers:
            found, left_out = combiner_members.recorded(examples, self.intents_)
            fitted += found
            if left_out:
                logger.log(NOTICE, "%s: too few held-out predictions to weigh %s (at least %d "
                           "needed); combining the others", self.component_name(),
                           ", ".join(left_out), calibration.MIN_HELD_OUT)
        for member, predictions in fitted:
            self.members_.append(member)
            held[member.name] = predictions
        return held

    def _fit_views(self, examples: list[Message], labels: np.ndarray, assignment: np.ndarray,
                   held: dict[str, HeldOut], rows: np.ndarray) -> None:
        """The combination over each set of members a language outside the bot's trusts
        (``language_views``), fitted as the full one on the same held-out predictions."""
        self.own_languages_ = trained_languages(self.language, examples)
        self.views_ = []
        names = [m.name for m in self.members_]
        if not self.member_languages_:
            return
        for members in member_sets(self.member_languages_, names, self.own_languages_):
            view = View(members, origins=[names[i] for i in members if self.members_[i].kind == "head"])
            if members:
                view.weights, _ = self._fit_weights(
                    [held[names[i]][0][rows] for i in members], labels[rows], members)
                view.calibration = self._calibrate(examples, labels, assignment, held, rows, {},
                                                   members, view.weights, view.origins)
            self.views_.append(view)

    def _fit_weights(self, held: list[np.ndarray], targets: np.ndarray,
                     members: tuple[int, ...]) -> tuple[list[float], dict[str, Any]]:
        """The weights of ``members`` (``stacking.fit_weights``) and what the fit saw, for the
        calibration's notes; equal weights, with one notice, when nothing can be fitted."""
        fitted = stacking.fit_weights(held, targets)
        if fitted is None:
            if len(held) > 1 and len(members) == len(self.members_):
                logger.log(NOTICE, "%s: too few examples an intent to cross-fit its scorers (an "
                           "intent needs two); their probabilities are averaged with equal weights",
                           self.component_name())
            return stacking.equal_weights(len(held)), {}
        weights, notes = fitted
        notes["members_accuracy"] = {self.members_[i].name: a
                                     for i, a in zip(members, notes["members_accuracy"], strict=True)}
        return weights, notes

    def _calibrate(self, examples: list[Message], labels: np.ndarray, assignment: np.ndarray,
                   held: dict[str, HeldOut], rows: np.ndarray,
                   notes: dict[str, Any], members: tuple[int, ...],
                   weights: list[float] | None = None,
                   origins: list[str] | None = None) -> calibration.Calibration:
        """The one calibration of the combined confidences of ``members`` (with ``weights``, the
        members' own by default), from their held-out predictions (``held_out.cross_fitted``);
        the in-scope score on the sentence vectors of ``origins`` (the combiner's heads by
        default)."""
        if not self.config.calibration:
            return calibration.Calibration()
        chosen = [self.members_[i] for i in members]
        weights = [m.weight for m in chosen] if weights is None else weights
        combined = stacking.combine([held[m.name][0][rows] for m in chosen], weights)
        origins = self.origins_ if origins is None else origins
        vectors = sentence_vectors(examples, origins) if origins else None
        fitted = held_out.cross_fitted(combined, rows, labels, vectors, assignment, self._own())
        fitted.notes.update(notes)
        if not fitted.calibrated and len(members) == len(self.members_):
            logger.log(NOTICE, "%s: too few examples to hold %d out by cross-fitting; its "
                       "confidences are not calibrated", self.component_name(), calibration.MIN_HELD_OUT)
        return fitted

    def _own(self) -> int | None:
        """The index of the data's own out-of-scope intent (never discounted as out of scope)."""
        return self.intents_.index(self.out_of_scope_intent_) if self.out_of_scope_intent_ else None

    # --- parsing --------------------------------------------------------------------------
    def process(self, messages: list[Message]) -> None:
        todo = [m for m in messages if m.tokens.get(TEXT)]
        if not todo or not self.intents_:
            return
        names = [m.name for m in self.members_]
        groups: dict[int, list[int]] = {}  # view index (-1: the full combination) -> rows
        for row, message in enumerate(todo):
            view = view_of(message, self.member_languages_, names, self.own_languages_, self.views_)
            groups.setdefault(-1 if view is None else self.views_.index(view), []).append(row)
        confidences = np.zeros((len(todo), len(self.intents_)))
        for k, rows in groups.items():
            batch = [todo[r] for r in rows]
            if k < 0:
                everyone = View(tuple(range(len(self.members_))), [m.weight for m in self.members_],
                                self.calibration_, self.origins_)
                confidences[rows] = self._confidences(batch, everyone)
            else:
                confidences[rows] = self._confidences(batch, self.views_[k])
        for message, row in zip(todo, confidences, strict=True):
            write_intent(message, self.intents_, row, self.config.ranking_length,
                         self.config.renormalize_confidences)

    def _confidences(self, messages: list[Message], view: View) -> np.ndarray:
        """The calibrated confidences [B, N] of ``view``'s combination."""
        if not view.members:
            return np.full((len(messages), len(self.intents_)), 1.0 / len(self.intents_))
        # each head's input once; side by side, the in-scope score's (None if one is missing)
        vectors_of = {origin: sentence_vectors(messages, [origin]) for origin in view.origins}
        members = [self.members_[i] for i in view.members]
        probabilities = combiner_members.predict(messages, members, self.intents_, vectors_of,
                                                 self.ngram_coverage_)
        confidences = stacking.combine(probabilities, view.weights)
        parts = list(vectors_of.values())
        vectors = np.concatenate(parts, axis=1) if parts and all(v is not None for v in parts) else None
        return view.calibration.apply(confidences, vectors, exempt=self._own())

    # --- persistence ----------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        combiner_state.persist(directory, {
            "intents": self.intents_, "out_of_scope_intent": self.out_of_scope_intent_,
            "origins": self.origins_, "ngram_coverage": self.ngram_coverage_,
            "member_languages": self.member_languages_, "own_languages": self.own_languages_,
        }, self.members_, self.calibration_, self.views_)

    @classmethod
    def load(cls, directory: Path, config: IntentCombiner.Config) -> IntentCombiner:
        component = cls(config)
        state = combiner_state.read_state(directory)
        component.intents_ = [str(i) for i in state["intents"]]
        component.out_of_scope_intent_ = state.get("out_of_scope_intent")
        component.origins_ = [str(o) for o in state.get("origins", [])]
        # a model from before the coverage weight parses as it did
        component.ngram_coverage_ = state.get("ngram_coverage") is True
        component.members_ = combiner_state.load_members(directory, state, len(component.intents_))
        component.calibration_ = calibration.Calibration.load(directory)
        languages = state.get("member_languages") or {}
        component.member_languages_ = {str(k): None if v is None else [str(c) for c in v]
                                       for k, v in languages.items()}
        component.own_languages_ = [str(c) for c in state.get("own_languages", [])]
        component.views_ = combiner_state.load_views(directory, state, len(component.members_))
        return component
