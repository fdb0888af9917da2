"""The CRF's training loss (TensorFlow) and its one decode (NumPy, ``crf_decode``) against
brute-force enumeration of every tag path on tiny inputs, and the decode against a plain
per-sequence reference (log-space Viterbi and forward-backward over every transition) on
BILOU tag sets of realistic size."""

from __future__ import annotations

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from nlu_engine.classifiers.diet.crf import CRF, crf_log_likelihood
from nlu_engine.classifiers.diet.crf_decode import FORBIDDEN, CRFDecoder, _out_of_range
from nlu_engine.training_data.bilou import bilou_constraints

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


def _marginals(decoder: CRFDecoder, logits: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Every tag's marginal [B, T, K] from the decoder, in the vocabulary's order (0 at padding)."""
    clipped, positions = np.maximum(lengths, 1), logits.shape[1]
    live = np.arange(positions)[:, None] < clipped  # [T, B]
    joint, total = decoder._marginals(decoder._unary(logits, clipped, positions, live), clipped, live)
    out = np.zeros(logits.shape)
    out[:, :, decoder.order] = np.where(live[..., None], joint / total[..., None], 0.0).transpose(1, 0, 2)
    return out


def test_decode_matches_enumeration(inputs) -> None:
    """Tags, confidences and every marginal of the NumPy decode, unconstrained, on a batch with
    padding and a length 0 (which decodes its first position, as a parse does)."""
    logits, transitions, _ = inputs
    decoder = CRFDecoder(transitions, None)
    tags, confidences = decoder.decode(logits, LENGTHS)
    marginals = _marginals(decoder, logits, LENGTHS)
    assert tags.dtype == np.int32 and confidences.dtype == np.float32
    for b, length in enumerate(LENGTHS):
        n = max(length, 1)
        assert (tags[b, n:] == 0).all() and (confidences[b, n:] == 0).all()
        scores = _path_scores(logits[b], transitions, n)
        assert tuple(tags[b, :n]) == max(scores, key=scores.get)
        expected = np.zeros((T, K))
        log_z = _log_z(scores)
        for path, score in scores.items():
            expected[np.arange(n), path] += np.exp(score - log_z)
        np.testing.assert_allclose(marginals[b, :n], expected[:n], atol=1e-6)  # float32 path sums
        np.testing.assert_allclose(confidences[b, :n], expected[np.arange(n), tags[b, :n]], atol=1e-6)
        one_tags, one_confidences = decoder.decode(logits[b:b + 1], LENGTHS[b:b + 1])  # alone
        np.testing.assert_array_equal(one_tags[0], tags[b])
        np.testing.assert_allclose(one_confidences[0], confidences[b], atol=1e-6)


def test_constrained_decode_matches_enumeration() -> None:
    """BILOU constraints on a tag set large enough for both of the decode's forms (a dense block
    and gathered sources): every allowed path enumerated, batch sizes 1 and many."""
    # 4 types: O, B-x and U-x follow 9 tags (a dense block), I-x and L-x 2 (gathered)
    vocabulary = ["O"] + [f"{p}-e{i}" for i in range(4) for p in "BILU"]
    allowed, start, end = bilou_constraints(vocabulary)
    k = len(vocabulary)
    rng = np.random.default_rng(11)
    transitions = rng.normal(size=(k, k)).astype(np.float32)
    lengths = np.array([3, 1, 2, 3, 3, 2, 1, 3, 2, 3])  # a ragged batch
    logits = rng.normal(scale=2.0, size=(len(lengths), 3, k)).astype(np.float32)
    decoder = CRFDecoder(transitions, (allowed, start, end))
    batched = decoder.decode(logits, lengths)
    for b, n in enumerate(lengths):
        penalised = np.where(allowed, transitions, transitions + FORBIDDEN)
        unary = logits[b, :n] + np.where(start, 0, FORBIDDEN) * (np.arange(n) == 0)[:, None]
        unary = unary + np.where(end, 0, FORBIDDEN) * (np.arange(n) == n - 1)[:, None]
        scores = {path: float(sum(unary[t, y] for t, y in enumerate(path))
                              + sum(penalised[a, c] for a, c in itertools.pairwise(path)))
                  for path in itertools.product(range(k), repeat=n)}
        best = max(scores, key=scores.get)
        log_z = _log_z(scores)
        expected = [sum(np.exp(s - log_z) for p, s in scores.items() if p[t] == best[t]) for t in range(n)]
        for tags, confidences in (batched, decoder.decode(logits[b:b + 1, :n], lengths[b:b + 1])):
            row = 0 if len(tags) == 1 else b
            assert tuple(tags[row, :n]) == best
            np.testing.assert_allclose(confidences[row, :n], expected, atol=1e-6)


def _reference_decode(logits: np.ndarray, transitions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One sequence [n, K], every transition visited: float32 Viterbi (as the parse decoded before
    the batched decode) and log-space forward-backward in float64 -> tags [n], confidences [n]."""
    n = len(logits)
    delta, back = logits[0].astype(np.float32), np.zeros((n, logits.shape[1]), np.intp)
    for t in range(1, n):
        scores = delta[:, None] + transitions  # [K_prev, K_next]
        back[t] = scores.argmax(0)
        delta = scores.max(0) + logits[t].astype(np.float32)
    tags = [int(delta.argmax())]
    for t in range(n - 1, 0, -1):
        tags.insert(0, int(back[t, tags[0]]))
    marginals = _marginals_reference(logits, transitions)
    return np.array(tags), marginals[np.arange(n), tags]


