"""Similarity loss between input and label embeddings (Rasa's ``SingleLabelDotProductLoss``).

For each example, ``num_neg`` negatives are drawn with replacement from all labels and from the
other inputs in the batch; negatives that share the example's label id are masked with -1e9.
Five similarity groups are built (E embedding size, n = num_neg):

    s_pos [B, 1]  sim(a, b)        a = input embedding, b = its label embedding
    s_il  [B, n]  sim(a, b-)       b- = sampled label embeddings
    s_ll  [B, n]  sim(b, b-)
    s_ii  [B, n]  sim(a, a-)       a- = sampled input embeddings from the batch
    s_li  [B, n]  sim(b, a-)

``cross_entropy``: softmax CE with the target at index 0 over [s_pos, s_il, s_li] (+ s_ii, s_ll
unless ``constrain_similarities``, which instead adds a mean sigmoid CE over all groups).
``margin``: StarSpace-style hinge losses around ``mu_pos`` / ``mu_neg``.

``over_all_labels`` is the cross-entropy without sampling (DIET's ``use_all_labels_as_negatives``):
softmax CE over the similarities to every label [B, N], the objective that prediction's
confidences (a softmax over all labels) measure; ``constrain_similarities`` adds the mean sigmoid
CE over those similarities (1 for the example's label, 0 for the others) and ``scale_loss``
applies as above.

Label ids may be [B] (intent ids) or [B, F] (e.g. token feature ids for the masked-LM loss);
two entries count as the same label when all their trailing values are equal.
"""

from __future__ import annotations

import random
from typing import Literal

import tensorflow as tf

SimilarityType = Literal["inner", "cosine"]
LossType = Literal["cross_entropy", "margin"]

_NEG_INF = -1e9


def similarity(a: tf.Tensor, b: tf.Tensor, kind: SimilarityType = "inner") -> tf.Tensor:
    """Similarity over the last axis, broadcasting the others: [..., E] x [..., E] -> [...].

    For all labels at inference: ``similarity(a[:, None, :], labels[None], kind)`` -> [B, N].
    """
    if kind == "cosine":
        a = tf.nn.l2_normalize(a, axis=-1)
        b = tf.nn.l2_normalize(b, axis=-1)
    elif kind != "inner":
        raise ValueError(f"similarity type must be 'inner' or 'cosine', got {kind!r}")
    return tf.reduce_sum(a * b, axis=-1)


def _same_label(target_ids: tf.Tensor, candidate_ids: tf.Tensor) -> tf.Tensor:
    """1.0 where a candidate has the target's label: [B, ...], [B, n, ...] -> [B, n] float32."""
    equal = tf.equal(candidate_ids, tf.expand_dims(target_ids, axis=1))  # [B, n, ...]
    if equal.shape.rank > 2:
        equal = tf.reduce_all(tf.reshape(equal, (tf.shape(equal)[0], tf.shape(equal)[1], -1)), -1)
    return tf.cast(equal, tf.float32)


