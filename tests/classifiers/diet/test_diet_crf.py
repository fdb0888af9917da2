"""CRF functions against brute-force enumeration of every tag path on tiny inputs."""

from __future__ import annotations

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from nlu_engine.classifiers.diet.crf import (
    CRF,
    crf_log_likelihood,
    crf_marginals,
    crf_viterbi_decode,
)

K, T = 3, 4
LENGTHS = np.array([4, 2, 1, 0, 3], dtype=np.int32)


@pytest.fixture(scope="module")
def inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    logits = rng.normal(scale=2.0, size=(len(LENGTHS), T, K)).astype(np.float32)
    transitions = rng.normal(size=(K, K)).astype(np.float32)
    tags = rng.integers(0, K, size=(len(LENGTHS), T)).astype(np.int32)
    return logits, transitions, tags


def _path_scores(logits: np.ndarray, transitions: np.ndarray, length: int) -> dict:
    scores = {}
    for path in itertools.product(range(K), repeat=length):
        unary = sum(logits[t, path[t]] for t in range(length))
        binary = sum(transitions[path[t - 1], path[t]] for t in range(1, length))
        scores[path] = float(unary + binary)
    return scores


def _log_z(scores: dict) -> float:
    return float(np.logaddexp.reduce(np.array(list(scores.values()))))


def test_log_likelihood_matches_enumeration(inputs) -> None:
    logits, transitions, tags = inputs
    got = crf_log_likelihood(logits, tags, LENGTHS, transitions).numpy()
    for b, length in enumerate(LENGTHS):
        if length == 0:
            assert got[b] == 0.0
            continue
        scores = _path_scores(logits[b], transitions, length)
        expected = scores[tuple(tags[b, :length])] - _log_z(scores)
        np.testing.assert_allclose(got[b], expected, rtol=1e-5, atol=1e-5)


def test_padding_tags_and_logits_are_ignored(inputs) -> None:
    logits, transitions, tags = inputs
    mask = np.arange(T)[None, :] < LENGTHS[:, None]
    noisy_logits = np.where(mask[..., None], logits, 100.0).astype(np.float32)
    noisy_tags = np.where(mask, tags, K - 1).astype(np.int32)
    np.testing.assert_allclose(
        crf_log_likelihood(noisy_logits, noisy_tags, LENGTHS, transitions).numpy(),
        crf_log_likelihood(logits, tags, LENGTHS, transitions).numpy(),
        rtol=1e-6,
    )


def test_viterbi_matches_enumeration(inputs) -> None:
    logits, transitions, _ = inputs
    got = crf_viterbi_decode(logits, LENGTHS, transitions).numpy()
    assert got.dtype == np.int32
    for b, length in enumerate(LENGTHS):
        assert (got[b, length:] == 0).all()
        if length:
            scores = _path_scores(logits[b], transitions, length)
            assert tuple(got[b, :length]) == max(scores, key=scores.get)


def test_marginals_match_enumeration(inputs) -> None:
    logits, transitions, _ = inputs
    got = crf_marginals(logits, LENGTHS, transitions).numpy()
    for b, length in enumerate(LENGTHS):
        expected = np.zeros((T, K))
        if length:
            scores = _path_scores(logits[b], transitions, length)
            log_z = _log_z(scores)
            for path, score in scores.items():
                expected[np.arange(length), path] += np.exp(score - log_z)
            np.testing.assert_allclose(got[b, :length].sum(-1), 1.0, rtol=1e-5)
        np.testing.assert_allclose(got[b], expected, atol=1e-5)


def test_graph_mode_with_dynamic_shapes(inputs) -> None:
    logits, transitions, tags = inputs
    spec_3d = tf.TensorSpec([None, None, K], tf.float32)
    spec_2d = tf.TensorSpec([None, None], tf.int32)
    spec_1d = tf.TensorSpec([None], tf.int32)

    @tf.function(input_signature=[spec_3d, spec_2d, spec_1d])
    def run(lg, tg, ln):
        return (
            crf_log_likelihood(lg, tg, ln, transitions),
            crf_viterbi_decode(lg, ln, transitions),
            crf_marginals(lg, ln, transitions),
        )

    ll, path, marg = run(logits, tags, LENGTHS)
    np.testing.assert_allclose(
        ll.numpy(), crf_log_likelihood(logits, tags, LENGTHS, transitions).numpy(), rtol=1e-6
    )
    assert path.shape == (len(LENGTHS), T) and marg.shape == (len(LENGTHS), T, K)
    # a single time step (T = 1) runs through the same graph
    ll1, path1, _ = run(logits[:, :1], tags[:, :1], np.minimum(LENGTHS, 1))
    expected = logits[:, 0][np.arange(len(LENGTHS)), tags[:, 0]] - np.logaddexp.reduce(logits[:, 0], axis=-1)
    np.testing.assert_allclose(ll1.numpy(), np.where(LENGTHS > 0, expected, 0.0), rtol=1e-5)
    np.testing.assert_array_equal(path1.numpy()[:, 0], np.where(LENGTHS > 0, logits[:, 0].argmax(-1), 0))


def test_crf_layer_loss_gradient_and_decode(inputs) -> None:
    logits, _, tags = inputs
    keras.utils.set_random_seed(3)
    layer = CRF(K, reg_lambda=0.01)
    assert layer.transitions.shape == (K, K) and len(layer.losses) == 1
    logits_var = tf.Variable(logits)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = layer.loss(logits_var, tags, LENGTHS)
        return loss, tape.gradient(loss, [logits_var, layer.transitions])

    loss, (g_logits, g_trans) = step()
    expected = -crf_log_likelihood(logits, tags, LENGTHS, layer.transitions).numpy().mean()
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-6)
    assert np.isfinite(g_logits.numpy()).all() and np.abs(g_trans.numpy()).sum() > 0
    # d(-log p)/d logits = marginals - one_hot(tags) / B at real positions, 0 at padding
    marginals = crf_marginals(logits, LENGTHS, layer.transitions).numpy()
    mask = (np.arange(T)[None, :] < LENGTHS[:, None])[..., None]
    expected_grad = (marginals - np.eye(K)[tags] * mask) / len(LENGTHS)
    np.testing.assert_allclose(g_logits.numpy(), expected_grad, atol=1e-5)

    decoded, confidences = layer.decode(logits, LENGTHS)
    np.testing.assert_array_equal(
        decoded.numpy(), crf_viterbi_decode(logits, LENGTHS, layer.transitions).numpy()
    )
    conf = confidences.numpy()
    assert ((conf > 0) & (conf <= 1 + 1e-6)).all(where=mask[..., 0])
    assert (conf[~mask[..., 0]] == 0).all()
    np.testing.assert_allclose(
        conf, np.take_along_axis(marginals, decoded.numpy()[..., None], -1)[..., 0], atol=1e-6
    )


def test_large_logits_stay_finite() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=50.0, size=(2, 6, 5)).astype(np.float32)
    transitions = rng.normal(scale=5.0, size=(5, 5)).astype(np.float32)
    lengths = np.array([6, 3], np.int32)
    tags = rng.integers(0, 5, size=(2, 6)).astype(np.int32)
    ll = crf_log_likelihood(logits, tags, lengths, transitions).numpy()
    marg = crf_marginals(logits, lengths, transitions).numpy()
    assert np.isfinite(ll).all() and (ll <= 1e-4).all()
    np.testing.assert_allclose(marg[0].sum(-1), 1.0, rtol=1e-4)