@pytest.mark.parametrize(("types", "transition_scale", "logit_scale", "longest"), [
    (0, 2.0, 4.0, 15), (1, 2.0, 4.0, 15), (12, 2.0, 4.0, 15), (39, 2.0, 4.0, 15),
    (39, 0.1, 8.0, 15),  # as a trained model: peaked tags, small transitions (one row per step)
    (12, 2.0, 4.0, 90),  # long messages: one message's unscaled recursions leave float64's range
])
def test_decode_matches_the_plain_reference(
    types: int, transition_scale: float, logit_scale: float, longest: int
) -> None:
    """SNIPS-sized BILOU tag sets (39 types: K = 157), batches with padding and single messages
    (batches of one, padded or not): the same tags as the plain reference and confidences
    within 1e-6."""
    vocabulary = ["O"] + [f"{p}-e{i}" for i in range(types) for p in "BILU"]
    allowed, start, end = bilou_constraints(vocabulary)
    k = len(vocabulary)
    rng = np.random.default_rng(types)
    transitions = rng.normal(scale=transition_scale, size=(k, k)).astype(np.float32)
    lengths = rng.integers(1, longest + 1, size=40)
    logits = rng.normal(scale=logit_scale, size=(40, lengths.max(), k)).astype(np.float32)
    decoder = CRFDecoder(transitions, (allowed, start, end))
    tags, confidences = decoder.decode(logits, lengths)
    tags_only, none = decoder.decode(logits, lengths, marginals=False)  # training's monitors
    np.testing.assert_array_equal(tags_only, tags)
    assert not none.any()
    penalised = transitions + np.where(allowed, 0, FORBIDDEN).astype(np.float32)
    for b, n in enumerate(lengths):
        unary = logits[b, :n].astype(np.float64)
        unary[0] += np.where(start, 0, FORBIDDEN)
        unary[-1] += np.where(end, 0, FORBIDDEN)
        expected_tags, expected_confidences = _reference_decode(unary, penalised)
        np.testing.assert_array_equal(tags[b, :n], expected_tags)
        np.testing.assert_allclose(confidences[b, :n], expected_confidences, atol=1e-6)
        one_tags, one_confidences = decoder.decode(logits[b:b + 1], lengths[b:b + 1])  # padded
        np.testing.assert_array_equal(one_tags[0, :n], expected_tags)
        np.testing.assert_allclose(one_confidences[0, :n], expected_confidences, atol=1e-6)
        assert (one_tags[0, n:] == 0).all() and (one_confidences[0, n:] == 0).all()


