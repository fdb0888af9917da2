"""A linear head on the sparse n-gram counts, one member of the intent combination.

Where no pre-trained sentence encoder knows the bot's language (Danish, Kazakh, Serbian for the
default's Universal Sentence Encoder), words and character n-grams are what the intents are
learnt from, and with 20 examples an intent a logistic regression on them outranks the encoder's
head by 8 to 12 points on xSID (BENCHMARKS.md, "Intents combined"). The head:

* **Input** ``[V]``: every sparse sentence feature of the message side by side (the
  CountVectorsFeaturizers' counts), ``log(1 + count)`` times the column's inverse document
  frequency in the training examples, scaled to unit length (TF-IDF, sublinear).
* **Training**: scikit-learn's SAGA logistic regression, ``C`` chosen from ``CS`` by the
  likelihood of the cross-fitted predictions (the combiner's folds), on one BLAS thread.
* **Parse**: one sparse product ``[B, V] @ [V, N]``.
* **Coverage**: the share of a message's tokens the n-gram vocabularies know
  (``token_coverage``). A message in another language than the training data's shares few of its
  words with them, and the head's ranking of it says little; the combiner weighs the head's log
  probabilities by it, at parse and on the held-out predictions its weights are fitted on
  (``held_out_coverage``: each example's tokens against the vocabulary of the other folds).

Everything learned is plain numbers (``sparse_head.npz``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse

from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.npz import Expected, load_npz
from nlu_engine.contract.threads import single_blas_thread

HEAD_FILE = "sparse_head.npz"
#: the inverse regularisation strengths tried, the likeliest on held-out predictions kept
CS = (10.0, 100.0)


def sparse_rows(messages: list[Message], width: int | None = None) -> scipy.sparse.csr_matrix | None:
    """The messages' sparse sentence features side by side ``[B, V]``; None when a message has
    none (or, with ``width``, when their width is not that one)."""
    rows = []
    for message in messages:
        row = message.features_for(TEXT, "sentence", sparse=True)
        if row is None:
            return None
        rows.append(scipy.sparse.csr_matrix(row))
    if not rows or len({r.shape[1] for r in rows}) != 1 or (width is not None and rows[0].shape[1] != width):
        return None
    return scipy.sparse.vstack(rows, format="csr").astype(np.float64)


def _token_rows(message: Message) -> list[scipy.sparse.csr_matrix]:
    """The message's sparse sequence features, one [T, V] matrix a featurizer."""
    return [scipy.sparse.csr_matrix(f.matrix) for f in message.features
            if f.attribute == TEXT and f.kind == "sequence" and f.is_sparse]


def token_coverage(messages: list[Message]) -> np.ndarray:
    """[B] the share of each message's tokens with a non-empty row in every sparse sequence
    feature: the words the n-gram vocabularies know (0 for a message without tokens; 1 where
    there are no token features to measure it by)."""
    out = np.zeros(len(messages))
    for i, message in enumerate(messages):
        matrices = _token_rows(message)
        if not matrices:
            out[i] = 1.0
        elif matrices[0].shape[0]:
            known = np.logical_and.reduce([np.diff(m.indptr) > 0 for m in matrices])
            out[i] = float(known.mean())
    return out


def held_out_coverage(messages: list[Message], assignment: np.ndarray) -> np.ndarray:
    """[M] ``token_coverage`` of each example against the columns the examples outside its fold
    of ``assignment`` [M] use: what a new message of the training data's kind has at parse.
    Examples never held out (fold -1) are measured against every other example."""
    per_message = [_token_rows(m) for m in messages]
    origins = min((len(m) for m in per_message), default=0)
    if origins == 0 or any(len(m) != origins for m in per_message):
        return token_coverage(messages)
    folds = int(assignment.max(initial=-1)) + 1
    known = [np.ones(m[0].shape[0], bool) for m in per_message]
    for o in range(origins):
        # [M, V] which columns each example uses (sparse: V is the n-gram vocabulary)
        uses = scipy.sparse.vstack([_used(matrices[o]) for matrices in per_message], format="csr")
        total = np.asarray(uses.sum(axis=0)).ravel()
        outside = [total - np.asarray(uses[assignment == k].sum(axis=0)).ravel() for k in range(folds)]
        for i, matrices in enumerate(per_message):
            m, k = matrices[o], int(assignment[i])
            if k < 0:
                elsewhere = total.copy()
                elsewhere[uses[i].indices] -= 1
            else:
                elsewhere = outside[k]
            rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
            hit = np.zeros(m.shape[0], bool)
            hit[rows[elsewhere[m.indices] > 0]] = True
            known[i] &= hit
    return np.array([float(k.mean()) if len(k) else 0.0 for k in known])


