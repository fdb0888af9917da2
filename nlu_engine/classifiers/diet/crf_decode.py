"""The CRF's decoding, DIET's one decode of its tags: Viterbi and marginals in NumPy.

Parsing (``inference.py``) and training's monitors (``training.evaluate``: the tag F1 of the
progress bar and of the hold-out evaluations) both decode through ``CRFDecoder``, so a training
is judged by the code that parses. NumPy only: parsing never imports TensorFlow. The training
loss (the CRF's log-likelihood) stays in TensorFlow (``crf.py``), with the same constraints.

Notation: B batch, T positions (padded), K tags. ``logits[b, t, k]`` are the unary potentials,
``W[i, j]`` the score of tag j following tag i; no start / end transitions (as Rasa), but the
tagging scheme's constraints: a transition, first or last tag it forbids scores ``FORBIDDEN``.
Positions ``t >= lengths[b]`` are padding (a length 0 decodes its first position).

Both recursions run over time on the whole batch, and each step visits only the transitions
the constraints allow (``_Transitions``): under BILOU a tag after O, L-x or U-x is O, B-y or
U-y (a dense block of about a quarter of K x K), and I-x or L-x follow only B-x or I-x (two
each), so a step costs about K²/4 instead of K². A forbidden transition adds -1e4, which no
allowed path loses to (an allowed path always exists: all O), and exp(-1e4) is 0 in float64:
skipping them gives the same tags and marginals as the full products.

- Viterbi in float32 (its max / argmax are exact there), backpointers per step.
- Marginals by forward-backward in probability space, each step's vector rescaled to sum 1
  (no logsumexp): p(y_t = k) is alpha[t, k] beta[t, k] normalised over k, whatever the scales.
  Transition weights are exp(W - max W) and unaries exp(logits - max_k logits), once per call.
  Only logits spread over more than ~700 nats could underflow a step to all zeros; its
  confidences are then 0 rather than NaN. A small batch takes each of its steps as one full
  [K, K] product (a forbidden weight is 0: the same sums): for a few rows the calls cost more
  than the arithmetic.
- One message (the common parse) has its own path (``_OneSequence``): no batch axis, fewer
  calls a step, and the dense block's max visits only the rows that can reach it (one of 79
  for a trained SNIPS model).
"""

from __future__ import annotations

import numpy as np

#: score of a transition / first / last tag the tagging scheme forbids (as ``crf.py``'s)
FORBIDDEN = -1e4
#: a next tag with at most this many allowed previous tags is gathered, not in the dense block
_FEW = 8
#: batches up to this many rows take each forward-backward step as one full [K, K] product
#: (a forbidden weight is 0, so the same sums): for one message one BLAS call costs less than
#: the block's and the gather's several
_FULL_PRODUCT_ROWS = 8
#: batches up to this many rows decode one message at a time (``_OneSequence``): on a trained
#: model's logits that costs less than the batched steps up to at least 16 rows, on random
#: logits (no pruning) about the same at 2 rows and more at 8
_ONE_BY_ONE_ROWS = 4


def _index(positions: np.ndarray) -> np.ndarray | slice:
    """``positions`` as a slice when they are a contiguous run (a view, no gather)."""
    if len(positions) and (np.diff(positions) == 1).all():
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions


