"""The CRF's decoding, DIET's one decode of its tags: Viterbi and marginals in NumPy.

Parsing (``inference.py``) and training's monitors (``training.evaluate``: the tag F1 of the
progress bar and of the hold-out evaluations) both decode through ``CRFDecoder``, so a training
is judged by the code that parses. NumPy only: parsing never imports TensorFlow. The training
loss (the CRF's log-likelihood) stays in TensorFlow (``crf.py``), with the same constraints.

Notation: B batch, T positions (padded), K tags. ``logits[b, t, k]`` are the unary potentials,
``W[i, j]`` the score of tag j following tag i; no start / end transitions (as Rasa), but the
tagging scheme's constraints: a transition, first or last tag it forbids scores ``FORBIDDEN``.
Positions ``t >= lengths[b]`` are padding (a length 0 decodes its first position).

One Viterbi and one forward-backward, each a recursion over time on the whole batch, time
major ([n, B, K], n the longest length). One message, the common parse, is a batch of one: for
a short message each NumPy call costs more than its arithmetic, so a step is a few calls on
index arrays, slices and buffers arranged once (``_Transitions``, per decoder) or once per
decode. Padding costs the Viterbi no call: a sequence runs on past its end on neutral unaries
(one tag, the others forbidden) and only its own positions are read back; the backward
recursion of a ragged batch resets beta to 1 at each sequence's end. A forbidden transition
adds -1e4, which no allowed path loses to (an allowed path always exists: all O), and
exp(-1e4) is 0 in float64: leaving them out gives the same tags and marginals as the full
products.

- Viterbi in float32 (its max / argmax are exact there), with no backpointers: the way back
  recomputes the one argmax it needs, y_{t-1} = argmax_i(delta[t-1, i] + W[i, y_t]). A step
  visits only the transitions the constraints allow: under BILOU a tag after O, L-x or U-x is
  O, B-y or U-y (a dense block of about a quarter of K x K), and I-x or L-x follow only B-x or
  I-x (two each, gathered). Of the block it visits only the rows that can reach a max, which
  gives the same float32 maxima (``_Transitions._max_dense``): a trained model's peaked tags
  mostly leave one row of SNIPS's 79.
- Marginals by forward-backward in probability space: p(y_t = k) is alpha[t, k] beta[t, k]
  normalised over k, whatever the scales. Transition weights are exp(W - max W) and unaries
  exp(logits - max_k logits), so a step's weights are at most 1. A step is one [B, K] x [K, K]
  product per direction (a forbidden weight is 0: the same sums): the dense block and the
  gather instead cost more below 16 rows and at 256, and save a sixth at 32 to 64. The
  recursions run unscaled, and the sequences whose alpha or beta left [1e-150, 1e150] (long
  messages, logits spread over hundreds of nats; a short message is far from float64's
  limits) run again with each step rescaled to sum 1. Only logits spread over more than ~700
  nats could underflow a rescaled step to all zeros; its confidences are then 0 rather than
  NaN.
"""

from __future__ import annotations

import itertools

import numpy as np

#: score of a transition / first / last tag the tagging scheme forbids (as ``crf.py``'s)
FORBIDDEN = -1e4
#: a next tag with at most this many allowed previous tags is gathered, not in the dense block
_FEW = 8
#: an unscaled forward-backward row whose peaks leave this range is run again rescaled
_RANGE = (1e-150, 1e150)
#: the smallest normal float64: a marginal's denominator is at least this
_TINY = np.finfo(np.float64).tiny


def _order(allowed: np.ndarray) -> np.ndarray:
    """An order of the tags in which the dense to-tags come first, their from-tags are one run,
    and the other to-tags come last (``_Transitions``): under BILOU B-*, then O and U-*, then
    L-*, then I-*."""
    dense = allowed.sum(0) > _FEW
    rows = allowed[:, dense].any(1)
    groups = (dense & ~rows, dense & rows, rows & ~dense, ~rows & ~dense)
    return np.concatenate([np.flatnonzero(group) for group in groups])


