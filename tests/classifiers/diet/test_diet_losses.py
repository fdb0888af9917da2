"""Dot-product similarity loss: hand-computed values, masking, sampling."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from nlu_engine.classifiers.diet.losses import (
    DotProductLoss,
    similarity,
)

# two examples with labels 0 and 1; three labels in total
INPUTS = np.array([[1.0, 0.0], [0.0, 2.0]], np.float32)
ALL_LABELS = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)
ALL_IDS = np.array([0, 1, 2], np.int32)
IDS = np.array([0, 1], np.int32)
LABELS = ALL_LABELS[IDS]


def _logsumexp(x: np.ndarray) -> float:
    return float(np.logaddexp.reduce(x))


def test_similarity_kinds() -> None:
    a, b = np.array([[3.0, 4.0]], np.float32), np.array([[6.0, 8.0]], np.float32)
    np.testing.assert_allclose(similarity(a, b, "inner").numpy(), [50.0])
    np.testing.assert_allclose(similarity(a, b, "cosine").numpy(), [1.0], rtol=1e-6)
    sims = similarity(INPUTS[:, None, :], ALL_LABELS[None], "inner").numpy()  # [B, N]
    np.testing.assert_allclose(sims, INPUTS @ ALL_LABELS.T)
    with pytest.raises(ValueError):
        similarity(a, b, "dot")


def test_hand_computed_cross_entropy() -> None:
    loss_fn = DotProductLoss(num_neg=2, constrain_similarities=False, seed=0)
    # example 0: label negatives = labels 1 and 0 (0 is its own -> masked);
    #            input negatives = inputs 1 and 0 (0 is itself, same label -> masked)
    # example 1: label negatives = labels 2 and 2; input negatives = inputs 0 and 0
    label_neg = np.array([[1, 0], [2, 2]], np.int32)
    input_neg = np.array([[1, 0], [0, 0]], np.int32)
    loss, acc = loss_fn.loss_with_negatives(INPUTS, LABELS, IDS, ALL_LABELS, ALL_IDS, label_neg, input_neg)
    a, b = INPUTS, LABELS
    # example 0: s+ = a0.b0 = 2; s_il = a0.l1 = 0; s_li = b0.a1 = 0; s_ii = a0.a1 = 0;
    #            s_ll = b0.l1 = 0 (masked entries contribute exp(-1e9) = 0)
    logits0 = np.array([2.0, 0.0, 0.0, 0.0, 0.0])
    # example 1: s+ = a1.b1 = 2; s_il = a1.l2 = 2 (x2); s_li = b1.a0 = 0 (x2);
    #            s_ii = a1.a0 = 0 (x2); s_ll = b1.l2 = 1 (x2)
    logits1 = np.array([2.0, 2, 2, 0, 0, 0, 0, 1, 1])
    assert float(a[1] @ ALL_LABELS[2]) == 2.0 and float(b[1] @ ALL_LABELS[2]) == 1.0
    expected = np.mean([_logsumexp(logits0) - 2.0, _logsumexp(logits1) - 2.0])
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-6)
    # accuracy: example 0 has s+ 2 > 0; example 1 ties (2 >= 2) and counts, as in Rasa
    assert acc.numpy() == 1.0


def test_constrained_similarities_add_sigmoid_term() -> None:
    loss_fn = DotProductLoss(num_neg=1, constrain_similarities=True, seed=0)
    label_neg = np.array([[1], [0]], np.int32)
    input_neg = np.array([[1], [0]], np.int32)
    loss, _ = loss_fn.loss_with_negatives(INPUTS, LABELS, IDS, ALL_LABELS, ALL_IDS, label_neg, input_neg)

    def softplus(x: np.ndarray) -> np.ndarray:
        return np.log1p(np.exp(x))

    per_example = []
    for i, j in [(0, 1), (1, 0)]:
        s_pos = INPUTS[i] @ LABELS[i]
        s_il, s_ll = INPUTS[i] @ ALL_LABELS[j], LABELS[i] @ ALL_LABELS[j]
        s_ii, s_li = INPUTS[i] @ INPUTS[j], LABELS[i] @ INPUTS[j]
        softmax = _logsumexp(np.array([s_pos, s_il, s_li])) - s_pos
        sigmoid = np.mean([softplus(-s_pos), softplus(s_il), softplus(s_ll), softplus(s_ii), softplus(s_li)])
        per_example.append(softmax + sigmoid)
    np.testing.assert_allclose(loss.numpy(), np.mean(per_example), rtol=1e-5)


def test_loss_decreases_as_positive_similarity_grows() -> None:
    loss_fn = DotProductLoss(num_neg=5, seed=1)
    # example 0 only meets label 1 and input 1, both orthogonal to its label embedding,
    # so scaling that embedding changes s+ alone
    label_neg = np.array([[0, 1, 1, 0, 1], [0, 0, 1, 2, 2]], np.int32)
    input_neg = np.array([[0, 1, 1, 0, 1], [1, 0, 0, 1, 0]], np.int32)
    losses = []
    for scale in (1.0, 2.0, 4.0):
        labels = LABELS.copy()
        labels[0] *= scale
        losses.append(
            loss_fn.loss_with_negatives(INPUTS, labels, IDS, ALL_LABELS, ALL_IDS, label_neg, input_neg)[
                0
            ].numpy()
        )
    assert losses[0] > losses[1] > losses[2]


def test_same_label_negatives_are_masked() -> None:
    # every sampled negative has the positive's label: the loss is exactly 0 (softmax of one)
    loss_fn = DotProductLoss(num_neg=20, seed=0)
    inputs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    ids = np.zeros(4, np.int32)
    all_labels = np.array([[1.0, 2.0, 3.0]], np.float32)
    loss, acc = loss_fn(inputs, np.repeat(all_labels, 4, 0), ids, all_labels, np.zeros(1, np.int32))
    assert loss.numpy() == pytest.approx(0.0, abs=1e-6) and acc.numpy() == 1.0


def test_feature_vector_label_ids() -> None:
    # [B, F] ids (masked-LM style): same label only when all features match
    loss_fn = DotProductLoss(num_neg=1, seed=0)
    ids = np.array([[1.0, 2.0], [1.0, 3.0]], np.float32)
    with_other = loss_fn.loss_with_negatives(
        INPUTS, LABELS, ids, LABELS, ids, np.array([[1], [0]]), np.array([[1], [0]])
    )[0]
    with_self = loss_fn.loss_with_negatives(
        INPUTS, LABELS, ids, LABELS, ids, np.array([[0], [1]]), np.array([[0], [1]])
    )[0]
    assert with_other.numpy() > 0 and with_self.numpy() == pytest.approx(0.0, abs=1e-6)


def test_margin_loss() -> None:
    loss_fn = DotProductLoss(num_neg=1, loss_type="margin", similarity_type="cosine", seed=0)
    loss, _ = loss_fn.loss_with_negatives(
        INPUTS, LABELS, IDS, ALL_LABELS, ALL_IDS, np.array([[2], [2]]), np.array([[1], [0]])
    )
    # cosine: s+ = 1 for both -> no positive term; s_il = cos(a, [1, 1]) = 0.707 for both;
    # s_ll = 0.707, s_ii = 0, s_li = 0 -> 2 * mean(max(0, -0.4 + .707) * (1 + 0.8) + 0.8 * 0)
    c = 1 / np.sqrt(2)
    expected = (c - 0.4) + 0.8 * (c - 0.4)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-5)


def test_sampling_is_seeded_and_runs_in_graph_mode() -> None:
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(8, 4)).astype(np.float32)
    all_labels = rng.normal(size=(3, 4)).astype(np.float32)
    ids = rng.integers(0, 3, size=8).astype(np.int32)
    args = (inputs, all_labels[ids], ids, all_labels, np.arange(3, dtype=np.int32))

    results = []
    for _ in range(2):
        loss_fn = DotProductLoss(num_neg=20, seed=123)
        graph_fn = tf.function(loss_fn.__call__)
        results.append([graph_fn(*args)[0].numpy() for _ in range(3)])
    assert results[0] == results[1]
    assert len(set(results[0])) > 1  # fresh negatives every call
    assert np.isfinite(results[0]).all()


@pytest.mark.parametrize("constrain", [False, True])
@pytest.mark.parametrize("kind", ["inner", "cosine"])
def test_loss_over_all_labels_by_hand(constrain: bool, kind: str) -> None:
    """use_all_labels_as_negatives: softmax CE over the similarities to every label (+ the mean
    sigmoid CE with constrain_similarities); accuracy is that of prediction's argmax."""
    rng = np.random.default_rng(5)
    inputs = rng.normal(size=(4, 3)).astype(np.float32)
    labels = rng.normal(size=(6, 3)).astype(np.float32)
    ids = np.array([0, 5, 2, 2], np.int32)
    loss_fn = DotProductLoss(similarity_type=kind, constrain_similarities=constrain)
    loss, accuracy = loss_fn.over_all_labels(tf.constant(inputs), tf.constant(ids), tf.constant(labels))
    a, b = inputs, labels
    if kind == "cosine":
        a = a / np.linalg.norm(a, axis=-1, keepdims=True)
        b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    sims = (a @ b.T).astype(np.float64)  # [4, 6]
    log_softmax = sims - np.log(np.exp(sims).sum(-1, keepdims=True))
    expected = -log_softmax[np.arange(4), ids]
    if constrain:
        targets = np.eye(6)[ids]
        sigmoid_ce = np.maximum(sims, 0) - sims * targets + np.log1p(np.exp(-np.abs(sims)))
        expected = expected + sigmoid_ce.mean(-1)
    np.testing.assert_allclose(float(loss), expected.mean(), rtol=1e-5)
    assert float(accuracy) == pytest.approx(float(np.mean(sims.argmax(-1) == ids)))