def _bilou_paths(types: int, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Valid BILOU tag paths [B, T] (vocabulary: O, then B, I, L, U of each type): O between
    entities of one to three tokens (one cut short at the end of a row)."""
    paths = np.zeros(shape, np.intp)
    for row in paths:
        t = 0
        while t < len(row):
            span, first = int(rng.integers(1, 4)), 1 + 4 * int(rng.integers(types))
            entity = [first + 3] if span == 1 else [first, *[first + 1] * (span - 2), first + 2]
            if rng.random() < 0.5:
                row[t:t + span] = entity[:len(row) - t]
            t += span
    return paths


@pytest.mark.parametrize(("k", "bilou", "trained"), [
    (3, False, False), (80, False, False), (5, True, False), (21, True, True), (77, True, True),
    (77, True, False), (81, True, True),
])
def test_a_batch_of_one_decodes_as_its_row_of_a_batch(k: int, bilou: bool, trained: bool) -> None:
    """Each message decoded alone (a batch of one, cut to its length or padded as in the batch)
    gives its row of the batch's decode: the same tags, confidences within float32 rounding;
    K from 3 to 81 tags, BILOU (with its constraints) or not, trained-like logits (a valid
    path scoring 8 over N(0, 1), transitions N(0, 0.5)) or random ones, ragged lengths with a
    0, with and without the marginals."""
    rng = np.random.default_rng(k)
    constraints, gold = None, rng.integers(0, k, size=(24, 16))
    if bilou:
        types = (k - 1) // 4
        constraints = bilou_constraints(["O"] + [f"{p}-e{i}" for i in range(types) for p in "BILU"])
        gold = _bilou_paths(types, (24, 16), rng)
    transitions = rng.normal(scale=0.5 if trained else 2.0, size=(k, k)).astype(np.float32)
    lengths = np.concatenate([[0, 16, 1], rng.integers(1, 17, size=21)])
    if trained:
        logits = rng.normal(size=(24, 16, k)) + 8.0 * np.eye(k)[gold]
    else:
        logits = rng.normal(scale=4.0, size=(24, 16, k))
    logits = logits.astype(np.float32)
    decoder = CRFDecoder(transitions, constraints)
    for marginals in (True, False):
        tags, confidences = decoder.decode(logits, lengths, marginals)
        for b, n in enumerate(lengths):
            for alone in (logits[b:b + 1], logits[b:b + 1, :max(n, 1)]):
                one_tags, one_confidences = decoder.decode(alone, lengths[b:b + 1], marginals)
                width = alone.shape[1]
                np.testing.assert_array_equal(one_tags[0], tags[b, :width])
                np.testing.assert_allclose(one_confidences[0], confidences[b, :width], rtol=0, atol=1e-7)
        assert marginals or not confidences.any()


def test_long_messages_fall_back_to_rescaled_marginals() -> None:
    """Long messages whose unscaled forward-backward would underflow, in a batch with short
    ones: ``_out_of_range`` names them (and only them), the decode takes the rescaled
    recursions for them, and every message still matches the reference."""
    vocabulary = ["O"] + [f"{p}-e{i}" for i in range(12) for p in "BILU"]
    constraints = bilou_constraints(vocabulary)
    rng = np.random.default_rng(5)
    transitions = rng.normal(scale=2.0, size=(49, 49)).astype(np.float32)
    lengths = np.array([120, 7, 90, 1])
    logits = rng.normal(scale=4.0, size=(4, 120, 49)).astype(np.float32)
    decoder = CRFDecoder(transitions, constraints)
    live = np.arange(120)[:, None] < lengths
    unary = decoder._unary(logits, lengths, 120, live)
    emit = np.exp(unary - unary.max(2, keepdims=True))
    unscaled = decoder._forward_backward(emit, lengths, True, False)
    np.testing.assert_array_equal(_out_of_range(unscaled, live), [0, 2])
    tags, confidences = decoder.decode(logits, lengths)
    penalised = transitions + np.where(constraints[0], 0, FORBIDDEN).astype(np.float32)
    for b, n in enumerate(lengths):
        unary = logits[b, :n].astype(np.float64)
        unary[0] += np.where(constraints[1], 0, FORBIDDEN)
        unary[-1] += np.where(constraints[2], 0, FORBIDDEN)
        expected_tags, expected_confidences = _reference_decode(unary, penalised)
        np.testing.assert_array_equal(tags[b, :n], expected_tags)
        np.testing.assert_allclose(confidences[b, :n], expected_confidences, atol=1e-6)


def test_graph_mode_with_dynamic_shapes(inputs) -> None:
    logits, transitions, tags = inputs
    spec_3d = tf.TensorSpec([None, None, K], tf.float32)
    spec_2d = tf.TensorSpec([None, None], tf.int32)
    spec_1d = tf.TensorSpec([None], tf.int32)

    @tf.function(input_signature=[spec_3d, spec_2d, spec_1d])
    def run(lg, tg, ln):
        return crf_log_likelihood(lg, tg, ln, transitions)

    np.testing.assert_allclose(
        run(logits, tags, LENGTHS).numpy(), crf_log_likelihood(logits, tags, LENGTHS, transitions).numpy(),
        rtol=1e-6,
    )
    # a single time step (T = 1) runs through the same graph
    ll1 = run(logits[:, :1], tags[:, :1], np.minimum(LENGTHS, 1))
    expected = logits[:, 0][np.arange(len(LENGTHS)), tags[:, 0]] - np.logaddexp.reduce(logits[:, 0], axis=-1)
    np.testing.assert_allclose(ll1.numpy(), np.where(LENGTHS > 0, expected, 0.0), rtol=1e-5)


def test_crf_layer_loss_gradient_and_decoder(inputs) -> None:
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
    # d(-log p)/d logits = marginals - one_hot(tags) / B at real positions, 0 at padding: the
    # loss's gradient agrees with the NumPy decode's marginals
    decoder = layer.decoder()
    marginals = _marginals(decoder, logits, LENGTHS)
    mask = (np.arange(T)[None, :] < LENGTHS[:, None])[..., None]
    expected_grad = (marginals - np.eye(K)[tags]) * mask / len(LENGTHS)
    np.testing.assert_allclose(g_logits.numpy(), expected_grad, atol=1e-5)


def test_large_logits_stay_finite() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=50.0, size=(2, 6, 5)).astype(np.float32)
    transitions = rng.normal(scale=5.0, size=(5, 5)).astype(np.float32)
    lengths = np.array([6, 3], np.int32)
    tags = rng.integers(0, 5, size=(2, 6)).astype(np.int32)
    ll = crf_log_likelihood(logits, tags, lengths, transitions).numpy()
    marg = _marginals(CRFDecoder(transitions, None), logits, lengths)
    assert np.isfinite(ll).all() and (ll <= 1e-4).all()
    np.testing.assert_allclose(marg[0].sum(-1), 1.0, rtol=1e-9)
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(marg[b, :n], _marginals_reference(logits[b, :n], transitions), atol=1e-9)


def _marginals_reference(logits: np.ndarray, transitions: np.ndarray) -> np.ndarray:
    w, unary = transitions.astype(np.float64), logits.astype(np.float64)
    alpha, beta = np.zeros_like(unary), np.zeros_like(unary)
    alpha[0] = unary[0]
    for t in range(1, len(unary)):
        alpha[t] = np.logaddexp.reduce(alpha[t - 1][:, None] + w, axis=0) + unary[t]
    for t in range(len(unary) - 2, -1, -1):
        beta[t] = np.logaddexp.reduce(w + unary[t + 1] + beta[t + 1], axis=1)
    return np.exp(alpha + beta - np.logaddexp.reduce(alpha[-1]))
