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
* every **recorded scorer** before it (DIET: ``classifiers/scores.py``), whose raw probabilities
  it reads from the message.

**Fitting.** Each member's held-out predictions: the heads' by cross-fitting on
``training_data.split.cross_fit_folds`` (every example predicted by a head trained without its
fold), DIET's on the examples it held out for its own calibration. The combination is a weighted
geometric mean, ``softmax(sum_m w_m log p_m)`` with ``w_m >= 0`` fitted by likelihood on the
examples every member predicted held out; when one member alone predicts those examples more
accurately than the combination beyond chance (a sign test on the examples only one of them gets
right), that member alone is kept, so the whole is not worse than its best part where that can be
measured. A recorded scorer with fewer than ``calibration.MIN_HELD_OUT``
held-out predictions (DIET on a few examples an intent) is left out, with one notice.

**Calibration**, once, of what the user sees (``calibration.cross_fitted``): the temperature (and
top-label scaling) from the combination's held-out predictions, the in-scope score on the heads'
input vectors. The ranking, the fallback and the out-of-scope discount read these confidences.

**Parse**: one product ``[B, D] @ [D, N]`` per head, the recorded scores, a weighted sum of logs.
The n-gram head's log probabilities are weighed by the share of the message's tokens its
vocabulary knows (``ngram_coverage``), at parse and on the held-out predictions the weights are
fitted on (there each example's tokens against the other folds' vocabulary): a message in a
language the training data is not in is ranked by the multilingual sentence encoders rather
than by chance n-gram overlaps.
Everything learned is plain numbers (``combiner.json``, one folder per head, ``calibration.*``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

from nlu_engine.classifiers import calibration, scores
from nlu_engine.classifiers.language_views import (
    View,
    member_languages,
    member_sets,
    trained_languages,
    view_of,
)
from nlu_engine.classifiers.ranking import write_intent
from nlu_engine.classifiers.sentence_head import (
    SentenceHead,
    cross_fitted_probabilities,
    sentence_vectors,
)
from nlu_engine.classifiers.sparse_head import (
    CS,
    SparseHead,
    held_out_coverage,
    sparse_rows,
    tempered,
    token_coverage,
)
from nlu_engine.contract.component import FEATURES, Component, IntentClassifier, param
from nlu_engine.contract.errors import NOTICE
from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.split import cross_fit_folds, out_of_fold

logger = logging.getLogger(__name__)

STATE_FILE = "combiner.json"
#: the largest weight of a member's log probabilities
MAX_WEIGHT = 20.0


@dataclass
class Member:
    """One scorer: a head on one featurizer's sentence vector, or a recorded scorer."""

    kind: str  # "head", "sparse" or "recorded"
    name: str  # the featurizer's origin, "n-grams", or the scorer's name
    weight: float = 1.0
    head: SentenceHead | SparseHead | None = field(default=None, repr=False)


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
        seed = self.config.random_seed
        assignment = cross_fit_folds(labels, seed=seed)
        held: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # name -> (probabilities [M, N], held [M])
        with single_blas_thread():  # small products: threads cost more than they give
            for origin in self._head_origins(examples):
                vectors = sentence_vectors(examples, [origin])
                assert vectors is not None  # _head_origins checked
                head = SentenceHead.fit(vectors, labels, len(self.intents_), seed)
                self.members_.append(Member("head", origin, head=head))
                held[origin] = _spread(*cross_fitted_probabilities(
                    vectors, labels, len(self.intents_), seed, assignment), len(examples))
            if len(examples) < self.config.sparse_head_below:
                self._add_sparse(examples, labels, assignment, held)
        if self.config.recorded_scorers:
            self._add_recorded(examples, held)
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

    def _fit_views(self, examples: list[Message], labels: np.ndarray, assignment: np.ndarray,
                   held: dict[str, tuple[np.ndarray, np.ndarray]], rows: np.ndarray) -> None:
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

    def _head_origins(self, examples: list[Message]) -> list[str]:
        """The featurizers whose dense sentence vectors every example carries."""
        if not self.config.sentence_heads:
            return []
        origins: list[str] = []
        for f in examples[0].features:
            if (f.attribute == TEXT and f.kind == "sentence" and not f.is_sparse
                    and (not self.config.featurizers or f.origin in self.config.featurizers)
                    and f.origin not in origins):
                origins.append(f.origin)
        return [o for o in origins if sentence_vectors(examples, [o]) is not None]

    def _add_sparse(self, examples: list[Message], labels: np.ndarray, assignment: np.ndarray,
                    held: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """The n-gram member, its ``C`` the likeliest of ``sparse_head.CS`` on its cross-fitted
        predictions; none when the messages have no sparse sentence features."""
        counts = sparse_rows(examples)
        if counts is None or counts.shape[1] == 0:
            return
        idf = SparseHead.fit_idf(counts)
        n, seed = len(self.intents_), self.config.random_seed
        best: tuple[float, float, np.ndarray, np.ndarray] | None = None
        for c in CS:  # the likeliest C on the held-out predictions (the first without any)
            def predict(train: np.ndarray, held: np.ndarray, c: float = c) -> np.ndarray:
                head = SparseHead.fit(counts[train], labels[train], n, c, idf, seed)
                return head.probabilities(counts[held])

            probabilities, rows = out_of_fold(assignment, predict, n)
            loss = -float(np.mean(np.log(np.maximum(probabilities[np.arange(len(rows)), labels[rows]],
                                                    1e-12)))) if len(rows) else 0.0
            if best is None or loss < best[0]:
                best = (loss, c, probabilities, rows)
        assert best is not None
        _, c, probabilities, rows = best
        head = SparseHead.fit(counts, labels, n, c, idf, seed)
        self.members_.append(Member("sparse", "n-grams", head=head))
        if self.ngram_coverage_:
            probabilities = tempered(probabilities, held_out_coverage(examples, assignment)[rows])
        held["n-grams"] = _spread(probabilities, rows, len(examples))

    def _add_recorded(self, examples: list[Message], held: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """A member for each recorded scorer with enough held-out predictions; a notice for
        those without (they rank nothing here)."""
        left_out = []
        for name in scores.scorers_on(examples):
            probabilities, present = scores.gather(examples, name, self.intents_)
            if int(present.sum()) >= calibration.MIN_HELD_OUT:
                self.members_.append(Member("recorded", name))
                held[name] = (probabilities, present)
            else:
                left_out.append(f"{name} ({int(present.sum())} held out)")
        if left_out:
            logger.log(NOTICE, "%s: too few held-out predictions to weigh %s (at least %d "
                       "needed); combining the others", self.component_name(), ", ".join(left_out),
                       calibration.MIN_HELD_OUT)

    def _fit_weights(self, held: list[np.ndarray], targets: np.ndarray,
                     members: tuple[int, ...]) -> tuple[list[float], dict[str, Any]]:
        """The weights of ``members``, by likelihood on their held-out predictions [H, N] each;
        the best member alone when it is surely better than the combination
        (``_surely_better``). Returns them and what the fit saw, for the calibration's notes."""
        if len(targets) < 2 or len(held) == 1:
            if len(held) > 1 and len(members) == len(self.members_):
                logger.log(NOTICE, "%s: too few examples an intent to cross-fit its scorers (an "
                           "intent needs two); their probabilities are averaged with equal weights",
                           self.component_name())
            return [1.0 / len(held) if len(held) > 1 else 1.0] * len(held), {}
        logs = np.stack([np.log(np.maximum(p, 1e-12)) for p in held])  # [K, H, N]
        weights = _likeliest_weights(logs, targets)
        combined = np.tensordot(weights, logs, axes=1).argmax(axis=1) == targets  # [H]
        accuracy = float(combined.mean())
        right = [p.argmax(axis=1) == targets for p in held]
        alone = [(float(r.mean()), k) for k, r in enumerate(right)]
        k = max(alone)[1]
        if _surely_better(right[k], combined):
            weights = np.zeros(len(held))
            weights[k] = _likeliest_weights(logs[k : k + 1], targets)[0]
        accuracies = {self.members_[i].name: a for i, (a, _) in zip(members, alone, strict=True)}
        return ([float(w) for w in weights],
                {"held_out": len(targets), "combined_accuracy": accuracy, "members_accuracy": accuracies})

    def _calibrate(self, examples: list[Message], labels: np.ndarray, assignment: np.ndarray,
                   held: dict[str, tuple[np.ndarray, np.ndarray]], rows: np.ndarray,
                   notes: dict[str, Any], members: tuple[int, ...],
                   weights: list[float] | None = None,
                   origins: list[str] | None = None) -> calibration.Calibration:
        """The one calibration of the combined confidences of ``members`` (with ``weights``, the
        members' own by default), from their held-out predictions; the in-scope score on the
        sentence vectors of ``origins`` (the combiner's heads by default)."""
        if not self.config.calibration:
            return calibration.Calibration()
        chosen = [self.members_[i] for i in members]
        combined = _combine(chosen, [held[m.name][0][rows] for m in chosen], weights)
        origins = self.origins_ if origins is None else origins
        vectors = sentence_vectors(examples, origins) if origins else None
        own = self.intents_.index(self.out_of_scope_intent_) if self.out_of_scope_intent_ else None
        fitted = calibration.cross_fitted(combined, rows, labels, vectors, assignment, own)
        fitted.notes.update(notes)
        if not fitted.calibrated and len(members) == len(self.members_):
            logger.log(NOTICE, "%s: too few examples to hold %d out by cross-fitting; its "
                       "confidences are not calibrated", self.component_name(), calibration.MIN_HELD_OUT)
        return fitted

    # --- parsing --------------------------------------------------------------------------
    def _member_probabilities(self, messages: list[Message], vectors_of: dict[str, np.ndarray | None],
                              members: list[Member]) -> list[np.ndarray]:
        """Each of ``members``' probabilities [B, N]; ``vectors_of``: each head's input vectors."""
        out = []
        for member in members:
            if isinstance(member.head, SparseHead):
                counts = sparse_rows(messages, width=len(member.head.idf))
                if counts is None:  # messages without the features: an empty row
                    counts = scipy.sparse.csr_matrix((len(messages), len(member.head.idf)))
                probabilities = member.head.probabilities(counts)
                if self.ngram_coverage_:
                    probabilities = tempered(probabilities, token_coverage(messages))
                out.append(probabilities)
            elif member.head is not None:
                vectors = vectors_of[member.name]
                if vectors is None:  # messages without the features: a blank vector
                    vectors = np.zeros((len(messages), member.head.weights.shape[0]), np.float32)
                out.append(member.head.probabilities(vectors))
            else:
                out.append(scores.gather(messages, member.name, self.intents_)[0])
        return out

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
        confidences = _combine(members, self._member_probabilities(messages, vectors_of, members),
                               view.weights)
        parts = list(vectors_of.values())
        vectors = np.concatenate(parts, axis=1) if parts and all(v is not None for v in parts) else None
        own = self.intents_.index(self.out_of_scope_intent_) if self.out_of_scope_intent_ else None
        return view.calibration.apply(confidences, vectors, exempt=own)

    # --- persistence ----------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        state: dict[str, Any] = {
            "intents": self.intents_, "out_of_scope_intent": self.out_of_scope_intent_,
            "members": [{"kind": m.kind, "name": m.name, "weight": m.weight} for m in self.members_],
            "origins": self.origins_, "ngram_coverage": self.ngram_coverage_,
            "member_languages": self.member_languages_, "own_languages": self.own_languages_,
            "views": [{"members": list(v.members), "weights": v.weights, "origins": v.origins}
                      for v in self.views_],
        }
        (directory / STATE_FILE).write_text(json.dumps(state, indent=1))
        for i, member in enumerate(self.members_):
            if member.head is not None:
                (directory / f"head_{i}").mkdir()
                member.head.persist(directory / f"head_{i}")
        self.calibration_.persist(directory)
        for k, view in enumerate(self.views_):
            (directory / f"view_{k}").mkdir()
            view.calibration.persist(directory / f"view_{k}")

    @classmethod
    def load(cls, directory: Path, config: IntentCombiner.Config) -> IntentCombiner:
        component = cls(config)
        state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
        component.intents_ = [str(i) for i in state["intents"]]
        component.out_of_scope_intent_ = state.get("out_of_scope_intent")
        component.origins_ = [str(o) for o in state.get("origins", [])]
        # a model from before the coverage weight parses as it did
        component.ngram_coverage_ = state.get("ngram_coverage") is True
        component.members_ = []
        for i, entry in enumerate(state["members"]):
            kind, weight = str(entry["kind"]), float(entry["weight"])
            if kind not in ("head", "sparse", "recorded") or not np.isfinite(weight) or weight < 0:
                raise ValueError(f"{STATE_FILE}: member {i} is not a head or recorded scorer "
                                 "with a weight of at least 0")
            head: SentenceHead | SparseHead | None = None
            if kind == "sparse":
                head = SparseHead.load(directory / f"head_{i}", labels=len(component.intents_))
            elif kind == "head":
                head = SentenceHead.load(directory / f"head_{i}", labels=len(component.intents_))
                if head is None:
                    raise ValueError(f"{STATE_FILE}: member {i}'s head is missing (head_{i}/)")
            component.members_.append(Member(kind, str(entry["name"]), weight, head))
        component.calibration_ = calibration.Calibration.load(directory)
        _load_views(component, state, directory)
        return component


def _load_views(component: IntentCombiner, state: dict[str, Any], directory: Path) -> None:
    """The language views of ``combiner.json`` (none in a model from before them, which parses
    every message with the full combination, as it did)."""
    languages = state.get("member_languages") or {}
    component.member_languages_ = {str(k): None if v is None else [str(c) for c in v]
                                   for k, v in languages.items()}
    component.own_languages_ = [str(c) for c in state.get("own_languages", [])]
    component.views_ = []
    count = len(component.members_)
    for k, entry in enumerate(state.get("views", [])):
        members = tuple(int(i) for i in entry["members"])
        weights = [float(w) for w in entry["weights"]]
        if (any(not 0 <= i < count for i in members) or len(weights) != len(members)
                or not all(np.isfinite(w) and w >= 0 for w in weights)):
            raise ValueError(f"{STATE_FILE}: view {k} names members that are not there or weights "
                             "that are not numbers of at least 0")
        component.views_.append(View(members, weights, calibration.Calibration.load(
            directory / f"view_{k}"), [str(o) for o in entry.get("origins", [])]))


def _combine(members: Sequence[Member], probabilities: list[np.ndarray],
             weights: Sequence[float] | None = None) -> np.ndarray:
    """``softmax(sum_m w_m log p_m)`` [B, N] of the members' probabilities [B, N] each, with
    ``weights`` (the members' own by default)."""
    weights = [m.weight for m in members] if weights is None else weights
    z = np.zeros_like(probabilities[0], dtype=np.float64)
    for weight, p in zip(weights, probabilities, strict=True):
        z += weight * np.log(np.maximum(p, 1e-12))
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _spread(probabilities: np.ndarray, rows: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold probabilities [H, N] of examples ``rows`` [H] spread to all ``total``
    examples [M, N], with a flag [M] for those predicted."""
    out = np.zeros((total, probabilities.shape[1]))
    present = np.zeros(total, bool)
    out[rows] = probabilities
    present[rows] = True
    return out, present


def _surely_better(one: np.ndarray, other: np.ndarray) -> bool:
    """Whether predictions right where ``one`` [H] says are more accurate than ``other``'s [H]
    beyond chance: of the examples only one of them gets right, ``one`` gets more than half by
    over two standard deviations (a sign test). A difference of one or two examples in a few
    hundred says nothing about which is better on new messages."""
    wins, losses = int((one & ~other).sum()), int((other & ~one).sum())
    return wins - losses > 2.0 * np.sqrt(max(wins + losses, 1))


def _likeliest_weights(logs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Weights [K] in [0, MAX_WEIGHT] maximising the likelihood of ``targets`` [H] under
    ``softmax(sum_k w_k logs_k)``, from the members' log probabilities [K, H, N] (L-BFGS-B with
    the exact gradient)."""
    from scipy.optimize import minimize

    rows = np.arange(len(targets))

    def nll(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = np.tensordot(w, logs, axes=1)  # [H, N]
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        p = e / e.sum(axis=1, keepdims=True)
        value = float(np.mean(np.log(e.sum(axis=1)) - z[rows, targets]))
        # d/dw_k: mean over rows of (E_p[logs_k] - logs_k[target])
        grad = np.einsum("khn,hn->k", logs, p) / len(rows) - logs[:, rows, targets].mean(axis=1)
        return value, grad

    start = np.ones(len(logs))
    result = minimize(nll, start, jac=True, method="L-BFGS-B", bounds=[(0.0, MAX_WEIGHT)] * len(logs))
    return np.asarray(result.x, np.float64)