def _used(matrix: scipy.sparse.csr_matrix) -> scipy.sparse.csr_matrix:
    """[1, V] a one where any row of ``matrix`` [T, V] has an entry."""
    columns = np.unique(matrix.indices)
    return scipy.sparse.csr_matrix((np.ones(len(columns)), columns, [0, len(columns)]),
                                   shape=(1, matrix.shape[1]))


def tempered(probabilities: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``softmax(weight * log p)`` [B, N] of probabilities [B, N], a weight [B] a row: in a
    weighted geometric mean, the same as weighing the member's log probabilities by it."""
    z = weight[:, None] * np.log(np.maximum(probabilities, 1e-12))
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@dataclass
class SparseHead:
    """``softmax(tfidf(x) @ weights + bias)``: ``idf`` [V], ``weights`` [V, N], ``bias`` [N]."""

    idf: np.ndarray
    weights: np.ndarray
    bias: np.ndarray

    @staticmethod
    def fit_idf(counts: scipy.sparse.csr_matrix) -> np.ndarray:
        """The smoothed inverse document frequency [V] of each column of ``counts`` [M, V]."""
        df = np.asarray((counts > 0).sum(axis=0)).ravel()
        return (np.log((1.0 + counts.shape[0]) / (1.0 + df)) + 1.0).astype(np.float32)

    @classmethod
    def fit(cls, counts: scipy.sparse.csr_matrix, labels: np.ndarray, n_labels: int, c: float,
            idf: np.ndarray | None = None, seed: int | None = 42) -> SparseHead:
        """From counts [M, V] and label indices [M]; labels without an example get nothing."""
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        idf = cls.fit_idf(counts) if idf is None else idf
        weights = np.zeros((counts.shape[1], n_labels), np.float32)
        bias = np.full(n_labels, -1e4, np.float32)
        present = np.unique(labels)
        if len(present) == 1:
            bias[present[0]] = 0.0
            return cls(idf=idf, weights=weights, bias=bias)
        model = LogisticRegression(C=c, solver="saga", max_iter=300, tol=1e-3, random_state=seed)
        with single_blas_thread(), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(_tfidf(counts, idf), labels)
        coef, intercept = model.coef_, model.intercept_
        if len(present) == 2:
            coef = np.vstack([-coef / 2, coef / 2])
            intercept = np.array([-intercept[0] / 2, intercept[0] / 2])
        weights[:, present] = coef.T
        bias[present] = intercept
        return cls(idf=idf, weights=weights, bias=bias)

    def predict_proba(self, counts: scipy.sparse.csr_matrix) -> np.ndarray:
        """Intent probabilities [B, N] of counts [B, V]."""
        z = np.asarray(_tfidf(counts, self.idf) @ self.weights, np.float64) + self.bias  # [B, N]
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def persist(self, directory: Path) -> None:
        np.savez(directory / HEAD_FILE, idf=self.idf, weights=self.weights, bias=self.bias)

    @classmethod
    def load(cls, directory: Path, labels: int) -> SparseHead:
        floats = ("float16", "float32", "float64")
        arrays = load_npz(directory / HEAD_FILE, {"idf": Expected(dtype=floats),
                                                  "weights": Expected(dtype=floats),
                                                  "bias": Expected(dtype=floats)})
        idf, weights = arrays["idf"].astype(np.float32), arrays["weights"].astype(np.float32)
        bias = arrays["bias"].astype(np.float32)
        if weights.shape != (len(idf), labels) or bias.shape != (labels,):
            raise ValueError(f"{HEAD_FILE}: idf {list(idf.shape)}, weights {list(weights.shape)} and "
                             f"bias {list(bias.shape)} do not fit {labels} intents")
        return cls(idf=idf, weights=weights, bias=bias)


def _tfidf(counts: scipy.sparse.csr_matrix, idf: np.ndarray) -> scipy.sparse.csr_matrix:
    """Sublinear term frequency times ``idf``, each row scaled to unit length (on the csr arrays
    directly: a parse of one message makes no intermediate matrices)."""
    x = scipy.sparse.csr_matrix(counts, dtype=np.float64, copy=True)
    x.sum_duplicates()
    x.data = np.log1p(np.maximum(x.data, 0.0)) * idf[x.indices]
    rows = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
    norms = np.sqrt(np.bincount(rows, weights=x.data * x.data, minlength=x.shape[0]))
    x.data /= np.maximum(norms, 1e-12)[rows]
    return x
