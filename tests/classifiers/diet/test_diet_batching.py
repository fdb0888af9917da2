"""Stacking per-example feature blocks into one CSR matrix, and the batches cut from it."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from nlu_engine.classifiers.diet.batching import EncodedData, balanced_order, make_batch, stack_blocks


def _random_csr(rng: np.random.Generator, rows: int, cols: int) -> scipy.sparse.csr_matrix:
    dense = rng.integers(0, 3, (rows, cols)) * (rng.random((rows, cols)) < 0.3)
    return scipy.sparse.csr_matrix(dense.astype(np.float32))


def test_stack_blocks_equals_vstack_of_hstacks() -> None:
    rng = np.random.default_rng(0)
    rows = np.array([3, 1, 4, 2])
    blocks = [[_random_csr(rng, n, 5), _random_csr(rng, n, 7)] for n in rows]
    stacked = stack_blocks(blocks, rows, 12)
    expected = scipy.sparse.vstack([scipy.sparse.hstack(b) for b in blocks]).toarray()
    assert stacked.shape == (10, 12)
    np.testing.assert_array_equal(stacked.toarray(), expected)
    assert stacked.has_sorted_indices
    assert stacked.dtype == np.float32


def test_stack_blocks_gives_zero_rows_for_missing_or_misshapen_features() -> None:
    rng = np.random.default_rng(1)
    rows = np.array([2, 3, 1])
    good = [_random_csr(rng, 2, 4), _random_csr(rng, 2, 2)]
    wrong_rows = [_random_csr(rng, 2, 4), _random_csr(rng, 2, 2)]  # 2 rows, example has 3
    stacked = stack_blocks([good, wrong_rows, []], rows, 6).toarray()
    np.testing.assert_array_equal(stacked[:2], scipy.sparse.hstack(good).toarray())
    assert not stacked[2:].any()
    assert stack_blocks([[], []], np.array([1, 2]), 6).shape == (3, 6)


def test_make_batch_flat_positions_follow_the_padded_layout() -> None:
    rows = np.array([2, 1])
    seq = stack_blocks([[scipy.sparse.csr_matrix(np.eye(2, 3, dtype=np.float32))],
                        [scipy.sparse.csr_matrix(np.array([[0, 0, 5]], np.float32))]], rows, 3)
    sent = stack_blocks([[scipy.sparse.csr_matrix(np.ones((1, 3), np.float32))], []],
                        np.ones(2, np.int64), 3)
    data = EncodedData(lengths=rows.astype(np.int32), offsets=np.array([0, 2, 3]), seq=seq,
                       sent=sent, dense_seq=None, dense_sent=None,
                       label_ids=np.array([0, 1], np.int32), tags={})
    batch = make_batch(data, np.array([1, 0]))
    assert batch["shape"].tolist() == [2, 2]
    # example 1 (one token, column 2 = 5) first, then example 0's tokens at 2 * 1 + t
    assert batch["seq_ids"].tolist() == [2, 0, 1]
    assert batch["seq_values"].tolist() == [5.0, 1.0, 1.0]
    assert batch["seq_positions"].tolist() == [0, 2, 3]
    assert batch["sent_positions"].tolist() == [1, 1, 1]


def test_ragged_inputs_are_padded_per_batch() -> None:
    """A fine-tuned encoder's per-example inputs (their own lengths) come zero-padded."""
    states = [np.full((n, 2), value, np.float32) for n, value in ((3, 1.0), (5, 2.0), (1, 3.0))]
    data = EncodedData(lengths=np.array([1, 1, 1], np.int32), offsets=np.array([0, 1, 2, 3]),
                       seq=scipy.sparse.csr_matrix((3, 4), dtype=np.float32),
                       sent=scipy.sparse.csr_matrix((3, 4), dtype=np.float32), dense_seq=None,
                       dense_sent=None, label_ids=np.zeros(3, np.int32), tags={},
                       ragged={"enc_states": states,
                               "enc_mask": [np.ones(len(s), np.float32) for s in states]})
    batch = make_batch(data, np.array([2, 0]))
    assert batch["enc_states"].shape == (2, 3, 2) and batch["enc_mask"].tolist() == [[1, 0, 0], [1, 1, 1]]
    np.testing.assert_array_equal(batch["enc_states"][0], [[3, 3], [0, 0], [0, 0]])
    np.testing.assert_array_equal(batch["enc_states"][1], states[0])