class _Transitions:
    """The allowed transitions [K_from, K_to] (tags in ``_order``) arranged for the Viterbi's
    steps. The to-tags [0, D) with many allowed from-tags read a block ``block = W[rows, :D]``
    [P, D], ``rows`` a run of P from-tags; each of the others [D, K) gathers its own from-tags
    ``sources`` [F, S] (F at most ``_FEW``; padded, a pad scores -inf). A step starts with one
    gather of the previous scores (``index``) and one sum (``offset``), into a buffer read
    through views made once per decode: the block's rows as they are, plus each row's min,
    plus its max (the bounds of the block's pruning), then the F gathered candidates."""

    def __init__(self, allowed: np.ndarray, penalised: np.ndarray) -> None:
        counts = allowed.sum(0)  # [K_to]
        self.d = int((counts > _FEW).sum())  # D: the dense to-tags, first in ``_order``
        rows = np.flatnonzero(allowed[:, :self.d].any(1))  # [P], a run in ``_order``
        assert np.array_equal(rows, np.arange(len(rows)) + rows[:1].sum()), "tags not in _order"
        self.block = np.ascontiguousarray(penalised[rows, :self.d])  # [P, D] float32
        few = np.arange(self.d, len(counts))  # [S]
        width = max(1, int(counts[few].max(initial=0)))
        sources = np.zeros((width, len(few)), np.intp)  # [F, S]
        candidates = np.full((width, len(few)), -np.inf, np.float32)  # [F, S]: W[sources, few]
        for s, tag in enumerate(few):
            tags = np.flatnonzero(allowed[:, tag])
            sources[:len(tags), s], candidates[:len(tags), s] = tags, penalised[tags, tag]
        low, high = self.block.min(1, initial=np.inf), self.block.max(1, initial=-np.inf)  # [P]
        self.index = np.concatenate([rows, rows, rows, sources.ravel()])  # [3 P + F S]
        self.offset = np.concatenate([np.zeros(len(rows)), low, high, candidates.ravel()]).astype(np.float32)
        self.columns = 3 * len(rows) + len(few) * np.arange(width + 1)  # [F + 1]: f's in ``index``
        self.pad = int(rows[0]) if len(rows) else 0  # a from-tag of the block

    def max_scores(self, unary: np.ndarray) -> np.ndarray:
        """The Viterbi's max-scores [n, B, K] float32 of unary [n, B, K] float32: delta[0] =
        unary[0], delta[t, j] = max_i(delta[t - 1, i] + W[i, j]) + unary[t, j], i allowed."""
        n, size, k = unary.shape
        deltas = np.empty_like(unary)
        deltas[0] = unary[0]
        if n == 1:
            return deltas
        p, width = len(self.block), len(self.index)
        scores = np.empty((size, width), np.float32)  # [B, 3 P + F S]
        previous, low, high = scores[:, :p], scores[:, p:2 * p], scores[:, 2 * p:3 * p]  # [B, P]
        gathered = [scores[:, a:b] for a, b in itertools.pairwise(self.columns)]  # F x [B, S]
        first, middle, last = gathered[0], gathered[1:-1], gathered[-1]
        at = np.arange(size)[:, None] * width + [0, p]  # [B, 2]: previous[b, 0], low[b, 0] in ``scores``
        step = np.empty((size, k), np.float32)
        dense, few = step[:, :self.d], step[:, self.d:]
        index, offset, max_dense, maximum, add = self.index, self.offset, self._max_dense, np.maximum, np.add
        for t in range(1, n):  # names bound once: for one message the loop's overhead counts
            deltas[t - 1].take(index, 1, out=scores, mode="clip")
            scores += offset
            if p:
                max_dense(scores, previous, low, high, dense, at)
            if self.d < k:  # pairwise: F is small
                maximum(first, last, out=few)
                for candidates in middle:
                    maximum(few, candidates, out=few)
            add(step, unary[t], out=deltas[t])
        return deltas

    def _max_dense(self, scores: np.ndarray, previous: np.ndarray, low: np.ndarray,
                   high: np.ndarray, out: np.ndarray, at: np.ndarray) -> None:
        """out[b, j] = max_i(previous[b, i] + block[i, j]) [B, D] (previous [B, P]; ``low`` and
        ``high``: previous plus each row's min and max; all three views of ``scores``, ``at``
        [B, 2] the flat positions of previous[b, 0] and low[b, 0]), visiting only the rows that
        can reach a max: row i cannot where previous[b, i] + max_j block[i, j] is below
        max_l(previous[b, l] + min_j block[l, j]), a score every column reaches (rounding is
        monotone: the same float32 maxima). A trained model's tags are peaked and its
        transitions small, which mostly leaves a sequence the one row that gives that bound;
        when some have more, every sequence takes the rows any of them needs if they are few,
        else those sequences take the whole block."""
        best = low.argmax(1)  # [B]
        chosen = scores.take(at + best[:, None])  # [B, 2]: previous and low of row ``best``
        reach = high >= chosen[:, 1:]  # [B, P]
        np.add(self.block.take(best, 0), chosen[:, :1], out=out)
        size = len(best)
        more = np.count_nonzero(reach) - size  # rows reached besides each ``best``
        if more > 0 and size * (more + size) <= 2 * len(self.block):
            rows = reach.nonzero()[1]  # [R]: the rows any sequence needs (repeats are harmless)
            np.maximum.reduce(previous[:, rows, None] + self.block.take(rows, 0), 1, out=out)
        elif more > 0:
            wide = np.flatnonzero(reach.sum(1) > 1)  # [M]
            out[wide] = np.maximum.reduce(previous[wide, :, None] + self.block, 1)


