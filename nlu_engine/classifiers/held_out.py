"""Held-out predictions and calibration: the one owner.

Every intent classifier's confidences are fitted here, as scikit-learn's
``CalibratedClassifierCV`` owns hold-out, cross-fitting and calibration for its estimators. The
classifiers are estimators (they fit on arrays and return raw class probabilities); this module

* **makes every fold and hold-out**: a stratified share held out (:func:`holdout`, on
  ``training_data.split.stratified_holdout``) or cross-fitting folds (:func:`cross_fit_folds`,
  on ``training_data.split.round_robin``, the one fold splitter) and the one loop over folds
  (:func:`out_of_fold`, :func:`cross_fit`);
* **fits every calibration map** on the predictions made held out: the temperature and the top
  label's Platt scaling (:func:`fit_temperature`, :func:`fit_top_label`,
  :func:`calibrate_probabilities`), the in-scope score (``calibration.InScope``), from a held-out
  share (:func:`fit_calibration`, :func:`refit_in_scope`) or from out-of-fold predictions
  (:func:`cross_fitted`), and libsvm's pairwise sigmoids of the SVM (:func:`fit_sigmoid`);
* **records the held-out scores** a combiner weighs its members on (``scores.record``, the
  ``record_as`` of :func:`fit_calibration`);
* runs **the one sequence** of a classifier that holds a share out (:func:`fit_holding_out`:
  hold out, fit on the rest, calibrate on the held-out ones, bring them back).

What is fitted is a ``calibration.Calibration`` (plain numbers, applied at parse).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from nlu_engine.classifiers import scores
from nlu_engine.classifiers.calibration import (
    DEFAULT_ALPHA,
    MAX_HELD_OUT,
    MAX_REFERENCE_EXAMPLES,
    MIN_ERRORS_FOR_PLATT,
    MIN_HELD_OUT,
    MIN_HELD_OUT_FOR_PLATT,
    Calibration,
    InScope,
    Predict,
    _logit,
    _softmax,
)
from nlu_engine.contract.errors import NOTICE
from nlu_engine.contract.message import Message
from nlu_engine.contract.threads import process_threads
from nlu_engine.training_data.split import round_robin, stratified_holdout

logger = logging.getLogger(__name__)

#: the folds of a cross-fitting (fewer when no label has that many examples)
CROSS_FIT_FOLDS = 5


# --- folds and hold-outs ----------------------------------------------------------------------
def cross_fit_folds(labels: np.ndarray, folds: int = CROSS_FIT_FOLDS, seed: int | None = 42) -> np.ndarray:
    """A fold in ``range(k)`` for each example [M] of label indices ``labels`` [M], stratified
    by label (seeded), or -1 for the examples never held out: those of a label with one example.
    ``k`` is at most ``folds`` and at most the largest label's count. Every classifier that
    cross-fits (a prediction for each example from a model trained without it) uses these."""
    rng = np.random.default_rng(seed)
    counts = np.bincount(labels) if len(labels) else np.zeros(0, np.int64)
    k = int(min(folds, counts.max(initial=0)))
    if k < 2:
        return np.full(len(labels), -1, np.int64)
    # consecutive folds: a label's two or more examples are never all out at once
    groups = [rng.permutation(np.flatnonzero(labels == label)) for label in np.flatnonzero(counts >= 2)]
    return round_robin(groups, k, len(labels))


def block_folds(order: np.ndarray, folds: int) -> np.ndarray:
    """A fold for each of ``len(order)`` examples: ``order`` (a permutation) cut into ``folds``
    contiguous blocks, as libsvm cuts its probability folds (``svm_binary_svc_probability``)."""
    n = len(order)
    assignment = np.empty(n, np.int64)
    for fold in range(folds):
        assignment[order[fold * n // folds : (fold + 1) * n // folds]] = fold
    return assignment


def holdout(
    labels: Sequence[str | None], enabled: bool, share: float, seed: int | None, where: str,
    keys: np.ndarray | None = None, trained: np.ndarray | None = None, notice: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) indices for a classifier's calibration: ``share`` of each label's
    examples, rounded down, at most ``MAX_HELD_OUT`` in all (``stratified_holdout``, with its
    ``keys`` and ``trained``); none held out when calibration is off, or (with one notice) when
    the data is too small to spare ``MIN_HELD_OUT`` examples (``notice`` False: quietly)."""
    everything = np.arange(len(labels))
    if not enabled:
        return everything, np.zeros(0, np.int64)
    train, held = stratified_holdout(labels, share, seed, keys=keys, trained=trained, max_held=MAX_HELD_OUT)
    if len(held) < MIN_HELD_OUT:
        if not notice:
            return everything, np.zeros(0, np.int64)
        logger.log(
            NOTICE,
            "%s: too few examples to hold %d out for calibration (an intent gives one per %d "
            "examples); its confidences are not calibrated", where, MIN_HELD_OUT, int(np.ceil(1 / share)),
        )
        return everything, np.zeros(0, np.int64)
    return train, held


