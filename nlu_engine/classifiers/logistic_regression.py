"""LogisticRegressionClassifier: scikit-learn logistic regression on sentence features."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.sparse

from nlu_engine.classifiers import calibration
from nlu_engine.classifiers.calibrated import CalibratedIntentClassifier
from nlu_engine.contract.component import FEATURES, param
from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.npz import Expected, load_npz, refusal
from nlu_engine.contract.training_data import TrainingData


def sentence_matrix(messages: list[Message], width: int | None = None) -> scipy.sparse.csr_matrix:
    """Sparse and dense sentence features of each message side by side, one row each."""
    rows = []
    for message in messages:
        parts = []
        sparse = message.features_for(TEXT, "sentence", sparse=True)
        dense = message.features_for(TEXT, "sentence", sparse=False)
        if sparse is not None:
            parts.append(sparse)
        if dense is not None:
            parts.append(scipy.sparse.csr_matrix(dense))
        row = scipy.sparse.hstack(parts, format="csr") if parts else scipy.sparse.csr_matrix((1, 0))
        rows.append(row)
    width = width if width is not None else max((r.shape[1] for r in rows), default=0)
    fixed = []
    for row in rows:
        if row.shape[1] != width:  # a message without features: an all-zero row
            row = scipy.sparse.csr_matrix((1, width), dtype=np.float32)
        fixed.append(row)
    return scipy.sparse.vstack(fixed, format="csr").astype(np.float32)


class LogisticRegressionClassifier(CalibratedIntentClassifier):
    """Multinomial logistic regression (class_weight='balanced'), Rasa's defaults."""

    requires = (FEATURES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(CalibratedIntentClassifier.Config):
        max_iter: int = param(100, low=1)
        solver: Literal["lbfgs", "liblinear", "newton-cg", "newton-cholesky", "sag", "saga"] = "lbfgs"
        tol: float = param(1e-4, low=0)
        random_state: int = 42
        ranking_length: int = param(10, low=0)

    config: Config

    def train(self, data: TrainingData) -> None:
        """Fit on a share of the examples and calibrate on the rest, then fit on all of them
        (``CalibratedIntentClassifier.fit_calibrated``)."""
        examples = data.intent_examples
        self.classes_ = sorted({m.intent for m in examples if m.intent})
        self.fit_calibrated(examples, self.classes_, self.config.random_state)

    def fit_examples(self, examples: list[Message]) -> None:
        self._fit(examples)

    def calibration_predict(self, messages: list[Message]) -> tuple[np.ndarray, None]:
        return self._probabilities(sentence_matrix(messages, self.width_)), None

    def _fit(self, examples: list[Message]) -> None:
        from sklearn.linear_model import LogisticRegression

        X = sentence_matrix(examples)
        self.width_ = X.shape[1]
        if len(self.classes_) < 2:
            self.coef_ = np.zeros((1, self.width_), np.float32)
            self.intercept_ = np.zeros(1, np.float32)
            return
        y = [m.intent for m in examples]
        model = LogisticRegression(
            max_iter=self.config.max_iter,
            solver=self.config.solver,
            tol=self.config.tol,
            random_state=self.config.random_state,
            class_weight="balanced",
        )
        # sklearn's loss runs in OpenMP threads; on NLU-sized data the threads only add overhead,
        # and on a busy machine their spin-waiting costs many times the fit's own CPU time.
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1 if X.nnz < 5_000_000 else None):
            model.fit(X, y)
        self.coef_ = model.coef_.astype(np.float32)
        self.intercept_ = model.intercept_.astype(np.float32)

    def _probabilities(self, X: scipy.sparse.csr_matrix) -> np.ndarray:
        scores = np.asarray(X @ self.coef_.T) + self.intercept_
        if len(self.classes_) == 2 and self.coef_.shape[0] == 1:
            p = 1.0 / (1.0 + np.exp(-scores[:, 0]))
            return np.stack([1 - p, p], axis=1)
        if len(self.classes_) < 2:
            return np.ones((X.shape[0], len(self.classes_)))
        scores = scores - scores.max(axis=1, keepdims=True)
        e = np.exp(scores)
        return e / e.sum(axis=1, keepdims=True)

    def process(self, messages: list[Message]) -> None:
        if not messages or not self.classes_:
            return
        self.rank(messages, self.classes_, self._probabilities(sentence_matrix(messages, self.width_)),
                  self.config.ranking_length)

    def persist(self, directory: Path) -> None:
        np.savez(directory / "weights.npz", coef=self.coef_, intercept=self.intercept_)
        (directory / "classes.json").write_text(json.dumps(self.classes_))
        (directory / SHAPES_FILE).write_text(json.dumps({"width": self.width_}))
        self.calibration_.persist(directory)

    @classmethod
    def load(
        cls, directory: Path, config: LogisticRegressionClassifier.Config
    ) -> LogisticRegressionClassifier:
        component = cls(config)
        classes = json.loads((directory / "classes.json").read_text())
        if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
            raise refusal(directory / "classes.json", "is not a list of intent names")
        component.classes_ = classes
        rows = len(classes) if len(classes) > 2 else 1  # one row for two classes (and fewer)
        width = _recorded_width(directory)  # None in archives made before it was recorded
        shape = (rows, width) if width is not None else None
        path = directory / "weights.npz"
        weights = load_npz(path, {"coef": Expected(shape, "float32"),
                                  "intercept": Expected((rows,), "float32")})
        component.coef_, component.intercept_ = weights["coef"], weights["intercept"]
        if component.coef_.ndim != 2 or component.coef_.shape[0] != rows:
            raise refusal(path, f"array 'coef' has shape {component.coef_.shape}, not {rows} row(s), "
                                f"one per intent of classes.json")
        component.width_ = component.coef_.shape[1]
        component.calibration_ = calibration.Calibration.load(directory)
        return component


SHAPES_FILE = "shapes.json"


def _recorded_width(directory: Path) -> int | None:
    """The feature width the weights were trained on, as ``persist`` recorded it."""
    path = directory / SHAPES_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    width = data.get("width") if isinstance(data, dict) else None
    if not isinstance(width, int) or isinstance(width, bool) or width < 0:
        raise refusal(path, "'width' is not a feature count")
    return width