def _out_of_range(both: np.ndarray, live: np.ndarray | None) -> np.ndarray:
    """The sequences [R] whose alpha or beta (``both`` [2, n, B, K]) peaked outside ``_RANGE``
    at some position (``live`` [n, B]: the positions that are not padding, or None: all)."""
    peaks = both.max(3)  # [2, n, B]
    if live is not None:
        peaks[:, ~live] = 1.0  # padding, whatever its scale
    if peaks.min() >= _RANGE[0] and peaks.max() <= _RANGE[1]:
        return np.zeros(0, np.intp)
    return np.flatnonzero(((peaks < _RANGE[0]) | (peaks > _RANGE[1])).any((0, 1)))


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
        self._transitions = _Transitions(allowed, penalised)
        self._to_from = np.ascontiguousarray(penalised.T)  # [K_to, K_from] for the way back
        w64 = penalised.astype(np.float64)
        self._exp_w = np.exp(w64 - w64.max())  # [K_from, K_to]; forbidden ones are exact zeros
        self._exp_w_t = np.ascontiguousarray(self._exp_w.T)  # [K_to, K_from]
        # the unaries past a sequence's end: one tag, a from-tag of the dense block (FORBIDDEN
        # the others), so that a Viterbi step there visits one row of it
        self._padding = np.full(k, FORBIDDEN)
        self._padding[self._transitions.pad] = 0.0

    def decode(self, logits: np.ndarray, lengths: np.ndarray,
               marginals: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """logits [B, T, K] (any float dtype), lengths [B] -> Viterbi tags [B, T] int32 and each
        tag's marginal probability [B, T] float32; both 0 at padding. Without ``marginals``
        (training's monitors score the tags only) the probabilities are not computed: all 0."""
        size, max_len, _ = logits.shape
        tags, confidences = np.zeros((size, max_len), np.int32), np.zeros((size, max_len), np.float32)
        if size == 0 or max_len == 0:
            return tags, confidences
        lengths = np.maximum(np.asarray(lengths, np.intp), 1)  # [B]
        n = int(lengths.max())  # the positions any row needs
        if n > max_len:
            lengths, n = np.minimum(lengths, max_len), max_len
        ragged = size > 1 and lengths.min() < n  # (one sequence never is)
        live = np.arange(n)[:, None] < lengths if ragged else None  # [n, B]: not padding
        unary = self._unary(logits, lengths, n, live)  # [n, B, K] float64, inside order
        path = self._viterbi(unary.astype(np.float32), lengths, live)  # [n, B]
        tags[:, :n] = self.order[path].T
        if marginals:
            joint, total = self._marginals(unary, lengths, live)  # [n, B, K], [n, B]
            picked = joint.reshape(-1, joint.shape[2])[np.arange(path.size), path.ravel()]  # [n B]
            # Z >= 1e-150 unscaled, about 1 rescaled; 0 only at padding or an underflowed row
            confidences[:, :n] = (picked.reshape(path.shape) / np.maximum(total, _TINY)).T
        if live is not None:
            tags[:, :n][~live.T], confidences[:, :n][~live.T] = 0, 0.0
        return tags, confidences

    def _unary(self, logits: np.ndarray, lengths: np.ndarray, n: int,
               live: np.ndarray | None) -> np.ndarray:
        """The unaries [n, B, K] float64 of the first n positions, time major, in the inside
        order, with the constraints on the first and last tags; ``_padding`` past the ends."""
        unary = np.empty((n, len(lengths), len(self.order)))
        unary.transpose(1, 0, 2)[...] = logits[:, :n].take(self.order, 2)  # a contiguous gather
        unary[0] += self.start
        if live is None:
            unary[-1] += self.end
        else:
            unary[lengths - 1, np.arange(len(lengths))] += self.end
            unary[~live] = self._padding
        return unary

    def _viterbi(self, unary: np.ndarray, lengths: np.ndarray, live: np.ndarray | None) -> np.ndarray:
        """Best paths [n, B] (inside order) of unary [n, B, K] float32. The forward pass keeps
        the max-scores delta[t] (past a sequence's end, scores nobody reads); the way back
        starts at each sequence's last position and recomputes the one argmax it needs from
        the same float32 sums."""
        n, size, k = unary.shape
        batch = np.arange(size)
        deltas = self._transitions.max_scores(unary)  # [n, B, K]
        path = np.zeros((n, size), np.intp)
        if live is None:
            deltas[-1].argmax(1, out=path[-1])
        else:
            path[lengths - 1, batch] = deltas[lengths - 1, batch].argmax(1)
        scores, back = np.empty((size, k), np.float32), np.empty(size, np.intp)
        for t in range(n - 1, 0, -1):
            self._to_from.take(path[t], 0, out=scores, mode="clip")  # W[:, y_t] [B, K_from]
            scores += deltas[t - 1]
            if live is None:
                scores.argmax(1, out=path[t - 1])
            else:  # only the sequences still inside at t
                np.copyto(path[t - 1], scores.argmax(1, out=back), where=live[t])
        return path

    def _marginals(self, unary: np.ndarray, lengths: np.ndarray,
                   live: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """alpha[t, k] beta[t, k] [n, B, K] and its sum over k [n, B] (Z, or a row's rescaled
        Z): forward-backward unscaled, then rescaled for the sequences whose unscaled
        recursions left float64's safe range (``_out_of_range``)."""
        emit = np.exp(unary - unary.max(2, keepdims=True))  # [n, B, K], at most 1
        both = self._forward_backward(emit, lengths, live is not None, False)  # [2, n, B, K]
        again = _out_of_range(both, live)  # [R]
        if len(again):
            with np.errstate(invalid="ignore", divide="ignore"):  # an underflowed step: 0
                both[:, :, again] = self._forward_backward(emit[:, again], lengths[again], True, True)
            np.nan_to_num(both, copy=False, nan=0.0)
        joint = both[0] * both[1]  # [n, B, K]
        return joint, joint.sum(2)

    def _forward_backward(self, emit: np.ndarray, lengths: np.ndarray, ragged: bool,
                          rescale: bool) -> np.ndarray:
        """alpha and beta [2, n, B, K] of emit [n, B, K]: alpha[t] = (alpha[t - 1] E) * emit[t]
        and beta[t] = E (beta[t + 1] * emit[t + 1]), beta 1 at each sequence's last position
        (``ragged``: not all at n - 1); each step rescaled to sum 1 when ``rescale``."""
        n = len(emit)
        both = np.empty((2, *emit.shape))
        alpha, beta = both
        alpha[0], beta[-1] = emit[0], 1.0
        after = np.empty(emit.shape[1:])  # [B, K]
        dot, multiply, exp_w, exp_w_t = np.dot, np.multiply, self._exp_w, self._exp_w_t
        for t in range(1, n):
            multiply(dot(alpha[t - 1], exp_w, out=alpha[t]), emit[t], out=alpha[t])
            s = n - 1 - t
            dot(multiply(beta[s + 1], emit[s + 1], out=after), exp_w_t, out=beta[s])
            if ragged:
                np.copyto(beta[s], 1.0, where=(lengths == s + 1)[:, None])
            if rescale:
                alpha[t] /= alpha[t].sum(1, keepdims=True)
                beta[s] /= beta[s].sum(1, keepdims=True)
        return both


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