def out_of_fold(
    assignment: np.ndarray, predict: Callable[[np.ndarray, np.ndarray], np.ndarray], width: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(out-of-fold predictions [H, width], the indices [H] of the examples they are for):
    ``predict(train, held)`` fits on the examples ``train`` [M] bool (every fold of
    ``assignment`` but one) and predicts those of ``held`` [K] (that fold).

    The folds' fits are independent, so they run on the process's threads (``process_threads``):
    the linear heads' solvers use one core each. ``predict`` must be thread-safe; the result is
    the same as one fold after the other."""
    folds = [np.flatnonzero(assignment == fold) for fold in range(int(assignment.max(initial=-1)) + 1)]
    if not folds:
        return np.zeros((0, width)), np.zeros(0, np.int64)
    workers = min(len(folds), process_threads())
    # warning filters are process-wide: fits that silence their own warnings in several threads
    # at once could leave a filter behind, so the filters are restored once all are done
    with warnings.catch_warnings(), ThreadPoolExecutor(max_workers=workers) as pool:
        predictions = list(pool.map(lambda fold: predict(assignment != fold, folds[fold]), range(len(folds))))
    return np.concatenate(predictions), np.concatenate(folds)


def cross_fit(
    fit_predict: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    labels: np.ndarray, n_labels: int, assignment: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(out-of-fold probabilities [H, n_labels], the indices [H] of the examples they are for)
    of an estimator: ``fit_predict(train, train_labels, held)`` fits on the examples ``train``
    (indices) and returns its raw probabilities of ``held`` (indices), for each fold of
    ``assignment`` (:func:`cross_fit_folds`)."""

    def predict(train: np.ndarray, held: np.ndarray) -> np.ndarray:
        rows = np.flatnonzero(train)
        return fit_predict(rows, labels[rows], held)

    return out_of_fold(assignment, predict, n_labels)



def calibrate_cross_fitted(
    fit_predict: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    labels: np.ndarray, n_labels: int, vectors: np.ndarray | None = None,
    out_of_scope: int | None = None, seed: int | None = 42,
) -> Calibration:
    """An estimator's calibration from its out-of-fold predictions: :func:`cross_fit` on
    :func:`cross_fit_folds`, then :func:`cross_fitted` (the in-scope score on ``vectors``)."""
    assignment = cross_fit_folds(labels, seed=seed)
    probabilities, rows = cross_fit(fit_predict, labels, n_labels, assignment)
    return cross_fitted(probabilities, rows, labels, vectors, assignment, out_of_scope)

# --- calibration maps -------------------------------------------------------------------------
def fit_temperature(log_probs: np.ndarray, targets: np.ndarray) -> float:
    """The temperature ``T`` minimising the NLL of ``softmax(log_probs / T)`` [M, N] against
    ``targets`` [M] (label indices; -1 rows are ignored), searched over log T in [-3, 3]."""
    from scipy.optimize import minimize_scalar

    keep = targets >= 0
    scores, y = log_probs[keep].astype(np.float64), targets[keep]
    if not len(y):
        return 1.0

    def nll(log_t: float) -> float:
        z = scores / np.exp(log_t)
        z = z - z.max(axis=1, keepdims=True)
        return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(y)), y]))

    result = minimize_scalar(nll, bounds=(-3.0, 3.0), method="bounded", options={"xatol": 1e-4})
    return float(np.exp(result.x))


