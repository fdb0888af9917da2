"""SklearnIntentClassifier: a support vector machine with grid search on sentence features.

As in Rasa: ``GridSearchCV(SVC(class_weight="balanced"))`` over ``C`` × ``gamma`` × ``kernels``,
scored by ``scoring_function`` with ``max(2, min(max_cross_validation_folds, n // 5))``
stratified folds, ``n`` being the size of the smallest intent. The input is the sparse and the
dense sentence features of ``text`` side by side (Rasa uses the dense ones only).

Probabilities are libsvm's (what ``SVC(probability=True)`` computes): for each pair of intents a
Platt sigmoid fitted on 5-fold cross-validated decision values, then pairwise coupling (Wu, Lin
and Weng 2004, method 2). They are computed here in NumPy — scikit-learn 1.9 deprecates
``probability=True`` — with a fixed shuffling seed, so training is deterministic (libsvm's own
folds depend on C ``rand()``); the grid search itself is unaffected (it scores ``predict``,
which never uses the probabilities). One deviation, for tiny data: when the cross-validated
decisions of a pair do not rise with its first class (the fitted slope would invert the
probabilities, as libsvm's do on a handful of examples), the sigmoid is fitted on the model's
own decision values instead, so the probabilities still follow the SVM's decisions.

Persisted without pickle: ``svm.npz`` holds the support vectors (CSR parts), the dual
coefficients, intercepts and sigmoid parameters in libsvm's layout, ``svm.json`` the intents,
kernel parameters and grid-search results; prediction is computed from those arrays, identically
before and after loading.

Tiny data: a single intent trains nothing (every message gets intent None, as in Rasa); when
the smallest intent has fewer examples than folds, or the grid has one point, the first grid
point is fitted without search.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse

from nlu_engine.classifiers import calibration, held_out
from nlu_engine.classifiers.calibrated import CalibratedIntentClassifier
from nlu_engine.classifiers.logistic_regression import sentence_matrix
from nlu_engine.classifiers.svm_probability import pairs, pairwise_probabilities
from nlu_engine.contract.component import FEATURES, param
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.npz import Expected, load_npz, refusal
from nlu_engine.contract.training_data import TrainingData

logger = logging.getLogger(__name__)

Kernel = Literal["linear", "rbf", "poly", "sigmoid"]
MODEL_FILE = "svm.npz"
STATE_FILE = "svm.json"
PROBABILITY_FOLDS = 5  # libsvm's nr_fold for probability estimates
CALIBRATION_SEED = 1


class SklearnIntentClassifier(CalibratedIntentClassifier):
    """Rasa's SVM intent classifier (grid search over C, gamma and kernels)."""

    requires = (FEATURES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(CalibratedIntentClassifier.Config):
        C: list[float] = param([1, 2, 5, 10, 20, 100], low=1e-9)  # SVC needs C > 0
        gamma: list[float] = param([0.1], low=0)
        kernels: list[Kernel] = param(["linear"])
        max_cross_validation_folds: int = param(5, low=2)
        scoring_function: str = "f1_weighted"
        num_threads: int = param(1, low=1)
        ranking_length: int = param(10, low=0)

        def validate(self) -> None:
            super().validate()
            empty = [name for name in ("C", "gamma", "kernels") if not getattr(self, name)]
            if empty:
                raise ConfigError(f"{', '.join(empty)} must not be empty: the grid needs a value of each")

    config: Config

    # --- training -------------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        examples = data.intent_examples
        self.classes_ = sorted({str(m.intent) for m in examples})
        X = sentence_matrix(examples).astype(np.float64)
        self.width_ = int(X.shape[1])
        self.model_: SVMModel | None = None
        self.search_: dict[str, Any] = {}
        self.calibration_ = calibration.Calibration()
        if len(self.classes_) < 2:
            logger.warning(
                "SklearnIntentClassifier: the training data has fewer than 2 intents; "
                "nothing is trained and every message gets no intent",
            )
            return
        index = {name: i for i, name in enumerate(self.classes_)}
        y = np.array([index[str(m.intent)] for m in examples])
        params, self.search_ = self._search(X, y)
        self._fitting = (X, y, params, {id(m): i for i, m in enumerate(examples)})
        try:
            self.fit_calibrated(examples, self.classes_, 42)
        finally:
            del self._fitting

    # --- the hooks of CalibratedIntentClassifier.fit_calibrated: the grid's best SVM ----------------
    def label_of(self, message: Message) -> str | None:
        return str(message.intent)

    def fit_examples(self, examples: list[Message]) -> None:
        X, y, params, rows = self._fitting
        index = [rows[id(m)] for m in examples]
        self.model_ = SVMModel.fit(X[index], y[index], len(self.classes_), **params)

    def calibration_predict(self, messages: list[Message]) -> tuple[np.ndarray, None]:
        X, _, _, rows = self._fitting
        assert self.model_ is not None
        return self.model_.predict_proba(X[[rows[id(m)] for m in messages]]), None

    def _grid(self) -> list[dict[str, Any]]:
        return [
            {"C": float(c), "gamma": float(g), "kernel": str(k)}
            for c in self.config.C
            for g in self.config.gamma
            for k in self.config.kernels
        ]

    def _search(self, X: scipy.sparse.csr_matrix, y: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
        """The best grid point (Rasa's grid search) and a summary of the search."""
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC

        grid = self._grid()  # never empty: the config requires a value of each
        smallest = int(np.bincount(y).min())
        folds = max(2, min(self.config.max_cross_validation_folds, smallest // 5))
        if len(grid) == 1 or smallest < folds:
            return grid[0], {"best_params": grid[0], "folds": 0}
        search = GridSearchCV(
            SVC(class_weight="balanced"),
            param_grid={
                "C": [float(c) for c in self.config.C],
                "gamma": [float(g) for g in self.config.gamma],
                "kernel": [str(k) for k in self.config.kernels],
            },
            cv=folds,
            scoring=self.config.scoring_function,
            n_jobs=self.config.num_threads,
            refit=False,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ill-defined F-scores on tiny folds
            try:
                search.fit(X, y)
            except ValueError as error:
                logger.warning(
                    f"SklearnIntentClassifier: grid search failed ({error}); using "
                    f"{grid[0]}",
                )
                return grid[0], {"best_params": grid[0], "folds": 0}
        best = {k: search.best_params_[k] for k in ("C", "gamma", "kernel")}
        summary = {
            "best_params": best,
            "best_score": float(search.best_score_),
            "folds": folds,
            "scoring": self.config.scoring_function,
        }
        return best, summary

    # --- inference ------------------------------------------------------------------------
    def predict_proba(self, messages: list[Message]) -> np.ndarray:
        """Intent probabilities ``[n_messages, n_intents]`` in ``classes_`` order."""
        if self.model_ is None:
            return np.zeros((len(messages), len(self.classes_)))
        X = sentence_matrix(messages, self.width_).astype(np.float64)
        return self.model_.predict_proba(X)

    def process(self, messages: list[Message]) -> None:
        if not messages:
            return
        if self.model_ is None:
            for message in messages:
                message.intent, message.intent_confidence, message.intent_ranking = None, 0.0, []
            return
        self.rank(messages, self.classes_, self.predict_proba(messages), self.config.ranking_length)

    # --- persistence ----------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        state: dict[str, Any] = {
            "classes": self.classes_,
            "width": self.width_,
            "search": self.search_,
            "trained": self.model_ is not None,
        }
        if self.model_ is not None:
            state.update(self.model_.params())
            np.savez(Path(directory) / MODEL_FILE, **self.model_.arrays())
        (Path(directory) / STATE_FILE).write_text(json.dumps(state, ensure_ascii=False, indent=1))
        self.calibration_.persist(Path(directory))

    @classmethod
    def load(cls, directory: Path, config: SklearnIntentClassifier.Config) -> SklearnIntentClassifier:
        component = cls(config)
        state = json.loads((Path(directory) / STATE_FILE).read_text(encoding="utf-8"))
        component.classes_ = [str(c) for c in state["classes"]]
        component.width_ = int(state["width"])
        component.search_ = dict(state.get("search", {}))
        component.model_ = None
        if state.get("trained"):
            path = Path(directory) / MODEL_FILE
            arrays = load_npz(path, svm_expected(len(component.classes_)))
            check_support_vectors(path, arrays, len(component.classes_), component.width_)
            component.model_ = SVMModel.from_arrays(arrays, state)
        component.calibration_ = calibration.Calibration.load(Path(directory))
        return component


# --- the fitted SVM as plain arrays ---------------------------------------------------------
class SVMModel:
    """A fitted one-vs-one C-SVC in libsvm's layout, with Platt sigmoids for probabilities.

    ``dual_coef`` is ``[n_classes - 1, n_SV]`` and ``intercept`` ``[n_pairs]`` (``-rho``) in
    libsvm's sign convention: a positive decision value for pair ``(i, j)``, ``i < j``, favours
    class ``i``. Pairs are ordered ``(0, 1), (0, 2), …, (1, 2), …``.
    """

    def __init__(
        self,
        support_vectors: scipy.sparse.csr_matrix,
        n_support: np.ndarray,
        dual_coef: np.ndarray,
        intercept: np.ndarray,
        prob_a: np.ndarray,
        prob_b: np.ndarray,
        kernel: str,
        gamma: float,
        degree: int = 3,
        coef0: float = 0.0,
        C: float = 1.0,
    ) -> None:
        self.support_vectors = support_vectors
        self.n_support = np.asarray(n_support, dtype=np.int64)
        self.dual_coef = np.asarray(dual_coef, dtype=np.float64)
        self.intercept = np.asarray(intercept, dtype=np.float64)
        self.prob_a = np.asarray(prob_a, dtype=np.float64)
        self.prob_b = np.asarray(prob_b, dtype=np.float64)
        self.kernel = kernel
        self.gamma = float(gamma)
        self.degree = int(degree)
        self.coef0 = float(coef0)
        self.C = float(C)

    @property
    def n_classes(self) -> int:
        return len(self.n_support)

    # --- fitting ---------------------------------------------------------------------------
    @classmethod
    def fit(
        cls, X: scipy.sparse.csr_matrix, y: np.ndarray, n_classes: int, C: float, gamma: float, kernel: str
    ) -> SVMModel:
        """Fit ``SVC(class_weight="balanced")`` on labels ``0..n_classes-1`` and calibrate it."""
        from sklearn.svm import SVC

        svc = SVC(C=C, gamma=gamma, kernel=kernel, class_weight="balanced")
        svc.fit(X, y)
        dual_coef = _dense(svc.dual_coef_)
        intercept = np.array(svc.intercept_, dtype=np.float64)
        if n_classes == 2:  # scikit-learn flips the signs of the binary case; undo it
            dual_coef, intercept = -dual_coef, -intercept
        weights = np.asarray(svc.class_weight_, dtype=np.float64)
        model = cls(
            support_vectors=scipy.sparse.csr_matrix(svc.support_vectors_, dtype=np.float64),
            n_support=np.asarray(svc.n_support_),
            dual_coef=dual_coef,
            intercept=intercept,
            prob_a=np.zeros(len(intercept)),
            prob_b=np.zeros(len(intercept)),
            kernel=kernel,
            gamma=gamma,
            degree=int(svc.degree),
            coef0=float(svc.coef0),
            C=C,
        )
        model.prob_a, model.prob_b = model._calibrate(X, y, weights * C)
        return model

    def _calibrate(
        self, X: scipy.sparse.csr_matrix, y: np.ndarray, weighted_C: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """libsvm's ``svm_binary_svc_probability`` for every pair of classes: the pair's
        decision values cross-validated on libsvm's folds, a sigmoid fitted on them
        (``held_out``: ``block_folds``, ``out_of_fold``, ``fit_sigmoid``)."""
        rng = np.random.RandomState(CALIBRATION_SEED)
        prob_a, prob_b = [], []
        for pair, (i, j) in enumerate(pairs(self.n_classes)):
            rows = np.concatenate([np.flatnonzero(y == i), np.flatnonzero(y == j)])
            labels = np.where(y[rows] == i, 1, -1)
            order = rng.permutation(len(rows))
            folds = held_out.block_folds(order, PROBABILITY_FOLDS)
            decisions = np.zeros(len(rows))
            predicted, index = held_out.out_of_fold(
                folds, self._pair_decisions(X[rows], labels, order, weighted_C[[i, j]]), 1)
            decisions[index] = predicted[:, 0]
            a, b = held_out.fit_sigmoid(decisions, labels)
            if a >= 0:
                # Cross-validated decisions that do not rise with the class (a few examples, each
                # held out from a fold where its class is the minority) would invert the
                # probabilities: fit the sigmoid on the model's own decisions instead.
                a, b = held_out.fit_sigmoid(self.decision_values(X[rows])[:, pair], labels)
            prob_a.append(a)
            prob_b.append(b)
        return np.array(prob_a), np.array(prob_b)

    def _pair_decisions(self, X: scipy.sparse.csr_matrix, labels: np.ndarray, order: np.ndarray,
                        weights: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """``predict(train, held)`` of ``out_of_fold`` for one pair (``labels`` +1 / -1): an SVM
        fitted on ``train`` in libsvm's order (``order``), its decision values [K, 1] of
        ``held``; a fold whose training side has one class gives that class's sign."""
        from sklearn.svm import SVC

        def predict(train: np.ndarray, held: np.ndarray) -> np.ndarray:
            fit_rows = order[train[order]]
            positives = int((labels[fit_rows] > 0).sum())
            negatives = len(fit_rows) - positives
            if not len(held) or not (positives and negatives):
                return np.full((len(held), 1), float(np.sign(positives - negatives)))
            svc = SVC(C=1.0, kernel=self.kernel, gamma=self.gamma, degree=self.degree,
                      coef0=self.coef0, class_weight={1: float(weights[0]), -1: float(weights[1])})
            svc.fit(X[fit_rows], labels[fit_rows])
            return svc.decision_function(X[held])[:, None]

        return predict

    # --- prediction ------------------------------------------------------------------------
    def kernel_matrix(self, X: scipy.sparse.csr_matrix | np.ndarray) -> np.ndarray:
        """``K[n, n_SV]`` between the rows of ``X`` and the support vectors."""
        sv = self.support_vectors
        dot = X @ sv.T
        dot = dot.toarray() if scipy.sparse.issparse(dot) else np.asarray(dot)
        dot = dot.astype(np.float64)
        if self.kernel == "linear":
            return dot
        if self.kernel == "rbf":
            x_norm = np.asarray(_squared_norms(X)).reshape(-1, 1)
            sv_norm = np.asarray(_squared_norms(sv)).reshape(1, -1)
            return np.exp(-self.gamma * np.maximum(x_norm + sv_norm - 2.0 * dot, 0.0))
        if self.kernel == "poly":
            return (self.gamma * dot + self.coef0) ** self.degree
        if self.kernel == "sigmoid":
            return np.tanh(self.gamma * dot + self.coef0)
        raise ValueError(f"unknown kernel '{self.kernel}'")

    def decision_values(self, X: scipy.sparse.csr_matrix | np.ndarray) -> np.ndarray:
        """One-vs-one decision values ``[n, n_pairs]`` (libsvm's ``svm_predict_values``)."""
        K = self.kernel_matrix(X)
        starts = np.concatenate([[0], np.cumsum(self.n_support)[:-1]])
        values = np.empty((K.shape[0], len(self.intercept)))
        for p, (i, j) in enumerate(pairs(self.n_classes)):
            si, sj = starts[i], starts[j]
            ci, cj = self.n_support[i], self.n_support[j]
            values[:, p] = (
                K[:, si : si + ci] @ self.dual_coef[j - 1, si : si + ci]
                + K[:, sj : sj + cj] @ self.dual_coef[i, sj : sj + cj]
                + self.intercept[p]
            )
        return values

    def predict_proba(self, X: scipy.sparse.csr_matrix | np.ndarray) -> np.ndarray:
        """Class probabilities ``[n, n_classes]`` (libsvm's ``svm_predict_probability``)."""
        return pairwise_probabilities(self.decision_values(X), self.prob_a, self.prob_b, self.n_classes)

    # --- persistence -----------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        sv = self.support_vectors.tocsr()
        return {
            "sv_data": sv.data.astype(np.float64),
            "sv_indices": sv.indices.astype(np.int64),
            "sv_indptr": sv.indptr.astype(np.int64),
            "sv_shape": np.array(sv.shape, dtype=np.int64),
            "n_support": self.n_support,
            "dual_coef": self.dual_coef,
            "intercept": self.intercept,
            "prob_a": self.prob_a,
            "prob_b": self.prob_b,
        }

    def params(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "gamma": self.gamma,
            "degree": self.degree,
            "coef0": self.coef0,
            "C": self.C,
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], params: dict[str, Any]) -> SVMModel:
        shape = tuple(int(s) for s in arrays["sv_shape"])
        sv = scipy.sparse.csr_matrix(
            (arrays["sv_data"], arrays["sv_indices"], arrays["sv_indptr"]), shape=shape
        )
        return cls(
            support_vectors=sv,
            n_support=arrays["n_support"],
            dual_coef=arrays["dual_coef"],
            intercept=arrays["intercept"],
            prob_a=arrays["prob_a"],
            prob_b=arrays["prob_b"],
            kernel=str(params["kernel"]),
            gamma=float(params["gamma"]),
            degree=int(params.get("degree", 3)),
            coef0=float(params.get("coef0", 0.0)),
            C=float(params.get("C", 1.0)),
        )


def svm_expected(n_classes: int) -> dict[str, Expected]:
    """The shapes and dtypes of a fitted SVM's arrays that the number of intents fixes."""
    pairs = n_classes * (n_classes - 1) // 2
    return {
        "sv_data": Expected(None, "float64"), "sv_indices": Expected(None, "int64"),
        "sv_indptr": Expected(None, "int64"), "sv_shape": Expected((2,), "int64"),
        "n_support": Expected((n_classes,), "int64"), "dual_coef": Expected(None, "float64"),
        "intercept": Expected((pairs,), "float64"), "prob_a": Expected((pairs,), "float64"),
        "prob_b": Expected((pairs,), "float64"),
    }


def check_support_vectors(path: Path, arrays: dict[str, np.ndarray], n_classes: int, width: int) -> None:
    """Refuse support vectors whose sparse layout does not hold together (scipy's native code
    would read out of bounds) or does not fit the intents and the feature width."""
    rows, columns = (int(v) for v in arrays["sv_shape"])
    data, indices, indptr = arrays["sv_data"], arrays["sv_indices"], arrays["sv_indptr"]
    problems = [
        (columns != width, f"'sv_shape' has {columns} columns, not the {width} features recorded"),
        (rows < 0 or int(arrays["n_support"].sum()) != rows or (arrays["n_support"] < 0).any(),
         "'n_support' does not add up to the support vectors of 'sv_shape'"),
        (data.ndim != 1 or indices.shape != data.shape, "'sv_data' and 'sv_indices' differ in length"),
        (indptr.shape != (rows + 1,) or (len(indptr) and (indptr[0] != 0 or indptr[-1] != len(data)))
         or bool((np.diff(indptr) < 0).any()), "'sv_indptr' is not a row index of 'sv_data'"),
        (bool(len(indices)) and (int(indices.min()) < 0 or int(indices.max()) >= columns),
         "'sv_indices' points outside the feature width"),
        (arrays["dual_coef"].shape != (max(n_classes - 1, 0), rows),
         f"'dual_coef' has shape {arrays['dual_coef'].shape}, not {(n_classes - 1, rows)}"),
    ]
    for failed, problem in problems:
        if failed:
            raise refusal(path, problem)


# --- helpers --------------------------------------------------------------------------------
def _dense(matrix: Any) -> np.ndarray:
    return np.asarray(matrix.toarray() if scipy.sparse.issparse(matrix) else matrix, dtype=np.float64)


def _squared_norms(X: scipy.sparse.csr_matrix | np.ndarray) -> np.ndarray:
    if scipy.sparse.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1)).ravel().astype(np.float64)
    return np.einsum("ij,ij->i", X, X).astype(np.float64)
