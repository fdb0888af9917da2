"""DIET's training loop and compiled prediction.

One compiled (``tf.function``) train step over batches grouped by length; the training set is
featurized and encoded once (``EncodedData``), not per epoch. Optional hold-out evaluation
every ``evaluate_every_number_of_epochs`` with best-checkpoint restore and early stopping.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from nlu_engine.classifiers.diet.batching import (
    EncodedData,
    balanced_order,
    batch_size_for_epoch,
    length_grouped_batches,
    make_batch,
)
from nlu_engine.classifiers.diet.model import DIETNetwork, NetworkSpec
from nlu_engine.classifiers.diet.optimizer import LazyAdam
from nlu_engine.training_data.bilou import bilou_constraints, f1_score

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.classifiers.diet.component import DIETClassifier

# training examples decoded for the tag F1 the progress bar shows (see ``fit``)
MONITORED_EXAMPLES = 512


def input_signature(component: DIETClassifier, with_tags: bool) -> dict[str, tf.TensorSpec]:
    """The dynamic-shape signature of a batch (see ``batching.make_batch``)."""
    i32, f32 = tf.int32, tf.float32
    spec = {
        "lengths": tf.TensorSpec([None], i32),
        "seq_ids": tf.TensorSpec([None], i32),
        "seq_values": tf.TensorSpec([None], f32),
        "seq_positions": tf.TensorSpec([None], i32),
        "sent_ids": tf.TensorSpec([None], i32),
        "sent_values": tf.TensorSpec([None], f32),
        "sent_positions": tf.TensorSpec([None], i32),
        "shape": tf.TensorSpec([2], i32),
        "label_ids": tf.TensorSpec([None], i32),
    }
    if component.dense_seq_dim_:
        spec["dense_seq"] = tf.TensorSpec([None, None, component.dense_seq_dim_], f32)
    if component.dense_sent_dim_:
        spec["dense_sent"] = tf.TensorSpec([None, component.dense_sent_dim_], f32)
    if with_tags:
        for kind in component.tag_vocab_:
            spec[f"tags_{kind}"] = tf.TensorSpec([None, None], i32)
    return spec


MIN_STEPS, MIN_EPOCHS, MAX_EPOCHS = 1200, 20, 300


def resolve_epochs(epochs: int | None, batch_size: int | list[int], examples: int) -> int:
    """``epochs`` as given, or by default enough for about 1,200 optimizer steps: 20 epochs on
    SNIPS or NLU-Evaluation-Data, up to 300 on a small assistant's data (which has only one or two
    batches an epoch)."""
    if epochs is not None:
        return epochs
    sizes = [batch_size] if isinstance(batch_size, int) else batch_size
    mean_batch = (min(sizes) + max(sizes)) / 2
    steps_per_epoch = max(1, -(-examples // int(mean_batch)))
    return int(min(MAX_EPOCHS, max(MIN_EPOCHS, -(-MIN_STEPS // steps_per_epoch))))


def build_network(
    component: DIETClassifier, params: dict[str, Any], label_features: np.ndarray
) -> DIETNetwork:
    """Construct the network and create every weight (one dummy prediction, no training)."""
    spec = NetworkSpec(
        seq_vocab=component.seq_vocab_,
        sent_vocab=component.sent_vocab_,
        dense_seq_dim=component.dense_seq_dim_,
        dense_sent_dim=component.dense_sent_dim_,
        label_features=label_features,
        num_tags={kind: len(v) for kind, v in component.tag_vocab_.items()},
        constraints={
            kind: bilou_constraints(v)
            for kind, v in component.tag_vocab_.items()
            if component.config.BILOU_flag
        },
    )
    network = DIETNetwork(spec, params)
    dummy = {
        "lengths": np.ones(1, np.int32),
        "seq_ids": np.zeros(0, np.int32),
        "seq_values": np.zeros(0, np.float32),
        "seq_positions": np.zeros(0, np.int32),
        "sent_ids": np.zeros(0, np.int32),
        "sent_values": np.zeros(0, np.float32),
        "sent_positions": np.zeros(0, np.int32),
        "shape": np.array([1, 1], np.int32),
        "label_ids": np.zeros(1, np.int32),
    }
    if spec.dense_seq_dim:
        dummy["dense_seq"] = np.zeros((1, 1, spec.dense_seq_dim), np.float32)
    if spec.dense_sent_dim:
        dummy["dense_sent"] = np.zeros((1, spec.dense_sent_dim), np.float32)
    network.predict_batch({k: tf.constant(v) for k, v in dummy.items()})
    if network.use_mlm:  # training-only layers, built so that weight lists always match
        embed_input = tf.zeros((1, int(network.mask_vector.shape[-1])))
        network.mlm_in_embed(embed_input)
        network.mlm_out_embed(tf.zeros((1, params["transformer_size"])))
    return network


def compiled_predict(network: DIETNetwork, component: DIETClassifier):
    signature = input_signature(component, with_tags=False)
    if component.config.run_eagerly:
        return lambda batch: network.predict_batch({k: tf.constant(v) for k, v in batch.items()})
    function = tf.function(network.predict_batch, input_signature=[signature])
    return lambda batch: function({k: batch[k] for k in signature})


def decodes_after(epoch: int, epochs: int) -> bool:
    """Whether the tag F1 is decoded after ``epoch`` (from 0): about 20 times, and at the end."""
    return (epoch + 1) % max(1, epochs // 20) == 0 or epoch == epochs - 1


def _holdout(labels: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """A stratified hold-out of about ``size`` examples; labels seen once stay in training."""
    if size <= 0:
        return np.zeros(0, np.int64)
    fraction = min(size / len(labels), 0.5)
    picked = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        if len(members) < 2:
            continue
        take = max(1, round(len(members) * fraction))
        picked.append(rng.choice(members, size=min(take, len(members) - 1), replace=False))
    return np.sort(np.concatenate(picked)) if picked else np.zeros(0, np.int64)


def _subset(data: EncodedData, index: np.ndarray) -> EncodedData:
    rows = np.concatenate([np.arange(data.offsets[i], data.offsets[i + 1]) for i in index])
    lengths = data.lengths[index]
    return EncodedData(
        lengths=lengths,
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        seq=data.seq[rows],
        sent=data.sent[index],
        dense_seq=None if data.dense_seq is None else data.dense_seq[rows],
        dense_sent=None if data.dense_sent is None else data.dense_sent[index],
        label_ids=data.label_ids[index],
        tags={k: v[rows] for k, v in data.tags.items()},
    )


def _return_free_memory() -> None:
    """Hand the heap pages freed during an epoch back to the OS (glibc only; else nothing).

    Batches of changing shapes leave glibc's arenas holding freed memory that still counts
    as resident; trimming once an epoch keeps peak memory at what is actually in use.
    """
    _glibc("malloc_trim", 0)


def _glibc(function: str, *args: int) -> None:
    """Call a glibc allocator function; elsewhere (no glibc) do nothing."""
    with contextlib.suppress(OSError, AttributeError):
        getattr(ctypes.CDLL("libc.so.6"), function)(*args)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters


@contextlib.contextmanager
def _large_blocks_on_heap():
    """Let glibc reuse freed table-sized blocks during training instead of mapping new ones.

    A 70k x 128 input table is 36 MB, above glibc's largest automatic mmap threshold (32 MB):
    each of its per-step temporaries (the whole-table L2 gradient, the summed step) was a fresh
    mapping whose pages were faulted in and zeroed, then unmapped. Served from the heap they are
    reused: SNIPS's 20 epochs took 711 s instead of 769 s, its early small-batch epochs ~20 %
    less (AMD EPYC, 2 cores). Memory freed during an epoch is handed back at its end
    (``_return_free_memory``). Afterwards the thresholds are set to glibc's own dynamic ceiling
    (32 MB mmap, 64 MB trim), not left at the training values. Used as ``fit``'s decorator.
    """
    _glibc("mallopt", _M_MMAP_THRESHOLD, 512 << 20)
    _glibc("mallopt", _M_TRIM_THRESHOLD, 1 << 30)
    try:
        yield
    finally:
        _glibc("mallopt", _M_MMAP_THRESHOLD, 32 << 20)
        _glibc("mallopt", _M_TRIM_THRESHOLD, 64 << 20)
        _return_free_memory()


def _add_gradients(a: Any, b: Any) -> Any:
    """Sum of two gradients of one variable: dense tensors add, IndexedSlices concatenate."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, tf.IndexedSlices) and isinstance(b, tf.IndexedSlices):
        return tf.IndexedSlices(
            tf.concat([a.values, b.values], 0), tf.concat([a.indices, b.indices], 0), a.dense_shape
        )
    return tf.convert_to_tensor(a) + tf.convert_to_tensor(b)