class DotProductLoss:
    """Single-label dot-product loss with sampled negatives (see the module docstring).

    Not a Keras layer: it has no weights. Sampling uses its own ``tf.random.Generator``; with
    ``seed=None`` the seed comes from Python's ``random``, which ``keras.utils.set_random_seed``
    seeds, so runs are reproducible. Create it eagerly (e.g. in the model's ``__init__``),
    not inside a ``tf.function``.
    """

    def __init__(
        self,
        num_neg: int = 20,
        loss_type: LossType = "cross_entropy",
        similarity_type: SimilarityType = "inner",
        constrain_similarities: bool = False,
        scale_loss: bool = False,
        mu_pos: float = 0.8,
        mu_neg: float = -0.4,
        use_max_sim_neg: bool = True,
        neg_lambda: float = 0.8,
        seed: int | None = None,
    ) -> None:
        if loss_type not in ("cross_entropy", "margin"):
            raise ValueError(f"loss_type must be 'cross_entropy' or 'margin', got {loss_type!r}")
        if similarity_type not in ("inner", "cosine"):
            raise ValueError(f"similarity_type must be 'inner' or 'cosine', got {similarity_type!r}")
        self.num_neg = num_neg
        self.loss_type = loss_type
        self.similarity_type = similarity_type
        self.constrain_similarities = constrain_similarities
        self.scale_loss = scale_loss
        self.mu_pos = mu_pos
        self.mu_neg = mu_neg
        self.use_max_sim_neg = use_max_sim_neg
        self.neg_lambda = neg_lambda
        self.seed = random.randint(0, 2**31 - 1) if seed is None else seed
        self._rng = tf.random.Generator.from_seed(self.seed)

    def sample_indices(self, batch_size: tf.Tensor, num_candidates: tf.Tensor) -> tf.Tensor:
        """Uniform indices with replacement [batch_size, num_neg] in [0, num_candidates)."""
        return self._rng.uniform((batch_size, self.num_neg), minval=0, maxval=num_candidates, dtype=tf.int32)

    def __call__(self, inputs_embed: tf.Tensor, labels_embed: tf.Tensor, label_ids: tf.Tensor,
                 all_labels_embed: tf.Tensor, all_label_ids: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Loss and accuracy (scalars) with freshly sampled negatives.

        inputs_embed [B, E], labels_embed [B, E], label_ids [B] (or [B, F]),
        all_labels_embed [N, E], all_label_ids [N] (or [N, F]).
        """
        batch_size = tf.shape(inputs_embed)[0]
        label_neg_idx = self.sample_indices(batch_size, tf.shape(all_labels_embed)[0])  # [B, n]
        input_neg_idx = self.sample_indices(batch_size, batch_size)  # [B, n]
        return self.loss_with_negatives(inputs_embed, labels_embed, label_ids, all_labels_embed,
                                        all_label_ids, label_neg_idx, input_neg_idx)

    def loss_with_negatives(
        self,
        inputs_embed: tf.Tensor,
        labels_embed: tf.Tensor,
        label_ids: tf.Tensor,
        all_labels_embed: tf.Tensor,
        all_label_ids: tf.Tensor,
        label_neg_idx: tf.Tensor,
        input_neg_idx: tf.Tensor,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Deterministic core of ``__call__``: negatives given as indices.

        label_neg_idx [B, n] into all labels, input_neg_idx [B, n] into the batch.
        """
        sim = self.similarity_type
        neg_labels = tf.gather(all_labels_embed, label_neg_idx)  # [B, n, E]
        neg_inputs = tf.gather(inputs_embed, input_neg_idx)  # [B, n, E]
        bad_labels = _same_label(label_ids, tf.gather(all_label_ids, label_neg_idx))  # [B, n]
        bad_inputs = _same_label(label_ids, tf.gather(label_ids, input_neg_idx))  # [B, n]

        a = inputs_embed[:, None, :]  # [B, 1, E]
        b = labels_embed[:, None, :]  # [B, 1, E]
        s_pos = similarity(a, b, sim)  # [B, 1]
        s_il = similarity(a, neg_labels, sim) + _NEG_INF * bad_labels  # [B, n]
        s_ll = similarity(b, neg_labels, sim) + _NEG_INF * bad_labels  # [B, n]
        s_ii = similarity(a, neg_inputs, sim) + _NEG_INF * bad_inputs  # [B, n]
        s_li = similarity(b, neg_inputs, sim) + _NEG_INF * bad_inputs  # [B, n]

        # accuracy over the sampled label negatives only (as Rasa's `i_acc`)
        accuracy = tf.reduce_mean(tf.cast(s_pos[:, 0] >= tf.reduce_max(s_il, axis=-1), tf.float32))
        if self.loss_type == "margin":
            loss = self._margin_loss(s_pos, s_il, s_ll, s_ii, s_li)
        else:
            loss = self._cross_entropy_loss(s_pos, s_il, s_ll, s_ii, s_li)
        return loss, accuracy

    def over_all_labels(
        self, inputs_embed: tf.Tensor, label_ids: tf.Tensor, all_labels_embed: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Loss and accuracy (scalars) against every label: inputs_embed [B, E], label_ids [B]
        (indices into all_labels_embed [N, E])."""
        sims = similarity(inputs_embed[:, None, :], all_labels_embed[None], self.similarity_type)
        loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label_ids, logits=sims)  # [B]
        if self.constrain_similarities:
            targets = tf.one_hot(label_ids, tf.shape(sims)[1], dtype=sims.dtype)  # [B, N]
            sigmoid = tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=sims)
            loss += tf.reduce_mean(sigmoid, axis=-1)  # [B]
        loss = self._scaled(loss)
        accuracy = tf.reduce_mean(
            tf.cast(tf.argmax(sims, -1, output_type=label_ids.dtype) == label_ids, tf.float32)
        )
        return tf.reduce_mean(loss), accuracy

    def _scaled(self, loss: tf.Tensor) -> tf.Tensor:
        """``scale_loss``, focal-like: down-weight examples already learned, once any p > 0.5,
        by ``((1 - p) / 0.5) ** 4``, at most 1.

        Rasa's weight is not capped: a wrong example (p near 0) weighs up to 16. Once a selector
        has learned its data, its gradient then comes only from the examples dropout makes
        wrong, 16 times over, each pushing the inner-product similarities' scale up: it grew
        from 50 to 1,300 on the example bot's FAQ, a dropped-out example's loss spiked to
        hundreds, and once every learned example's gradient underflowed the weights froze.
        Capped, an example weighs as much as without ``scale_loss`` at most, and the L2 holds
        the scale (tests/classifiers/diet/test_diet_losses.py)."""
        if not self.scale_loss:
            return loss
        p = tf.exp(-loss)
        weight = tf.minimum(((1.0 - p) / 0.5) ** 4, 1.0)
        return loss * tf.where(tf.reduce_max(p) > 0.5, tf.stop_gradient(weight), 1.0)

    def _cross_entropy_loss(self, s_pos: tf.Tensor, s_il: tf.Tensor, s_ll: tf.Tensor,
                            s_ii: tf.Tensor, s_li: tf.Tensor) -> tf.Tensor:
        """Mean over the batch of softmax CE (target index 0) [+ sigmoid CE]."""
        groups = [s_pos, s_il, s_li] if self.constrain_similarities else [s_pos, s_il, s_li, s_ii, s_ll]
        logits = tf.concat(groups, axis=-1)  # [B, 1 + k*n]
        loss = tf.reduce_logsumexp(logits, axis=-1) - s_pos[:, 0]  # [B] = -log softmax[0]
        if self.constrain_similarities:
            all_sims = tf.concat([s_pos, s_il, s_ll, s_ii, s_li], axis=-1)  # [B, 1 + 4n]
            targets = tf.concat([tf.ones_like(s_pos), tf.zeros_like(all_sims[:, 1:])], axis=-1)
            sigmoid = tf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=all_sims)
            loss += tf.reduce_mean(sigmoid, axis=-1)  # [B]
        return tf.reduce_mean(self._scaled(loss))

    def _margin_loss(self, s_pos: tf.Tensor, s_il: tf.Tensor, s_ll: tf.Tensor,
                     s_ii: tf.Tensor, s_li: tf.Tensor) -> tf.Tensor:
        """StarSpace hinge: pull s_pos above mu_pos, push negatives below -mu_neg."""
        loss = tf.maximum(0.0, self.mu_pos - s_pos[:, 0])  # [B]
        if self.use_max_sim_neg:
            loss += tf.maximum(0.0, self.mu_neg + tf.reduce_max(s_il, axis=-1))
        else:
            loss += tf.reduce_sum(tf.maximum(0.0, self.mu_neg + s_il), axis=-1)
        for group in (s_ll, s_ii, s_li):
            loss += self.neg_lambda * tf.maximum(0.0, self.mu_neg + tf.reduce_max(group, axis=-1))
        return tf.reduce_mean(loss)
