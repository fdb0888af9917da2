"""SparseEmbeddingBag: the sum over non-zero columns, and its two kinds of L2 penalty."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from nlu_engine.classifiers.diet.model import SparseEmbeddingBag, all_labels_as_negatives
from nlu_engine.classifiers.diet.optimizer import LazyAdam


def _bag(all_rows: bool) -> SparseEmbeddingBag:
    keras.utils.set_random_seed(0)
    return SparseEmbeddingBag(vocab=10, units=4, reg_lambda=0.5, drop_rate=0.0,
                              mode="all_rows" if all_rows else "touched_rows")


def test_bag_sums_weighted_rows_per_position() -> None:
    bag = _bag(all_rows=False)
    ids = tf.constant([1, 3, 3, 7])
    values = tf.constant([1.0, 2.0, 0.5, 1.0])
    positions = tf.constant([0, 0, 1, 2])
    out = bag(ids, values, positions, num_positions=3).numpy()  # [3, 4]
    kernel = bag.kernel.numpy()
    np.testing.assert_allclose(out[0], kernel[1] + 2.0 * kernel[3], rtol=1e-6)
    np.testing.assert_allclose(out[1], 0.5 * kernel[3], rtol=1e-6)
    np.testing.assert_allclose(out[2], kernel[7], rtol=1e-6)


def test_touched_rows_penalty_is_sparse_and_covers_each_row_once() -> None:
    bag = _bag(all_rows=False)
    ids = tf.constant([2, 5, 2])
    with tf.GradientTape() as tape:
        penalty = bag.row_penalty(ids)
    kernel = bag.kernel.numpy()
    expected = 0.5 * (np.square(kernel[2]).sum() + np.square(kernel[5]).sum())
    np.testing.assert_allclose(penalty.numpy(), expected, rtol=1e-6)
    grad = tape.gradient(penalty, bag.kernel)
    assert isinstance(grad, tf.IndexedSlices)  # the lazy optimizer updates two rows only
    assert sorted(set(grad.indices.numpy().tolist())) == [2, 5]


def test_all_rows_l2_in_the_optimizer_equals_differentiating_the_whole_table() -> None:
    """Rasa's dense L2 on every row, applied by LazyAdam(l2=...), is the same Adam step as
    differentiating loss + l2 * sum(W^2) on the tape, while the tape's gradient stays sparse."""
    ids = tf.constant([2, 5, 2])
    values = tf.constant([1.0, 0.5, 2.0])
    positions = tf.constant([0, 0, 1])
    target = tf.constant(np.random.default_rng(3).normal(size=(2, 4)).astype(np.float32))

    def loss_of(bag: SparseEmbeddingBag) -> tf.Tensor:
        out = bag(ids, values, positions, num_positions=2)
        return tf.reduce_sum(tf.square(out - target)) + bag.row_penalty(ids)

    # reference: whole-table penalty on the tape, dense gradient, plain Adam
    reference = _bag(all_rows=False)
    reference.reg_lambda = 0.0
    dense_adam = LazyAdam([reference.kernel, reference.bias], 0.01)
    # ours: all_rows, the optimizer adds 2 * l2 * W
    ours = _bag(all_rows=True)
    assert float(ours.row_penalty(ids)) == 0.0
    np.testing.assert_allclose(
        ours.table_penalty().numpy(), 0.5 * np.square(ours.kernel.numpy()).sum(), rtol=1e-6
    )
    lazy_adam = LazyAdam([ours.kernel, ours.bias], 0.01, l2=[(ours.kernel, 0.5)])
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = loss_of(reference) + 0.5 * tf.reduce_sum(tf.square(reference.kernel))
        grads = tape.gradient(loss, [reference.kernel, reference.bias])
        dense_adam.apply([tf.convert_to_tensor(g) for g in grads])
        with tf.GradientTape() as tape:
            loss = loss_of(ours)
        grads = tape.gradient(loss, [ours.kernel, ours.bias])
        assert isinstance(grads[0], tf.IndexedSlices)
        lazy_adam.apply(grads)
    np.testing.assert_allclose(ours.kernel.numpy(), reference.kernel.numpy(), rtol=1e-5, atol=1e-6)
    # untouched rows moved too (decayed), unlike with touched_rows
    assert not np.allclose(ours.kernel.numpy()[0], _bag(all_rows=True).kernel.numpy()[0])


def test_no_penalty_without_regularization() -> None:
    bag = SparseEmbeddingBag(vocab=4, units=2, reg_lambda=0.0, drop_rate=0.0, mode="all_rows")
    assert float(bag.row_penalty(tf.constant([0, 1]))) == 0.0