class _Transitions:
    """The allowed transitions [K_from, K_to] arranged for one step's products over the
    previous tag: the to-tags with many allowed from-tags (``dense``) read a block
    ``weights[rows][:, dense]``; each of the others (``few``) gathers its own from-tags
    ``sources`` [F, S] (padded; a pad's weight is ``pad``; F first, so that the reduction over
    it is elementwise). ``dense`` and ``rows`` are slices when the tags are so ordered
    (``_order``)."""

    def __init__(self, allowed: np.ndarray, weights: np.ndarray, pad: float) -> None:
        counts = allowed.sum(0)  # [K_to]
        few = counts <= _FEW
        dense = np.flatnonzero(~few)  # [D]
        rows = np.flatnonzero(allowed[:, dense].any(1))  # [P]
        self.block = np.ascontiguousarray(weights[np.ix_(rows, dense)])  # [P, D]
        self.dense, self.rows = _index(dense), _index(rows)
        self.few = np.flatnonzero(few)  # [S]
        width = max(1, int(counts[few].max(initial=0)))
        self.sources = np.zeros((width, len(self.few)), np.intp)  # [F, S]
        self.gathered = np.full((width, len(self.few)), pad, weights.dtype)  # [F, S]
        for s, tag in enumerate(self.few):
            sources = np.flatnonzero(allowed[:, tag])
            self.sources[:len(sources), s] = sources
            self.gathered[:len(sources), s] = weights[sources, tag]
        self.any_dense, self.any_few = len(dense) > 0, len(self.few) > 0
        self.full = np.where(allowed, weights, pad).astype(weights.dtype)  # [K_from, K_to]

    def max_product(self, scores: np.ndarray) -> np.ndarray:
        """out[b, j] = max_i(scores[b, i] + W[i, j]) over the allowed i: [B, K]."""
        out = np.empty_like(scores)
        if self.any_dense:
            out[:, self.dense] = (scores[:, self.rows, None] + self.block).max(1)
        if self.any_few:
            out[:, self.few] = (scores[:, self.sources] + self.gathered).max(1)
        return out

    def sum_product(self, weights: np.ndarray) -> np.ndarray:
        """out[b, j] = sum_i(weights[b, i] E[i, j]) over the allowed i (E: the exp weights; a
        forbidden one is 0, so the full product of a small batch is the same sum)."""
        if len(weights) <= _FULL_PRODUCT_ROWS:
            return weights @ self.full
        out = np.empty_like(weights)
        if self.any_dense:
            out[:, self.dense] = weights[:, self.rows] @ self.block
        if self.any_few:
            out[:, self.few] = (weights[:, self.sources] * self.gathered).sum(1)
        return out


