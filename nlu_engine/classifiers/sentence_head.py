"""A linear head on the sentence vectors, for intents learnt from a few examples each.

With 5 to 20 examples an intent, DIET's transformer learns its intents from scratch and trails a
multinomial logistic regression on the pre-trained sentence vectors the pipeline already computes
(the Universal Sentence Encoder's, a language model's, spaCy's): on NLU-Evaluation-Data's 10-shot
file 69 against 80 intent accuracy, and mixing DIET's probabilities in only lowered the head's
(BENCHMARKS.md, "Few examples an intent"). So on such data the intents are ranked by this head:

* **Input** ``[D]``: each dense sentence feature of the message scaled to unit length, side by
  side (so no encoder outweighs another by its scale).
* **Training**: scikit-learn's L-BFGS logistic regression, ``C`` 10, on one BLAS thread, in well
  under a second.
* **An estimator**: ``fit`` on arrays, ``predict_proba`` raw probabilities; it does not calibrate
  itself. A held-out tenth of 10 examples is one example, so its owner calibrates it by
  cross-fitting (``classifiers/held_out.py``: each example predicted by a head trained without
  it), while the head that parses trains on everything. An intent with a single example is
  never held out (it could not be predicted without it).
* **Parse**: one product ``[B, D] @ [D, N]`` in NumPy.

Everything learned is plain numbers (``sentence_head.npz``).
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.npz import Expected, load_npz
from nlu_engine.contract.threads import single_blas_thread

logger = logging.getLogger(__name__)

HEAD_FILE = "sentence_head.npz"
#: the head's input width D, recorded beside its weights (absent in archives made before)
HEAD_SHAPE_FILE = "sentence_head.json"
FLOATS = ("float16", "float32", "float64")
#: the inverse regularisation strength (scores on the 10-shot file: C 1 83.3, 10 84.1, 100 84.3)
C = 10.0


def sentence_vectors(messages: list[Message], origins: list[str] | None = None,
                     without: Collection[str] = ()) -> np.ndarray | None:
    """Each message's dense sentence features (of ``origins``, all when None, but those of
    ``without``), each scaled to unit length, side by side ``[B, D]``; None when a message has
    none."""
    rows = []
    for message in messages:
        parts = [np.asarray(f.matrix, np.float64).ravel() for f in message.features
                 if f.attribute == TEXT and f.kind == "sentence" and not f.is_sparse
                 and (not origins or f.origin in origins) and f.origin not in without]
        if not parts:
            return None
        rows.append(np.concatenate([p / max(float(np.linalg.norm(p)), 1e-12) for p in parts]))
    if not rows or len({len(r) for r in rows}) != 1:
        return None
    return np.stack(rows).astype(np.float32)


@dataclass
class SentenceHead:
    """``softmax(x @ weights + bias)`` over the intents. ``weights`` [D, N], ``bias`` [N]."""

    weights: np.ndarray
    bias: np.ndarray

    @classmethod
    def fit(cls, vectors: np.ndarray, labels: np.ndarray, n_labels: int,
            seed: int | None = 42) -> SentenceHead:
        """From vectors [M, D] and label indices [M] (each in ``range(n_labels)``); labels
        without an example get no probability."""
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        present = np.unique(labels)
        weights = np.zeros((vectors.shape[1], n_labels), np.float32)
        bias = np.full(n_labels, -1e4, np.float32)  # an intent never seen: no probability
        if len(present) == 1:
            bias[present[0]] = 0.0
            return cls(weights=weights, bias=bias)
        model = LogisticRegression(C=C, max_iter=2000, random_state=seed)
        with single_blas_thread(), warnings.catch_warnings():  # small products: one thread
            # on a handful of separable examples the optimum lies at infinity: L-BFGS stops at
            # max_iter with the ranking long settled
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(vectors.astype(np.float64), labels)
        coef, intercept = model.coef_, model.intercept_
        if len(present) == 2:  # scikit-learn's binary form: one row for the second class
            coef = np.vstack([-coef / 2, coef / 2])
            intercept = np.array([-intercept[0] / 2, intercept[0] / 2])
        weights[:, present] = coef.T
        bias[present] = intercept
        return cls(weights=weights, bias=bias)

    def predict_proba(self, vectors: np.ndarray) -> np.ndarray:
        """Intent probabilities [B, N] of vectors [B, D]."""
        z = vectors.astype(np.float32) @ self.weights + self.bias  # [B, N]
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z.astype(np.float64))
        return e / e.sum(axis=1, keepdims=True)

    def persist(self, directory: Path) -> None:
        np.savez(directory / HEAD_FILE, weights=self.weights, bias=self.bias)
        (directory / HEAD_SHAPE_FILE).write_text(json.dumps({"features": int(self.weights.shape[0])}))

    @classmethod
    def load(cls, directory: Path, labels: int | None = None) -> SentenceHead | None:
        """The stored head, or None when the folder has none (a model trained on more data, or
        from before the head existed). ``labels``: the intents it must rank (its columns)."""
        path = directory / HEAD_FILE
        if not path.is_file():
            return None
        arrays = load_npz(path, {"weights": Expected(dtype=FLOATS), "bias": Expected(dtype=FLOATS)})
        weights, bias = arrays["weights"].astype(np.float32), arrays["bias"].astype(np.float32)
        if weights.ndim != 2 or 0 in weights.shape or bias.shape != (weights.shape[1],):
            raise ValueError(f"{HEAD_FILE}: the weights [D, N] and bias [N] do not fit together")
        if not (np.isfinite(weights).all() and np.isfinite(bias).all()):
            raise ValueError(f"{HEAD_FILE}: the weights hold NaN or infinite values")
        features = _recorded_features(directory / HEAD_SHAPE_FILE)
        if (features is not None and weights.shape[0] != features) or (
                labels is not None and weights.shape[1] != labels):
            raise ValueError(f"{HEAD_FILE}: the weights are {list(weights.shape)}, not the "
                             f"[{features or 'D'}, {labels or 'N'}] of the features and intents")
        return cls(weights=weights, bias=bias)


def _recorded_features(path: Path) -> int | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    features = data.get("features") if isinstance(data, dict) else None
    if not isinstance(features, int) or isinstance(features, bool) or features < 1:
        raise ValueError(f"{HEAD_SHAPE_FILE}: 'features' is not a feature count")
    return features