def test_two_tables_decayed_whole_in_a_compiled_step() -> None:
    """Two tables decayed whole, one after the other, in one compiled step (rows repeated in the
    batch, different constants) take the same steps as plain Adam on the tape-differentiated
    loss + l2 * sum(W^2) of each."""
    rng = np.random.default_rng(7)
    start = [rng.normal(size=(6, 3)).astype(np.float32) for _ in range(2)]
    rows = tf.constant([1, 4, 1, 0])
    values = [tf.constant(rng.normal(size=(4, 3)).astype(np.float32)) for _ in range(2)]
    l2 = (0.3, 0.05)

    def loss_of(tables: list) -> tf.Tensor:
        return sum(tf.reduce_sum(tf.gather(t, rows) * v) for t, v in zip(tables, values, strict=True))

    reference = [keras.Variable(s) for s in start]
    plain = LazyAdam(reference, 0.01)
    ours = [keras.Variable(s) for s in start]
    lazy = LazyAdam(ours, 0.01, l2=list(zip(ours, l2, strict=True)))

    @tf.function
    def our_step() -> None:
        with tf.GradientTape() as tape:
            loss = loss_of(ours)
        grads = tape.gradient(loss, ours)
        assert all(isinstance(g, tf.IndexedSlices) for g in grads)
        lazy.apply(grads)

    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = loss_of(reference) + sum(
                c * tf.reduce_sum(tf.square(t)) for t, c in zip(reference, l2, strict=True)
            )
        plain.apply([tf.convert_to_tensor(g) for g in tape.gradient(loss, reference)])
        our_step()
    for a, b in zip(ours, reference, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_all_labels_as_negatives_auto_when_labels_outnumber_the_sample() -> None:
    assert all_labels_as_negatives("auto", "cross_entropy", 64, 20)
    assert not all_labels_as_negatives("auto", "cross_entropy", 20, 20)
    assert not all_labels_as_negatives("auto", "cross_entropy", 7, 20)
    assert all_labels_as_negatives(True, "cross_entropy", 7, 20)
    assert not all_labels_as_negatives(False, "cross_entropy", 64, 20)
    # the margin loss always samples
    assert not all_labels_as_negatives(True, "margin", 64, 20)
    assert not all_labels_as_negatives("auto", "margin", 64, 20)


def _encoded(lengths: list[int], vocab: int):
    """Random sparse token and sentence features of messages of ``lengths`` tokens."""
    import scipy.sparse

    from nlu_engine.classifiers.diet.batching import EncodedData

    rng = np.random.default_rng(0)
    n = len(lengths)
    seq = scipy.sparse.random(sum(lengths), vocab, density=0.5, format="csr", random_state=1,
                              dtype=np.float32)
    sent = scipy.sparse.random(n, vocab, density=0.5, format="csr", random_state=2, dtype=np.float32)
    return EncodedData(lengths=np.array(lengths, np.int32),
                       offsets=np.concatenate([[0], np.cumsum(lengths)]), seq=seq, sent=sent,
                       dense_seq=None, dense_sent=None,
                       label_ids=rng.integers(0, 3, n).astype(np.int32), tags={})


def test_without_a_transformer_the_token_positions_are_skipped_with_the_same_result() -> None:
    """A selector's network (no transformer, no tags) reads the sentence position alone: going
    through the token positions too, as a transformer network must, gives the same similarities."""
    from nlu_engine.classifiers.diet.batching import make_batch
    from nlu_engine.classifiers.diet.model import DIETNetwork
    from nlu_engine.classifiers.diet.spec import TrainingOptions, TrainingSpec, Vocabularies
    from nlu_engine.classifiers.response_selector import ResponseSelector

    keras.utils.set_random_seed(0)
    component = ResponseSelector(hidden_layers_sizes={"text": [16], "label": [8]})
    data = Vocabularies(seq_vocab=6, sent_vocab=6, dense_seq_dim=0, dense_sent_dim=0,
                        intents=("a", "b", "c"), tags={}, bilou=True)
    spec = TrainingSpec(name="ResponseSelector", network=component.network_params(),
                        training=TrainingOptions.from_config(component.config), data=data,
                        label_features=np.eye(3, dtype=np.float32))
    network = DIETNetwork(spec)
    assert network.sentence_only
    batch = {k: tf.constant(v) for k, v in make_batch(_encoded([3, 1, 4, 2], vocab=6), np.arange(4)).items()}
    skipped = network.predict_batch(batch)["intent_sims"].numpy()
    network.sentence_only = False
    full = network.predict_batch(batch)["intent_sims"].numpy()
    np.testing.assert_allclose(skipped, full, rtol=1e-5, atol=1e-5)