def evaluate(predict, data: EncodedData, kinds: list[str]) -> dict[str, float]:
    """Intent accuracy and token-level entity F1 (non-O tags) on encoded examples."""
    correct, total = 0, 0
    counts = {k: np.zeros(3) for k in kinds}  # true positives, predicted, gold
    for start in range(0, len(data), 256):
        index = np.arange(start, min(start + 256, len(data)))
        batch = make_batch(data, index)
        out = {k: v.numpy() for k, v in predict(batch).items()}
        if "intent_sims" in out:
            correct += int((out["intent_sims"].argmax(-1) == batch["label_ids"]).sum())
            total += len(index)
        real = np.arange(batch["shape"][1])[None, :] < batch["lengths"][:, None]
        for kind in kinds:
            pred, gold = out[f"tags_{kind}"], batch[f"tags_{kind}"]
            counts[kind] += [
                (real & (pred == gold) & (gold > 0)).sum(),
                (real & (pred > 0)).sum(),
                (real & (gold > 0)).sum(),
            ]
    result = {"i_acc": correct / total if total else 0.0}
    for kind, (tp, npred, ngold) in counts.items():
        result[f"{kind[0]}_f1"] = f1_score(tp, ngold, npred)
    return result


@_large_blocks_on_heap()
def fit(
    component: DIETClassifier,
    params: dict[str, Any],
    encoded: EncodedData,
    label_features: np.ndarray,
) -> tuple[DIETNetwork, dict[str, Any]]:
    """Train a new network on ``encoded``; returns it and the per-epoch history."""
    from tqdm import tqdm

    seed = component.config.random_seed
    rng = np.random.default_rng(seed)
    holdout = _holdout(encoded.label_ids, component.config.evaluate_on_number_of_examples, rng)
    evaluation = None
    if len(holdout):
        keep = np.setdiff1d(np.arange(len(encoded)), holdout)
        evaluation = _subset(encoded, holdout)
        encoded = _subset(encoded, keep)

    network = build_network(component, params, label_features)
    epochs = resolve_epochs(component.config.epochs, component.config.batch_size, len(encoded))
    steps_per_epoch = [
        max(1, -(-len(encoded) // batch_size_for_epoch(component.config.batch_size, e, epochs)))
        for e in range(epochs)
    ]
    learning_rate: Any = component.config.learning_rate
    if component.config.learning_rate_schedule == "linear_decay":
        total_steps = float(max(1, sum(steps_per_epoch)))
        start = component.config.learning_rate

        @tf.autograph.experimental.do_not_convert
        def learning_rate(step: tf.Tensor) -> tf.Tensor:  # linear from lr to lr / 10
            progress = tf.minimum(tf.cast(step, tf.float32) / total_steps, 1.0)
            return start * (1.0 - 0.9 * progress)

    variables = network.trainable_variables
    optimizer = LazyAdam(variables, learning_rate, l2=network.table_l2())

    def gradients_of(batch: dict[str, tf.Tensor], weight: tf.Tensor):
        """Gradients of the batch's loss times ``weight``, and the batch's metrics."""
        with tf.GradientTape() as tape:
            out = network.losses_and_metrics(batch, training=True)
            regularization = tf.add_n(network.losses) if network.losses else 0.0
            total = out["loss"] + regularization
            weighted = total * weight  # recorded on the tape, so it is differentiated
        # the whole-table L2 (all_rows) is differentiated by the optimizer, once per step, and
        # added to the reported loss once per epoch (a pass over both tables: not per batch)
        out["t_loss"] = total
        return tape.gradient(weighted, variables), out

    def train_step(batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        gradients, out = gradients_of(batch, tf.constant(1.0))
        optimizer.apply(gradients)
        return out

    # A batch larger than max_micro_batch_size is split: each part's gradient (its loss weighted
    # by its share of the batch) is summed and applied once, so the update is the whole batch's
    # while only one part's activations are alive (SNIPS at 256: ~0.4 GB less peak memory).
    def apply_gradients(gradients: list) -> None:
        optimizer.apply(gradients)

    signature = input_signature(component, with_tags=True)
    step, part_gradients = train_step, gradients_of
    if not component.config.run_eagerly:
        step = tf.function(train_step, input_signature=[signature])
        part_gradients = tf.function(
            gradients_of, input_signature=[signature, tf.TensorSpec([], tf.float32)]
        )
        apply_gradients = tf.function(apply_gradients, reduce_retracing=True)
    micro = component.config.max_micro_batch_size
    table_penalty_of = network.table_penalty
    if not component.config.run_eagerly:
        table_penalty_of = tf.function(network.table_penalty)
    table_penalty = float(table_penalty_of())

    def run_batch(index: np.ndarray) -> list[dict[str, tf.Tensor]]:
        if not micro or len(index) <= micro:
            return [step({k: tf.constant(v) for k, v in make_batch(encoded, index).items()})]
        parts = np.array_split(index, -(-len(index) // micro))
        total_grads: list = []
        outs = []
        for part in parts:
            batch = {k: tf.constant(v) for k, v in make_batch(encoded, part).items()}
            grads, out = part_gradients(batch, tf.constant(len(part) / len(index), tf.float32))
            outs.append(out)
            total_grads = list(grads) if not total_grads else [
                _add_gradients(a, b) for a, b in zip(total_grads, grads, strict=True)
            ]
        apply_gradients(total_grads)
        return outs
    predict = compiled_predict(network, component)
    kinds = list(component.tag_vocab_)
    # The tag F1 of the progress bar and history is Viterbi decoding, as in prediction, of a
    # fixed sample of training examples, on about 20 epochs of a training. The argmax of the tag
    # logits, which each step could afford, says little under a CRF: it read 0.45 where decoding
    # scored 0.98 (NLU-Evaluation-Data KFold_1, 20 epochs).
    monitor = None
    if kinds:
        size = min(MONITORED_EXAMPLES, len(encoded))
        sample = np.random.default_rng(seed).choice(len(encoded), size, replace=False)
        monitor = _subset(encoded, np.sort(sample))
    decoded: dict[str, float] = {}
    writer = None
    if component.config.tensorboard_log_directory:
        writer = tf.summary.create_file_writer(component.config.tensorboard_log_directory)

    history: dict[str, Any] = {"epochs": [], "evaluations": []}
    best_score, best_weights, best_epoch, since_best = -1.0, None, -1, 0
    bar = tqdm(range(epochs), desc=f"{component.component_name()} epochs", file=sys.stderr,
               disable=not component.config.show_progress,
               dynamic_ncols=True)
    global_step = 0
    for epoch in bar:
        batch_size = batch_size_for_epoch(component.config.batch_size, epoch, epochs)
        if component.config.batch_strategy == "balanced" and component.config.intent_classification:
            order = balanced_order(encoded.label_ids, batch_size, rng)
        else:
            order = rng.permutation(len(encoded))
        batches = length_grouped_batches(order, encoded.lengths, batch_size, rng)
        if component.config.drop_small_last_batch:
            batches = [b for b in batches if len(b) >= batch_size // 2] or batches
        sums: dict[str, float] = {}
        epoch_start = time.perf_counter()
        steps = 0
        for index in batches:
            for out in run_batch(index):  # the batch, or its parts (metrics count per part)
                for key, value in out.items():
                    sums[key] = sums.get(key, 0.0) + float(value)
                steps += 1
            global_step += 1
            if writer and component.config.tensorboard_log_level in ("batch", "minibatch"):
                with writer.as_default():
                    # the table penalty as at the end of the previous epoch
                    tf.summary.scalar("t_loss", float(out["t_loss"]) + table_penalty,
                                      step=global_step)
        table_penalty = float(table_penalty_of())  # at the epoch's end
        metrics = {"t_loss": sums.get("t_loss", 0.0) / max(steps, 1) + table_penalty}
        if "i_acc" in sums:
            metrics["i_acc"] = sums["i_acc"] / steps
        if monitor is not None and decodes_after(epoch, epochs):
            scores = evaluate(predict, monitor, kinds)
            decoded = {f"{kind[0]}_f1": float(scores[f"{kind[0]}_f1"]) for kind in kinds}
            metrics.update(decoded)
        if "m_acc" in sums:
            metrics["m_acc"] = sums["m_acc"] / steps
        _return_free_memory()
        seconds = round(time.perf_counter() - epoch_start, 3)
        history["epochs"].append({**{k: round(v, 4) for k, v in metrics.items()}, "seconds": seconds})
        bar.set_postfix({k: f"{v:.3f}" for k, v in {**decoded, **metrics}.items()})
        if writer:
            with writer.as_default():
                for key, value in metrics.items():
                    tf.summary.scalar(key, value, step=epoch)

        every = component.config.evaluate_every_number_of_epochs
        last = epoch == epochs - 1
        if evaluation is not None and ((every > 0 and (epoch + 1) % every == 0) or last):
            scores = evaluate(predict, evaluation, kinds)
            history["evaluations"].append({"epoch": epoch + 1, **scores})
            score = float(np.mean(list(scores.values())))
            tqdm.write(
                f"epoch {epoch + 1}: hold-out "
                + ", ".join(f"{k} {v:.3f}" for k, v in scores.items()),
                file=sys.stderr,
            ) if component.config.show_progress else None
            if writer:
                with writer.as_default():
                    for key, value in scores.items():
                        tf.summary.scalar(f"val_{key}", value, step=epoch)
            if score > best_score:
                best_score, best_epoch, since_best = score, epoch + 1, 0
                if component.config.checkpoint_model or component.config.early_stopping_patience:
                    best_weights = network.get_weights()
            else:
                since_best += 1
                patience = component.config.early_stopping_patience
                if patience and since_best >= patience:
                    history["stopped_early_at"] = epoch + 1
                    break
    bar.close()
    config = component.config
    if best_weights is not None and (config.checkpoint_model or config.early_stopping_patience):
        network.set_weights(best_weights)
        history["restored_epoch"] = best_epoch
    if writer:
        writer.close()
    return network, history