def fit_top_label(confidences: np.ndarray, correct: np.ndarray) -> tuple[float, float]:
    """``(a, b)`` of ``sigmoid(a * logit(c) + b)`` fitted by likelihood to whether the top
    predictions with confidences ``c`` [M] were ``correct`` [M]; (1, 0) leaves them as they are."""
    from scipy.optimize import minimize

    x = _logit(confidences)
    y = correct.astype(np.float64)

    def nll(w: np.ndarray) -> float:
        z = w[0] * x + w[1]
        return float(np.mean(np.logaddexp(0.0, z) - y * z))  # -log-likelihood of a sigmoid

    result = minimize(nll, np.array([1.0, 0.0]), method="L-BFGS-B",
                      bounds=[(0.05, 20.0), (-10.0, 10.0)])
    return (float(result.x[0]), float(result.x[1])) if result.success else (1.0, 0.0)




def fit_calibration(
    predict: Predict,
    names: list[str],
    train: list[Message],
    held: list[Message],
    label_of: Callable[[Message], str | None],
    out_of_scope: str | None = None,
    seed: int | None = 42,
    record_as: str | None = None,
) -> Calibration:
    """Fit the temperature on the held-out examples' predictions and, when ``predict`` gives
    vectors, the in-scope score on the training examples' vectors (a sample of at most
    ``MAX_REFERENCE_EXAMPLES``) with the held-out ones as its reference. The out-of-scope
    intent's examples join neither the class means nor the reference. ``record_as``: the
    scorer name the held-out examples' raw probabilities are recorded under for a combiner
    (``scores.record``): made before the classifier learned from them."""
    if not held:
        return Calibration()
    index = {name: i for i, name in enumerate(names)}
    probabilities, held_vectors = predict(held)
    if record_as is not None:
        for message, row in zip(held, probabilities, strict=True):
            scores.record(message, record_as, names, row)
    targets = np.array([index.get(label_of(m) or "", -1) for m in held])
    fitted = calibrate_probabilities(probabilities, targets)
    if held_vectors is not None:
        in_held = np.array([label_of(m) != out_of_scope for m in held])
        fitted.in_scope = _fit_in_scope(predict, train, index, label_of, out_of_scope, seed,
                                        held_vectors[in_held])
    record_held_out(fitted, probabilities, targets, held_vectors)
    return fitted


def record_held_out(fitted: Calibration, probabilities: np.ndarray, targets: np.ndarray,
                    vectors: np.ndarray | None) -> None:
    """Keep the held-out examples' calibrated top confidences and whether their top intent was
    right (``notes``: ``held_out_confidence``, ``held_out_correct``), for what a fallback
    threshold would do to them (``fallback.threshold_advice``)."""
    calibrated = fitted.apply(probabilities, vectors)
    fitted.notes["held_out_confidence"] = [round(float(c), 4) for c in calibrated.max(axis=1)]
    fitted.notes["held_out_correct"] = [bool(c) for c in calibrated.argmax(axis=1) == targets]


def calibrate_probabilities(probabilities: np.ndarray, targets: np.ndarray) -> Calibration:
    """The temperature, and with enough held-out examples and errors the top label's scaling,
    fitted on held-out probabilities [M, N] against their label indices [M] (no in-scope score)."""
    temperature = fit_temperature(np.log(np.maximum(probabilities, 1e-300)), targets)
    correct = probabilities.argmax(1) == targets
    slope, bias = 1.0, 0.0
    if len(targets) >= MIN_HELD_OUT_FOR_PLATT and int((~correct).sum()) >= MIN_ERRORS_FOR_PLATT:
        tempered = _softmax(np.log(np.maximum(probabilities, 1e-300)) / temperature)
        slope, bias = fit_top_label(tempered.max(axis=1), correct)
    notes: dict[str, Any] = {"held_out_accuracy": float(correct.mean())}
    return Calibration(temperature=temperature, top_slope=slope, top_bias=bias,
                       examples=len(targets), notes=notes)