class _OneSequence:
    """One sequence's decode (a parse of one message) without the batch axis: for one short
    message each NumPy call costs more than its arithmetic, so few calls a step, each writing
    into buffers allocated once per call (``out=``). Viterbi: the batched float32 sums (the same
    tags), the max over the previous tag over the allowed transitions only (``_Transitions``'s
    dense block, pruned to the rows that can reach a max, and gathered sources, which
    ``_order`` makes slices), the way back one row of W a step. Marginals: forward-backward
    without the per-step rescaling, checked to stay within float64's range. ``usable``: the
    allowed transitions are so arranged (any BILOU tag set)."""

    def __init__(self, forward_max: _Transitions, to_from: np.ndarray, exp_w: np.ndarray) -> None:
        self.max = forward_max
        self.to_from = to_from  # [K_to, K_from] float32
        self.exp_w = exp_w  # [K, K] float64
        self.few = _index(forward_max.few) if forward_max.any_few else slice(0, 0)
        self.usable = isinstance(self.few, slice) and (
            isinstance(forward_max.dense, slice) or not forward_max.any_dense)
        block = forward_max.block  # [P, D]
        self.high, self.low = block.max(1, initial=-np.inf), block.min(1, initial=np.inf)  # [P]

    def viterbi(self, unary: np.ndarray) -> np.ndarray:
        """The best path [n] of unary [n, K] float32: max-scores forward, then the way back."""
        n, k = unary.shape
        m = self.max
        deltas = np.empty_like(unary, order="C")  # [n, K]
        deltas[0] = unary[0]
        block = np.empty(m.block.shape, np.float32)  # [P, D]
        gathered = np.empty(m.gathered.shape, np.float32)  # [F, S]
        for t in range(1, n):
            previous, delta = deltas[t - 1], deltas[t]
            if m.any_dense:
                self.max_dense(previous[m.rows], delta[m.dense], block)
            if m.any_few:
                np.take(previous, m.sources, out=gathered)
                gathered += m.gathered
                _max_rows(gathered, delta[self.few])
            delta += unary[t]
        tags = np.empty(n, np.intp)
        tag = tags[-1] = int(deltas[-1].argmax())
        scores = np.empty(k, np.float32)
        for t in range(n - 1, 0, -1):
            tag = tags[t - 1] = int(np.add(deltas[t - 1], self.to_from[tag], out=scores).argmax())
        return tags

    def max_dense(self, previous: np.ndarray, out: np.ndarray, block: np.ndarray) -> None:
        """out[j] = max_i(previous[i] + block[i, j]) [D] over the dense block's from-tags
        (previous [P]), visiting only the rows that can reach a max: row i cannot where
        previous[i] + max_j block[i, j] is below max_l(previous[l] + min_j block[l, j]), a
        score every column reaches (rounding is monotone: the same float32 maxima). A trained
        model's tags are peaked and its transitions small: about one row of 79 is left."""
        bound = previous + self.low
        best = int(bound.argmax())
        threshold = bound[best]  # a score every column reaches
        reach = np.add(previous, self.high, out=bound) >= threshold
        if np.count_nonzero(reach) == 1:  # the row ``best`` alone
            np.add(self.max.block[best], previous[best], out=out)
        else:
            np.max(np.add(previous[:, None], self.max.block, out=block), 0, out=out)

    def forward_backward(self, emit: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """alpha, beta [n, K] (alpha[t] = (alpha[t - 1] E) * emit[t], beta[t] = E (beta[t + 1] *
        emit[t + 1])) unscaled: a step's weights are at most 1, so a short sequence stays far
        from float64's limits; None if some row left [1e-150, 1e150] (the caller then takes
        the rescaled batched recursions), which also bounds what an underflowed entry loses."""
        n = len(emit)
        alpha, beta = np.empty(emit.shape), np.empty(emit.shape)
        alpha[0], beta[-1] = emit[0], 1.0
        after = np.empty(emit.shape[1])
        for t in range(1, n):
            np.multiply(np.dot(alpha[t - 1], self.exp_w, out=alpha[t]), emit[t], out=alpha[t])
            np.dot(self.exp_w, np.multiply(beta[n - t], emit[n - t], out=after), out=beta[n - t - 1])
        peaks = np.concatenate([alpha.max(1), beta.max(1)])
        return (alpha, beta) if ((peaks >= 1e-150) & (peaks <= 1e150)).all() else None


def _max_rows(rows: np.ndarray, out: np.ndarray) -> None:
    """out = rows.max(0) for a few rows [F, S], pairwise (cheaper than a reduction)."""
    if len(rows) == 1:
        np.copyto(out, rows[0])
        return
    np.maximum(rows[0], rows[1], out=out)
    for row in rows[2:]:
        np.maximum(out, row, out=out)

def _order(allowed: np.ndarray) -> np.ndarray:
    """An order of the tags in which the dense to-tags and their from-tags are each one run
    (``_Transitions``): under BILOU B-*, then O and U-*, then L-*, then I-*."""
    dense = allowed.sum(0) > _FEW
    rows = allowed[:, dense].any(1)
    groups = (dense & ~rows, dense & rows, rows & ~dense, ~rows & ~dense)
    return np.concatenate([np.flatnonzero(group) for group in groups])


class CRFDecoder:
    """A tag set's transitions with the tagging scheme's constraints folded in, arranged once
    (at load, or per evaluation while training); ``decode`` decodes a batch.

    ``transitions`` [K, K]; ``constraints``: (allowed [K, K], may start [K], may end [K]) as
    ``bilou_constraints`` gives them, or None (every transition allowed). Inside, the tags are
    in ``_order``; ``decode`` takes and gives them in the vocabulary's."""

    def __init__(self, transitions: np.ndarray, constraints: tuple | None) -> None:
        k = transitions.shape[0]
        allowed, start, end = np.ones((k, k), bool), np.zeros(k), np.zeros(k)
        if constraints:
            allowed = np.asarray(constraints[0], bool)
            start, end = (np.where(ok, 0.0, FORBIDDEN) for ok in constraints[1:])  # [K] each
        self.order = _order(allowed)  # [K]: the inside order's tags in the vocabulary's
        inside = np.ix_(self.order, self.order)
        allowed, self.start, self.end = allowed[inside], start[self.order], end[self.order]
        penalised = (np.asarray(transitions, np.float32)[inside]
                     + np.where(allowed, 0.0, FORBIDDEN).astype(np.float32))  # [K, K]
        self._to_from = np.ascontiguousarray(penalised.T)  # [K_to, K_from] for the way back
        w64 = penalised.astype(np.float64)
        exp_w = np.exp(w64 - w64.max())  # [K, K]; forbidden ones are exact zeros
        self._forward_max = _Transitions(allowed, penalised, -np.inf)
        self._forward_sum = _Transitions(allowed, exp_w, 0.0)
        self._backward_sum = _Transitions(allowed.T, np.ascontiguousarray(exp_w.T), 0.0)
        self._one = _OneSequence(self._forward_max, self._to_from, exp_w)

    def decode(self, logits: np.ndarray, lengths: np.ndarray,
               marginals: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """logits [B, T, K] (any float dtype), lengths [B] -> Viterbi tags [B, T] int32 and each
        tag's marginal probability [B, T] float32; both 0 at padding. Without ``marginals``
        (training's monitors score the tags only) the probabilities are not computed: all 0."""
        size, max_len, _ = logits.shape
        if marginals and size <= _ONE_BY_ONE_ROWS and self._one.usable:  # the parse of one message
            rows = [self._decode_one(logits[b], min(max(int(n), 1), max_len)) for b, n in enumerate(lengths)]
            return np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows])
        lengths = np.clip(np.asarray(lengths, np.intp), 1, max(max_len, 1))
        unary = logits[:, :, self.order].astype(np.float64)  # [B, T, K]
        unary[:, 0] += self.start  # the constraints on the first and last tags
        unary[np.arange(size), lengths - 1] += self.end
        ragged = bool((lengths < max_len).any())
        tags = self._viterbi(unary.astype(np.float32), lengths, ragged)  # [B, T], inside order
        if marginals:
            probabilities = self._marginals(unary, lengths, ragged)  # [B, T, K]
            confidences = np.take_along_axis(probabilities, tags[..., None], 2)[..., 0].astype(np.float32)
        else:
            confidences = np.zeros(tags.shape, np.float32)
        tags = self.order[tags].astype(np.int32)
        if ragged:
            padding = np.arange(max_len)[None, :] >= lengths[:, None]
            tags[padding], confidences[padding] = 0, 0.0
        return tags, confidences

    def _decode_one(self, logits: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``decode`` of one sequence, logits [T, K] of which n >= 1 positions are real, through
        ``_OneSequence``; its marginals by the batched recursions if its unscaled ones would
        leave float64's range."""
        max_len = len(logits)
        unary = logits[:n, self.order].astype(np.float64)  # [n, K]
        unary[0] += self.start
        unary[-1] += self.end
        path = self._one.viterbi(unary.astype(np.float32))  # [n]
        emit = np.exp(unary - unary.max(1, keepdims=True))  # [n, K]
        unscaled = self._one.forward_backward(emit)
        if unscaled is None:
            confidences = self._marginals(unary[None], np.array([n]), False)[0, np.arange(n), path]
        else:  # sum_k alpha[t, k] beta[t, k] is Z at every t, >= 1e-150
            joint = unscaled[0] * unscaled[1]
            confidences = joint[np.arange(n), path] / joint.sum(1)
        tags, out = np.zeros((1, max_len), np.int32), np.zeros((1, max_len), np.float32)
        tags[0, :n], out[0, :n] = self.order[path], confidences
        return tags, out

    def _viterbi(self, unary: np.ndarray, lengths: np.ndarray, ragged: bool) -> np.ndarray:
        """Best paths [B, T] (inside order). The forward pass keeps the max-scores delta[t]
        (past a sequence's end carried over); the way back recomputes the one argmax it needs,
        y_{t-1} = argmax_i(delta[t-1, i] + W[i, y_t]), from the same float32 sums."""
        size, max_len, _ = unary.shape
        deltas = np.empty_like(unary)  # [B, T, K]
        deltas[:, 0] = unary[:, 0]
        for t in range(1, max_len):
            step = self._forward_max.max_product(deltas[:, t - 1]) + unary[:, t]
            deltas[:, t] = np.where((t < lengths)[:, None], step, deltas[:, t - 1]) if ragged else step
        tags = np.empty((size, max_len), np.intp)
        tags[:, -1] = deltas[:, -1].argmax(1)
        for t in range(max_len - 1, 0, -1):
            back = (deltas[:, t - 1] + self._to_from[tags[:, t]]).argmax(1)  # [B]
            tags[:, t - 1] = np.where(t < lengths, back, tags[:, t]) if ragged else back
        return tags

    def _marginals(self, unary: np.ndarray, lengths: np.ndarray, ragged: bool) -> np.ndarray:
        """p(y_t = k | x) [B, T, K] by forward-backward with each step rescaled."""
        max_len = unary.shape[1]
        emit = np.exp(unary - unary.max(2, keepdims=True))  # [B, T, K]
        alpha = np.empty_like(emit)
        beta = np.empty_like(emit)
        alpha[:, 0] = emit[:, 0] / emit[:, 0].sum(1, keepdims=True)
        for t in range(1, max_len):
            step = self._forward_sum.sum_product(alpha[:, t - 1])
            step *= emit[:, t]
            step /= step.sum(1, keepdims=True)
            alpha[:, t] = np.where((t < lengths)[:, None], step, alpha[:, t - 1]) if ragged else step
        beta[:, -1] = 1.0
        for t in range(max_len - 2, -1, -1):
            step = self._backward_sum.sum_product(beta[:, t + 1] * emit[:, t + 1])
            step /= step.sum(1, keepdims=True)
            beta[:, t] = np.where((t + 1 < lengths)[:, None], step, 1.0) if ragged else step
        joint = alpha * beta
        with np.errstate(invalid="ignore", divide="ignore"):  # an underflowed step: 0, not NaN
            return np.nan_to_num(joint / joint.sum(2, keepdims=True), nan=0.0)


def decode_tag_sets(
    logits: dict[str, np.ndarray], tables: dict[str, np.ndarray], lengths: np.ndarray,
    decoders: dict[str, CRFDecoder], marginals: bool = True,
) -> dict[str, np.ndarray]:
    """DIET's tags: per tag set (entity first) "tags_<set>" and "conf_<set>" [B, T].

    ``logits`` "logits_<set>" [B, T, K]; a role's or group's lack the decoded entity tags'
    term, which ``tables`` [K_entity, K] gives per entity tag (``onnx_graph.tag_tables``).
    Without ``marginals`` the confidences are all 0 (``CRFDecoder.decode``)."""
    out: dict[str, np.ndarray] = {}
    entity_tags: np.ndarray | None = None
    for kind, decoder in decoders.items():
        scores = logits[f"logits_{kind}"]  # [B, T, K]
        if kind in tables and entity_tags is not None:
            scores = scores + tables[kind][entity_tags]  # the entity tags' term
        tags, confidences = decoder.decode(scores, lengths, marginals)
        if kind == "entity":
            entity_tags = tags
        out[f"tags_{kind}"], out[f"conf_{kind}"] = tags, confidences
    return out
