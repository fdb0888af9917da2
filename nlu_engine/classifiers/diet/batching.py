"""Featurized examples held once in flat arrays, and the batches DIET trains and predicts on.

Sparse features stay sparse end to end: a batch carries, for every non-zero entry, its column
id, its value and the flat position (``b * T + t``) it belongs to, so the network can gather
and sum rows of an embedding table (an embedding bag) instead of multiplying by a dense
vocabulary-sized matrix. Examples are grouped by length so little of a batch is padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse


@dataclass
class EncodedData:
    """All examples' inputs and targets, stacked once (not per epoch).

    ``seq`` holds one CSR row per token of every example, in order; ``offsets[i]`` is the first
    row of example ``i`` and ``lengths[i]`` its number of tokens. ``sent`` holds one CSR row
    per example. Dense features are optional float32 arrays aligned the same way. ``ragged``
    holds inputs of other lengths (a fine-tuned encoder's sub-tokens): one array per example.
    """

    lengths: np.ndarray  # [N] int32 tokens per example
    offsets: np.ndarray  # [N + 1] int64 first token row per example
    seq: scipy.sparse.csr_matrix  # [sum(lengths), V_seq]
    sent: scipy.sparse.csr_matrix  # [N, V_sent]
    dense_seq: np.ndarray | None  # [sum(lengths), D_seq]
    dense_sent: np.ndarray | None  # [N, D_sent]
    label_ids: np.ndarray  # [N] int32 (-1 when unknown)
    tags: dict[str, np.ndarray]  # name -> [sum(lengths)] int32 tag ids per token
    ragged: dict[str, list[np.ndarray]] = field(default_factory=dict)  # name -> [N] x [S_i, ...]

    def __len__(self) -> int:
        return int(self.lengths.shape[0])


def stack_blocks(
    blocks: list[list[scipy.sparse.spmatrix]], rows: np.ndarray, width: int
) -> scipy.sparse.csr_matrix:
    """One CSR matrix [sum(rows), width] from per-example lists of side-by-side blocks.

    Example ``i`` owns ``rows[i]`` rows; its blocks (each [rows[i], w_k], e.g. one per
    featurizer) sit next to each other, column offsets in list order; an example whose blocks
    do not have ``rows[i]`` rows or do not add up to ``width`` columns contributes zero rows.
    The same matrix as ``vstack`` of ``hstack``-ed blocks, built with a handful of NumPy calls
    instead of scipy constructors per block, whose fixed cost per call would dominate parsing
    a single message.
    """
    first_row = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
    row_ids, col_ids, values = [], [], []
    for i, example in enumerate(blocks):
        if not example or any(b.shape[0] != rows[i] for b in example):
            continue
        if sum(b.shape[1] for b in example) != width:
            continue
        offset = 0
        for block in example:
            csr = block if block.format == "csr" else block.tocsr()
            counts = np.diff(csr.indptr)
            row_ids.append(np.repeat(np.arange(first_row[i], first_row[i + 1]), counts))
            col_ids.append(csr.indices.astype(np.int64) + offset)
            values.append(csr.data)
            offset += block.shape[1]
    total = int(first_row[-1])
    if not row_ids:
        return scipy.sparse.csr_matrix((total, width), dtype=np.float32)
    row = np.concatenate(row_ids)
    col = np.concatenate(col_ids)
    data = np.concatenate(values).astype(np.float32)
    order = np.lexsort((col, row))  # by row, then column: sorted indices, as scipy's
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=total))])
    index_dtype = np.int32 if len(data) < 2**31 else np.int64
    return scipy.sparse.csr_matrix(
        (data[order], col[order].astype(index_dtype), indptr.astype(index_dtype)),
        shape=(total, width),
    )


def _gather_rows(
    matrix: scipy.sparse.csr_matrix, rows: np.ndarray, positions: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-zeros of ``matrix[rows]`` as (column ids, values, flat position of each entry)."""
    starts = matrix.indptr[rows]
    counts = matrix.indptr[rows + 1] - starts
    total = int(counts.sum())
    if total == 0:
        return (np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros(0, np.int32))
    # index of every non-zero entry: start of its row + its rank inside the row
    row_of_entry = np.repeat(np.arange(len(rows)), counts)
    rank = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    entries = starts[row_of_entry] + rank
    return (
        matrix.indices[entries].astype(np.int32),
        matrix.data[entries].astype(np.float32),
        positions[row_of_entry].astype(np.int32),
    )


def make_batch(data: EncodedData, index: np.ndarray) -> dict[str, np.ndarray]:
    """Inputs and targets of the examples ``index`` as padded / flat numpy arrays.

    Shapes: B = len(index), T = longest example in the batch (at least 1).
    """
    lengths = data.lengths[index]
    batch_size = len(index)
    max_len = max(int(lengths.max(initial=0)), 1)
    # token rows of each example, and their flat positions b * T + t
    token_rows = np.concatenate(
        [np.arange(data.offsets[i], data.offsets[i + 1]) for i in index]
    ).astype(np.int64) if batch_size else np.zeros(0, np.int64)
    example_of_token = np.repeat(np.arange(batch_size), lengths)
    step = np.arange(len(token_rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    flat = example_of_token * max_len + step

    seq_ids, seq_vals, seq_pos = _gather_rows(data.seq, token_rows, flat)
    sent_ids, sent_vals, sent_pos = _gather_rows(data.sent, index.astype(np.int64), np.arange(batch_size))
    batch: dict[str, np.ndarray] = {
        "lengths": lengths.astype(np.int32),  # [B]
        "seq_ids": seq_ids,  # [nnz]
        "seq_values": seq_vals,  # [nnz]
        "seq_positions": seq_pos,  # [nnz] in [0, B*T)
        "sent_ids": sent_ids,  # [nnz']
        "sent_values": sent_vals,  # [nnz']
        "sent_positions": sent_pos,  # [nnz'] in [0, B)
        "shape": np.array([batch_size, max_len], np.int32),
        "label_ids": data.label_ids[index].astype(np.int32),  # [B]
    }
    if data.dense_seq is not None:
        dense = np.zeros((batch_size * max_len, data.dense_seq.shape[1]), np.float32)
        dense[flat] = data.dense_seq[token_rows]
        batch["dense_seq"] = dense.reshape(batch_size, max_len, -1)  # [B, T, D]
    if data.dense_sent is not None:
        batch["dense_sent"] = data.dense_sent[index].astype(np.float32)  # [B, D']
    for name, tags in data.tags.items():
        padded = np.zeros(batch_size * max_len, np.int32)
        padded[flat] = tags[token_rows]
        batch[f"tags_{name}"] = padded.reshape(batch_size, max_len)  # [B, T]
    for name, arrays in data.ragged.items():
        batch[name] = pad_ragged([arrays[i] for i in index])  # [B, S, ...]
    return batch


def pad_ragged(arrays: list[np.ndarray]) -> np.ndarray:
    """[B, S, ...]: the arrays side by side, each zero-padded along its first axis to the
    longest (S at least 1)."""
    width = max(max((len(a) for a in arrays), default=0), 1)
    first = arrays[0]
    out = np.zeros((len(arrays), width, *first.shape[1:]), first.dtype)
    for i, array in enumerate(arrays):
        out[i, : len(array)] = array
    return out


def batch_size_for_epoch(batch_size: int | Sequence[int], epoch: int, epochs: int) -> int:
    """Rasa's linearly increasing batch size: [64, 256] ramps from 64 to 256 over training."""
    if isinstance(batch_size, int):
        return batch_size
    if len(batch_size) == 1 or epochs <= 1:
        return int(batch_size[0])
    low, high = batch_size[0], batch_size[-1]
    return int(low + epoch * (high - low) / (epochs - 1))


def balanced_order(label_ids: np.ndarray, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """Rasa's ``balanced`` strategy: visit labels in random order, each contributing a share
    proportional to its size (+1) per visit, until every label has been cycled once; rare labels
    are oversampled. Returns the example order for one epoch (may repeat examples).

    A visit takes at most the label's own examples: on data smaller than a batch (a first bot of
    32 examples against batches of 64 to 256) Rasa's share would put the same example in one
    batch up to eight times, a step several times as long for the same mean gradient. Data with
    at least about a batch of examples (every data set in BENCHMARKS.md) never reaches the cap
    and trains exactly as before."""
    labels = [int(lab) for lab in np.unique(label_ids)]
    groups = {lab: rng.permutation(np.flatnonzero(label_ids == lab)) for lab in labels}
    total = len(label_ids)
    position = dict.fromkeys(labels, 0)
    cycles = dict.fromkeys(labels, 0)
    skip = dict.fromkeys(labels, False)
    order: list[np.ndarray] = []
    while labels and min(cycles.values()) == 0:
        for lab in rng.permutation(labels):
            lab = int(lab)
            if cycles[lab] > 0:  # a label that has cycled once is visited every other time
                skip[lab] = not skip[lab]
                if skip[lab]:
                    continue
            need = min(int(len(groups[lab]) / total * batch_size) + 1, len(groups[lab]))
            while need > 0:
                group = groups[lab]
                chunk = group[position[lab] : position[lab] + need]
                order.append(chunk)
                position[lab] += len(chunk)
                need -= len(chunk)
                if position[lab] >= len(group):  # this label completed a cycle
                    cycles[lab] += 1
                    position[lab] = 0
                    groups[lab] = rng.permutation(group)
    return np.concatenate(order) if order else np.zeros(0, np.int64)


def length_grouped_batches(
    order: np.ndarray, lengths: np.ndarray, batch_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Cut ``order`` into batches of similar lengths: sort chunks of 50 batches by length,
    cut, then shuffle the batches. Keeps the epoch's randomness, wastes little on padding."""
    batches: list[np.ndarray] = []
    chunk = batch_size * 50
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches.extend(part[i : i + batch_size] for i in range(0, len(part), batch_size))
    rng.shuffle(batches)  # type: ignore[arg-type]
    return batches