def cross_fitted(
    probabilities: np.ndarray, rows: np.ndarray, labels: np.ndarray, vectors: np.ndarray | None,
    assignment: np.ndarray, out_of_scope: int | None = None,
) -> Calibration:
    """A calibration from out-of-fold predictions, for a classifier that cross-fits instead of
    holding a share out: ``probabilities`` [H, N] of the examples ``rows`` [H], each predicted by
    a model trained without its fold (``assignment`` [M], ``training_data.split.cross_fit_folds``)
    of all examples' label indices ``labels`` [M].

    The temperature (and, with enough of them, the top label's scaling) come from the
    probabilities; with ``vectors`` [M, D], the in-scope score's class means and covariance from
    every example of a known intent but the out-of-scope one, with the out-of-fold examples'
    distances (each to means fitted without its fold) as its reference. Uncalibrated when fewer
    than ``MIN_HELD_OUT`` examples could be held out."""
    if len(rows) < MIN_HELD_OUT:
        return Calibration()
    fitted = calibrate_probabilities(probabilities, labels[rows])
    if vectors is not None:
        fitted.in_scope = _cross_fitted_in_scope(vectors, labels, assignment, out_of_scope)
    fitted.notes["cross_fitted"] = True
    record_held_out(fitted, probabilities, labels[rows], None if vectors is None else vectors[rows])
    return fitted


def _cross_fitted_in_scope(vectors: np.ndarray, labels: np.ndarray, assignment: np.ndarray,
                           out_of_scope: int | None) -> InScope | None:
    """The in-scope score on every in-scope example, its reference each fold's distances to
    class means fitted without that fold; None when no fold has both sides."""
    in_scope_rows = labels != out_of_scope if out_of_scope is not None else np.ones(len(labels), bool)
    reference = []
    for fold in range(int(assignment.max(initial=-1)) + 1):
        train = (assignment != fold) & in_scope_rows
        held = (assignment == fold) & in_scope_rows
        if held.any() and train.any():
            reference.append(InScope.fit(vectors[train], labels[train], vectors[held]).reference)
    if not reference:
        return None
    fitted = InScope.fit(vectors[in_scope_rows], labels[in_scope_rows], vectors[:0])
    fitted.reference = np.sort(np.concatenate(reference))
    return fitted


def refit_in_scope(
    fitted: Calibration,
    predict: Predict,
    names: list[str],
    examples: list[Message],
    label_of: Callable[[Message], str | None],
    out_of_scope: str | None = None,
    seed: int | None = 42,
) -> Calibration:
    """``fitted`` for a network trained again on every example (``examples``, the held-out ones
    among them). The temperature and the top label's scaling carry over. The in-scope score's
    class means and covariance are fitted anew on the new network's vectors. No example is held
    out from it any more, so the reference distances are the first network's, rescaled by how
    far the training examples themselves lie in each network (the ratio of their medians)."""
    old = fitted.in_scope
    if old is None or old.train_median <= 0:
        return fitted
    index = {name: i for i, name in enumerate(names)}
    new = _fit_in_scope(predict, examples, index, label_of, out_of_scope, seed, None, old.alpha)
    if new is None:
        return fitted
    scale = new.train_median / old.train_median
    new.reference = old.reference * scale
    notes = {**fitted.notes, "refit_on_all_examples": True, "reference_scale": scale}
    return Calibration(temperature=fitted.temperature, top_slope=fitted.top_slope,
                       top_bias=fitted.top_bias, in_scope=new, examples=fitted.examples, notes=notes)


def _fit_in_scope(
    predict: Predict, examples: list[Message], index: dict[str, int],
    label_of: Callable[[Message], str | None], out_of_scope: str | None, seed: int | None,
    held_vectors: np.ndarray | None, alpha: float = DEFAULT_ALPHA,
) -> InScope | None:
    """The in-scope score fitted on the vectors of ``examples`` of a known intent other than the
    out-of-scope one (a seeded sample of at most ``MAX_REFERENCE_EXAMPLES``), with
    ``held_vectors`` [M, D] as its reference (none: an empty one); None without vectors."""
    chosen = [m for m in examples if label_of(m) in index and label_of(m) != out_of_scope]
    if len(chosen) > MAX_REFERENCE_EXAMPLES:
        rng = np.random.default_rng(seed)
        picked = np.sort(rng.choice(len(chosen), MAX_REFERENCE_EXAMPLES, replace=False))
        chosen = [chosen[i] for i in picked]
    _, vectors = predict(chosen)
    if vectors is None or not chosen:
        return None
    labels = np.array([index[label_of(m) or ""] for m in chosen])
    reference = held_vectors if held_vectors is not None else vectors[:0]
    return InScope.fit(vectors, labels, reference, alpha=alpha)