def _data(lengths: list[int], subtokens: list[int] | None) -> EncodedData:
    n = len(lengths)
    ragged = {} if subtokens is None else {"enc_mask": [np.ones(s, np.float32) for s in subtokens]}
    return EncodedData(lengths=np.array(lengths, np.int32), offsets=np.concatenate([[0], np.cumsum(lengths)]),
                       seq=scipy.sparse.csr_matrix((sum(lengths), 4), dtype=np.float32),
                       sent=scipy.sparse.csr_matrix((n, 4), dtype=np.float32), dense_seq=None,
                       dense_sent=None, label_ids=np.zeros(n, np.int32), tags={}, ragged=ragged)


def test_batches_group_by_tokens_or_by_a_fine_tuned_encoders_sub_tokens() -> None:
    from nlu_engine.classifiers.diet.training import grouping_lengths

    np.testing.assert_array_equal(grouping_lengths(_data([3, 1, 2], None)), [3, 1, 2])
    # sub-tokens first, tokens second: 2 tokens in 9 sub-tokens sort after 3 tokens in 4
    key = grouping_lengths(_data([3, 2, 2, 1], [4, 9, 4, 4]))
    assert list(np.argsort(key, kind="stable")) == [3, 2, 0, 1]


def _spec(transformer_layers: int):
    from types import SimpleNamespace

    return SimpleNamespace(
        training=SimpleNamespace(batch_size=[8, 8], batch_strategy="balanced", drop_small_last_batch=False),
        network=SimpleNamespace(intent_classification=True, number_of_transformer_layers=transformer_layers),
    )


def test_without_a_transformer_balanced_batches_keep_their_mix_of_labels() -> None:
    """As Rasa's: consecutive cuts of the balanced order. Sorting by length (which saves padding
    under a transformer) made, where length follows the label, batches of one label each."""
    from nlu_engine.classifiers.diet.training import epoch_batches

    lengths = [1 + label for label in range(4) for _ in range(16)]  # label k: k + 1 tokens
    data = _data(lengths, None)
    data.label_ids = np.repeat(np.arange(4, dtype=np.int32), 16)
    mixed = epoch_batches(_spec(0), data, 0, 1, np.random.default_rng(0))
    assert sum(len(b) for b in mixed) >= 64
    assert all(len(np.unique(data.label_ids[b])) >= 3 for b in mixed)
    # Rasa's number of batches, of even sizes: no last batch of a few examples of one label
    assert len(mixed) == -(-sum(len(b) for b in mixed) // 8)
    assert max(len(b) for b in mixed) - min(len(b) for b in mixed) <= 1
    grouped = epoch_batches(_spec(2), data, 0, 1, np.random.default_rng(0))
    assert sum(len(np.unique(data.label_ids[b])) == 1 for b in grouped) >= len(grouped) - 4


def test_a_balanced_epoch_of_a_tiny_bot_holds_each_example_once_a_visit() -> None:
    """32 examples against a batch of 256: Rasa's share would take 49 of a 6-example label a
    visit (each example eight times in one batch); capped at the label's own, the epoch is the
    data once, every example in it."""
    labels = np.repeat(np.arange(5), [6, 6, 7, 7, 6])
    order = balanced_order(labels, 256, np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(32))


def test_a_balanced_epoch_of_data_larger_than_a_batch_is_rasas() -> None:
    """640 examples, 64 labels of 10, batches of 256: a visit takes 5 of a label, under its 10,
    so the cap changes nothing (the order is the same draw as without it)."""
    labels = np.repeat(np.arange(64), 10)
    order = balanced_order(labels, 256, np.random.default_rng(3))
    counts = np.bincount(order, minlength=640)
    assert counts.min() >= 1 and len(order) >= 640
    # every visit takes int(10 / 640 * 256) + 1 = 5 examples of its label, so the epoch is a
    # whole number of such visits
    assert len(order) % 5 == 0