def test_scale_loss_weighs_a_wrong_example_at_most_as_without_it() -> None:
    """scale_loss down-weights learned examples by ((1 - p) / 0.5) ** 4 once one has p > 0.5,
    and caps the weight at 1: Rasa's uncapped 16 for a wrong example grew a trained selector's
    similarity scale until its loss spiked and froze (losses._scaled)."""
    inputs = np.array([[4.0, 0.0], [0.0, 1.0]], np.float32)  # example 0 learned, 1 wrong
    all_labels = np.array([[1.0, 0.0], [0.0, -1.0]], np.float32)
    ids = np.array([0, 1], np.int32)
    plain, _ = DotProductLoss(scale_loss=False).over_all_labels(inputs, ids, all_labels)
    scaled, _ = DotProductLoss(scale_loss=True).over_all_labels(inputs, ids, all_labels)
    sims = inputs @ all_labels.T
    per_example = [_logsumexp(sims[i]) - sims[i, ids[i]] for i in range(2)]
    p_learned = np.exp(-per_example[0])
    assert p_learned > 0.5 and np.exp(-per_example[1]) < 0.5
    np.testing.assert_allclose(plain.numpy(), np.mean(per_example), rtol=1e-5)
    weights = [((1 - p_learned) / 0.5) ** 4, 1.0]  # uncapped, the wrong one's would be ~14
    np.testing.assert_allclose(scaled.numpy(), np.dot(weights, per_example) / 2, rtol=1e-4)
