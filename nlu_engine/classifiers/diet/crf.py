"""Linear-chain CRF in plain TensorFlow ops (no tensorflow-addons): the training loss.

Decoding (Viterbi and marginals) is NumPy, ``crf_decode.py``, the one decode of parsing and of
training's monitors; ``CRF.decoder`` hands it the current transitions and constraints.

Notation: B batch, T time steps (padded), K tags. ``logits[b, t, k]`` are the unary
potentials, ``transitions[i, j]`` the score of moving from tag i to tag j. As in Rasa (and
TF-Addons, which Rasa ported) there are no explicit start/end transitions. Positions
``t >= lengths[b]`` are ignored. Every function here works in graph mode (``tf.function``)
with dynamic B and T; T must be >= 1 (DIET's entity tensors always have one extra position).

The recursions run over time with ``tf.scan`` on time-major tensors. The log-sum-exp over the
previous tag is done as a matrix product in shifted exp-space::

    logsumexp_i(a[b, i] + W[i, j]) = m_b + M + log(sum_i exp(a[b, i] - m_b) exp(W[i, j] - M))

with ``m_b = max_i a[b, i]`` and ``M = max W``; that is one [B, K] x [K, K] matmul per step
instead of a [B, K, K] broadcast, which matters for K ~ 160.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from nlu_engine.classifiers.diet.crf_decode import FORBIDDEN, CRFDecoder

# log() floor for the exp-space matmul; only reached when transition scores span > ~80 nats
_TINY = 1e-30


def _shifted_exp_transitions(transitions: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """exp(W - max W) [K, K] and max W (scalar, no gradient: the result is shift-invariant)."""
    shift = tf.stop_gradient(tf.reduce_max(transitions))
    return tf.exp(transitions - shift), shift


def _logsumexp_matmul(scores: tf.Tensor, exp_transitions: tf.Tensor, shift: tf.Tensor) -> tf.Tensor:
    """out[b, j] = logsumexp_i(scores[b, i] + W[i, j]), via exp-space matmul.

    scores [B, K], exp_transitions = exp(W - shift) [K, K] -> [B, K]
    (pass ``tf.transpose(exp_transitions)`` to sum over the second index instead).
    """
    row_max = tf.stop_gradient(tf.reduce_max(scores, axis=-1, keepdims=True))  # [B, 1]
    summed = tf.matmul(tf.exp(scores - row_max), exp_transitions)  # [B, K]
    return tf.math.log(tf.maximum(summed, _TINY)) + row_max + shift


def _forward_alphas(logits: tf.Tensor, lengths: tf.Tensor, transitions: tf.Tensor) -> tf.Tensor:
    """Forward log-potentials alpha[t, b, j] (time-major [T, B, K]).

    alpha[t] = log sum over tag paths y_0..y_t ending in j of exp(score). For
    t >= lengths[b] the value is carried over, so alpha[T-1, b] = alpha[len_b - 1, b].
    """
    logits_tm = tf.transpose(logits, [1, 0, 2])  # [T, B, K]
    exp_trans, shift = _shifted_exp_transitions(transitions)

    def step(alpha: tf.Tensor, elems: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        logit_t, t = elems  # [B, K], scalar
        new_alpha = _logsumexp_matmul(alpha, exp_trans, shift) + logit_t  # [B, K]
        return tf.where(((t > 0) & (t < lengths))[:, None], new_alpha, alpha)

    # the scan covers all T steps (t = 0 keeps the initializer): scanning over T - 1 steps
    # would break for T = 1 with an unknown batch size (empty TensorArray stack)
    times = tf.range(tf.shape(logits_tm)[0])  # [T]
    return tf.scan(step, (logits_tm, times), initializer=logits_tm[0])  # [T, B, K]


def _log_partition(alphas: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
    """log Z [B] from the forward alphas [T, B, K]; 0 for empty sequences."""
    log_z = tf.reduce_logsumexp(alphas[-1], axis=-1)  # [B]
    return tf.where(lengths > 0, log_z, tf.zeros_like(log_z))


def crf_sequence_score(
    logits: tf.Tensor, tags: tf.Tensor, lengths: tf.Tensor, transitions: tf.Tensor
) -> tf.Tensor:
    """Unnormalised score of the given tag paths.

    logits [B, T, K] float32, tags [B, T] int32, lengths [B] int32, transitions [K, K] -> [B]
    """
    num_tags = tf.shape(logits)[2]
    mask = tf.sequence_mask(lengths, maxlen=tf.shape(tags)[1])  # [B, T] bool
    tags = tf.where(mask, tf.cast(tags, tf.int32), 0)  # padding tags may be garbage
    unary = tf.gather(logits, tags, batch_dims=2)  # [B, T]
    unary = tf.reduce_sum(tf.where(mask, unary, 0.0), axis=1)  # [B]
    flat_pairs = tags[:, :-1] * num_tags + tags[:, 1:]  # [B, T-1] index into W.flat
    binary = tf.gather(tf.reshape(transitions, [-1]), flat_pairs)  # [B, T-1]
    binary = tf.reduce_sum(tf.where(mask[:, 1:], binary, 0.0), axis=1)  # [B]
    return unary + binary


def crf_log_norm(logits: tf.Tensor, lengths: tf.Tensor, transitions: tf.Tensor) -> tf.Tensor:
    """log Z(x) [B] (0 for empty sequences). logits [B, T, K], lengths [B], W [K, K]."""
    lengths = tf.cast(lengths, tf.int32)
    return _log_partition(_forward_alphas(logits, lengths, transitions), lengths)


def crf_log_likelihood(
    logits: tf.Tensor, tags: tf.Tensor, lengths: tf.Tensor, transitions: tf.Tensor
) -> tf.Tensor:
    """log p(tags | x) [B]; positions >= length are ignored, an empty sequence gives 0.

    logits [B, T, K] float32, tags [B, T] int32, lengths [B] int32, transitions [K, K]
    """
    lengths = tf.cast(lengths, tf.int32)
    score = crf_sequence_score(logits, tags, lengths, transitions)  # [B]
    return score - crf_log_norm(logits, lengths, transitions)  # [B]


class CRF(keras.layers.Layer):
    """CRF head: owns the transition matrix and computes the tagging loss; ``decoder`` decodes.

    ``transitions`` [K, K] (variable name "transitions", glorot-uniform, seeded through
    ``keras.utils.set_random_seed``) carries L2(``reg_lambda``); the penalty shows up in
    ``layer.losses`` / ``model.losses``. ``scale_loss`` is Rasa's focal-like weighting
    ``stop_grad(((1 - p) / 0.5) ** 4)`` once some example has p(tags | x) > 0.5.
    """

    def __init__(
        self,
        num_tags: int,
        reg_lambda: float = 0.0,
        scale_loss: bool = False,
        allowed: np.ndarray | None = None,
        start_allowed: np.ndarray | None = None,
        end_allowed: np.ndarray | None = None,
        **kwargs,
    ) -> None:
        """``allowed`` [K, K] (bool) marks the transitions the tagging scheme permits (BILOU forbids
        e.g. O -> I-x or U-x -> L-x); ``start_allowed`` / ``end_allowed`` [K] the tags a sequence
        may start or end with. Forbidden ones score a fixed -1e4, in training and decoding alike."""
        super().__init__(**kwargs)
        self.num_tags = num_tags
        self.reg_lambda = reg_lambda
        self.scale_loss = scale_loss
        self.transitions = self.add_weight(
            name="transitions",
            shape=(num_tags, num_tags),
            initializer="glorot_uniform",
            regularizer=keras.regularizers.L2(reg_lambda) if reg_lambda > 0 else None,
        )

        def penalty(mask: np.ndarray | None, shape: tuple[int, ...]) -> tf.Tensor:
            mask = np.ones(shape, bool) if mask is None else np.asarray(mask, bool)
            return tf.constant(np.where(mask, 0.0, FORBIDDEN), tf.float32)

        #: (allowed, may start, may end) as given, for the decoder; None: unconstrained
        self.constraints = None if allowed is None else (allowed, start_allowed, end_allowed)
        self.transition_penalty = penalty(allowed, (num_tags, num_tags))  # [K, K]
        self.start_penalty = penalty(start_allowed, (num_tags,))  # [K]
        self.end_penalty = penalty(end_allowed, (num_tags,))  # [K]
        self.built = True

    def _constrained(self, logits: tf.Tensor, lengths: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Logits with the start / end penalties added at each sequence's first and last
        position [B, T, K], and the penalised transitions [K, K]."""
        max_len = tf.shape(logits)[1]
        first = tf.one_hot(tf.zeros_like(lengths), max_len)  # [B, T]
        last = tf.one_hot(tf.maximum(lengths - 1, 0), max_len)  # [B, T]
        logits = logits + first[:, :, None] * self.start_penalty + last[:, :, None] * self.end_penalty
        return logits, self.transitions + self.transition_penalty

    def loss(self, logits: tf.Tensor, tags: tf.Tensor, lengths: tf.Tensor) -> tf.Tensor:
        """Mean negative log-likelihood (scalar). logits [B, T, K], tags [B, T], lengths [B]."""
        logits, transitions = self._constrained(logits, lengths)
        log_likelihood = crf_log_likelihood(logits, tags, lengths, transitions)  # [B]
        nll = -log_likelihood
        if self.scale_loss:
            p = tf.exp(log_likelihood)
            weight = tf.where(tf.reduce_max(p) > 0.5, tf.stop_gradient(((1.0 - p) / 0.5) ** 4), 1.0)
            nll *= weight
        return tf.reduce_mean(nll)

    def decoder(self) -> CRFDecoder:
        """The NumPy decoder of the current transitions, with the same constraints."""
        return CRFDecoder(np.asarray(self.transitions.numpy()), self.constraints)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(num_tags=self.num_tags, reg_lambda=self.reg_lambda, scale_loss=self.scale_loss)
        return config