# --- the sequence of a classifier that holds a share out ------------------------------------
class HoldsOut(Protocol):
    """What :func:`fit_holding_out` calls (``calibrated.CalibratedIntentClassifier``'s hooks)."""

    calibration_: Calibration

    def hold_out(self, examples: list[Message], names: list[str], seed: int | None,
                 trained_on: np.ndarray | None = None) -> tuple[list[Message], list[Message]]: ...
    def fit_examples(self, examples: list[Message]) -> None: ...
    def calibrate(self, train: list[Message], held: list[Message], names: list[str],
                  seed: int | None) -> None: ...
    def refits(self, examples: int) -> bool: ...
    def joins_late(self, examples: int) -> bool: ...
    def fit_joining_late(self, train: list[Message], held: list[Message]) -> None: ...


def fit_holding_out(classifier: HoldsOut, examples: list[Message], names: list[str],
                    seed: int | None, trained_on: np.ndarray | None = None) -> Calibration:
    """Train ``classifier`` on ``examples`` with calibrated confidences, the one sequence:
    hold out a share of each label's examples (:func:`holdout`, as ``classifier.hold_out``
    says), fit on the rest (``fit_examples``), fit the calibration on the held-out ones
    (``calibrate``), then, as ``refits`` says, fit again on every example. When ``joins_late``
    says so, ``fit_joining_late`` does the last three steps in one training instead. Nothing
    held out (calibration off, one label, too little data): one fit on every example,
    uncalibrated. Returns the calibration (``classifier.calibration_`` when it calibrated)."""
    classifier.calibration_ = Calibration()
    train, held = classifier.hold_out(examples, names, seed, trained_on)
    if held and classifier.joins_late(len(examples)):
        classifier.fit_joining_late(train, held)
        return classifier.calibration_
    classifier.fit_examples(train)
    if held:
        classifier.calibrate(train, held, names, seed)
        if classifier.refits(len(examples)):
            classifier.fit_examples(examples)
    return classifier.calibration_


def fit_sigmoid(decisions: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Platt's sigmoid ``P(+1 | f) = 1 / (1 + exp(A f + B))`` by libsvm's Newton method with
    backtracking (Lin, Lin and Weng 2007); ``labels`` are +1 / -1."""
    f = np.asarray(decisions, dtype=np.float64)
    positive = np.asarray(labels) > 0
    prior1 = float(positive.sum())
    prior0 = float(len(f) - prior1)
    max_iter, min_step, sigma, eps = 100, 1e-10, 1e-12, 1e-5
    hi_target = (prior1 + 1.0) / (prior1 + 2.0)
    lo_target = 1.0 / (prior0 + 2.0)
    t = np.where(positive, hi_target, lo_target)

    def objective(a: float, b: float) -> float:
        fApB = f * a + b
        return float(
            np.sum(
                np.where(
                    fApB >= 0,
                    t * fApB + np.log1p(np.exp(-np.abs(fApB))),
                    (t - 1) * fApB + np.log1p(np.exp(-np.abs(fApB))),
                )
            )
        )

    A, B = 0.0, float(np.log((prior0 + 1.0) / (prior1 + 1.0)))
    fval = objective(A, B)
    for _ in range(max_iter):
        fApB = f * A + B
        e = np.exp(-np.abs(fApB))
        p = np.where(fApB >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
        q = np.where(fApB >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        d2 = p * q
        h11 = sigma + float(np.sum(f * f * d2))
        h22 = sigma + float(np.sum(d2))
        h21 = float(np.sum(f * d2))
        d1 = t - p
        g1 = float(np.sum(f * d1))
        g2 = float(np.sum(d1))
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            new_a, new_b = A + step * dA, B + step * dB
            new_f = objective(new_a, new_b)
            if new_f < fval + 0.0001 * step * gd:
                A, B, fval = new_a, new_b, new_f
                break
            step /= 2.0
        if step < min_step:
            break
    return A, B
