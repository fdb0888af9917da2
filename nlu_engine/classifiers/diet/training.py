"""DIET's training: ``fit`` assembles the network, its trainer and the loop's parts.

The training set is featurized and encoded once (``EncodedData``), not per epoch. ``fit``
holds out a stratified part of it when ``evaluate_on_number_of_examples`` asks, builds the
network and its trainer (``steps.DIETTrainer``: one compiled step per batch), and runs the epoch
loop (``loop.train_epochs``) with DIET's callbacks (``callbacks.py``: tag F1 monitor, history,
hold-out evaluation, TensorBoard, progress bar, early stopping) and the glibc allocator tuning
(``allocator.py``). Extra callbacks plug in through ``fit(..., callbacks=[...])``.

A fine-tuned encoder (``encoders.py``) joins the network with its pretrained weights, and its
layers train with their own learning rates (``encoder_rates``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
from nlu_engine.classifiers.diet.callbacks import (
    EarlyStopping,
    History,
    HoldoutEvaluation,
    ProgressBar,
    ReturnFreeMemory,
    TagF1Monitor,
    TensorBoardLogger,
    require_tensorboard,
)
from nlu_engine.classifiers.diet.crf_decode import decode_tag_sets
from nlu_engine.classifiers.diet.encoders import input_widths
from nlu_engine.classifiers.diet.loop import Callback, train_epochs
from nlu_engine.classifiers.diet.model import DIETNetwork
from nlu_engine.classifiers.diet.optimizer import linear_decay, warmup_linear_decay
from nlu_engine.classifiers.diet.spec import TrainingOptions, TrainingSpec, resolve_epochs
from nlu_engine.classifiers.diet.steps import DIETTrainer
from nlu_engine.contract.allocator import large_blocks_on_heap
from nlu_engine.training_data.bilou import f1_score
from nlu_engine.training_data.split import stratified_holdout

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.classifiers.diet.resume import ResumePlan
    from nlu_engine.contract.component import EncoderOptimization

# training examples decoded for the tag F1 of the progress bar and history (``TagF1Monitor``)
MONITORED_EXAMPLES = 512


def ragged_signature(ragged: dict[str, list[np.ndarray]]) -> dict[str, tf.TensorSpec]:
    """The signature of the per-example inputs ``EncodedData.ragged`` pads to [B, S, ...]."""
    return {
        name: tf.TensorSpec([None, None, *arrays[0].shape[1:]], tf.as_dtype(arrays[0].dtype))
        for name, arrays in ragged.items()
    }


def input_signature(spec: TrainingSpec, with_tags: bool) -> dict[str, tf.TensorSpec]:
    """The dynamic-shape signature of a batch (see ``batching.make_batch``), without the
    ragged inputs (``ragged_signature``); the dense features without the columns of the
    encoders ``spec`` fine-tunes."""
    i32, f32 = tf.int32, tf.float32
    seq_dim, sent_dim = input_widths(spec.data.dense_seq_dim, spec.data.dense_sent_dim, list(spec.encoders))
    signature = {
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
    if seq_dim:
        signature["dense_seq"] = tf.TensorSpec([None, None, seq_dim], f32)
    if sent_dim:
        signature["dense_sent"] = tf.TensorSpec([None, sent_dim], f32)
    if with_tags:
        for kind in spec.data.tags:
            signature[f"tags_{kind}"] = tf.TensorSpec([None, None], i32)
    return signature


def build_network(spec: TrainingSpec, ragged: dict[str, tf.TensorSpec] | None = None) -> DIETNetwork:
    """Construct the network and create every weight (one dummy prediction, no training).

    The fine-tuned encoders get their layers built here; ``ragged`` is the signature of their
    inputs."""
    network = DIETNetwork(spec)
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
    seq_dim, sent_dim = input_widths(spec.data.dense_seq_dim, spec.data.dense_sent_dim, list(spec.encoders))
    if seq_dim:
        dummy["dense_seq"] = np.zeros((1, 1, seq_dim), np.float32)
    if sent_dim:
        dummy["dense_sent"] = np.zeros((1, sent_dim), np.float32)
    for name, input_spec in (ragged or {}).items():
        dummy[name] = np.zeros([1, 1, *input_spec.shape[2:]], input_spec.dtype.as_numpy_dtype)
    network.predict_batch({k: tf.constant(v) for k, v in dummy.items()})
    if network.use_mlm:  # training-only layers, built so that weight lists always match
        embed_input = tf.zeros((1, int(network.mask_vector.shape[-1])))
        network.mlm_in_embed(embed_input)
        network.mlm_out_embed(tf.zeros((1, spec.network.transformer_size)))
    return network


def decode_tags(
    network: DIETNetwork, outputs: dict[str, np.ndarray], lengths: np.ndarray
) -> dict[str, np.ndarray]:
    """The tags [B, T] of ``network.predict_batch``'s logits (NumPy), decoded with the
    network's current transitions by the Viterbi a parse uses (``crf_decode``); the monitors
    score tags only, so the marginals are skipped (confidences all 0)."""
    decoders = {kind: crf.decoder() for kind, crf in network.tag_crf.items()}
    return decode_tag_sets(outputs, network.tag_tables(), lengths, decoders, marginals=False)


def compiled_predict(network: DIETNetwork, ragged: dict[str, tf.TensorSpec] | None = None):
    """A batch (NumPy arrays) -> the network's outputs as NumPy arrays, with the tags decoded
    (``decode_tags``): what training's monitors score."""
    signature = {**input_signature(network.spec, False), **(ragged or {})}
    if network.spec.training.run_eagerly:
        def function(batch: dict[str, Any]) -> dict[str, tf.Tensor]:
            return network.predict_batch({k: tf.constant(v) for k, v in batch.items()})
    else:
        function = tf.function(network.predict_batch, input_signature=[signature], autograph=False)

    def predict(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = {k: v.numpy() for k, v in function({k: batch[k] for k in signature}).items()}
        return {**outputs, **decode_tags(network, outputs, batch["lengths"])}

    return predict


def _holdout(labels: np.ndarray, size: int, seed: int | None) -> np.ndarray:
    """A stratified hold-out of about ``size`` examples (at most half of each label's; labels
    seen once stay in training): the package's one split, ``stratified_holdout``."""
    if size <= 0:
        return np.zeros(0, np.int64)
    share = min(size / len(labels), 0.5)
    return stratified_holdout(labels.tolist(), share, seed, both_sides=True)[1]


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
        ragged={k: [v[i] for i in index] for k, v in data.ragged.items()},
    )


def evaluate(predict, data: EncodedData, kinds: list[str]) -> dict[str, float]:
    """Intent accuracy and token-level entity F1 (non-O tags) on encoded examples."""
    correct, total = 0, 0
    counts = {k: np.zeros(3) for k in kinds}  # true positives, predicted, gold
    for start in range(0, len(data), 256):
        index = np.arange(start, min(start + 256, len(data)))
        batch = make_batch(data, index)
        out = predict(batch)
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


def epoch_batches(
    spec: TrainingSpec, data: EncodedData, epoch: int, epochs: int, rng: np.random.Generator,
    pool: np.ndarray | None = None,
) -> list[np.ndarray]:
    """The batches (example indices) of one epoch: balanced by label or shuffled, then grouped
    by length; with ``drop_small_last_batch``, batches under half the size are left out.
    ``pool``: the examples this epoch trains on (all when None)."""
    batch_size = batch_size_for_epoch(spec.training.batch_size, epoch, epochs)
    if spec.training.batch_strategy == "balanced" and spec.network.intent_classification:
        labels = data.label_ids if pool is None else data.label_ids[pool]
        order = balanced_order(labels, batch_size, rng)
        order = order if pool is None else pool[order]
    else:
        order = rng.permutation(len(data) if pool is None else pool)
    if spec.network.number_of_transformer_layers > 0:
        batches = length_grouped_batches(order, grouping_lengths(data), batch_size, rng)
    else:
        # no transformer, so little to save on padding: consecutive cuts of the order, as Rasa's
        # batches are, keep each batch's mix of labels (sorting by length would make a batch
        # of the short messages, another of the long ones; the selectors learned slower so).
        # Rasa's number of batches, of even sizes: a last batch of a few examples would hold
        # one label's alone
        batches = np.array_split(order, max(1, -(-len(order) // batch_size)))
    if spec.training.drop_small_last_batch:
        batches = [b for b in batches if len(b) >= batch_size // 2] or batches
    return batches


def grouping_lengths(data: EncodedData) -> np.ndarray:
    """[N] what batches are grouped by: the tokens, or with a fine-tuned encoder its inputs'
    length first (sub-tokens: the encoder's cost grows with them, and grouping by tokens left a
    third of its padded positions empty on SNIPS) and the tokens second."""
    if not data.ragged:
        return data.lengths
    longest = np.zeros(len(data), np.int64)
    for arrays in data.ragged.values():
        longest = np.maximum(longest, [len(a) for a in arrays])
    return longest * (int(data.lengths.max(initial=0)) + 1) + data.lengths


def total_steps(options: TrainingOptions, examples: int, epochs: int) -> int:
    """The optimizer steps of a training (one per batch of ``batch_size`` examples);
    ``examples`` per epoch."""
    return sum(
        max(1, -(-examples // batch_size_for_epoch(options.batch_size, e, epochs)))
        for e in range(epochs)
    )


def learning_rate(options: TrainingOptions, examples: int, epochs: int, scale: float = 1.0) -> Any:
    """``learning_rate`` times ``scale`` (fine-tuning starts the schedule again lower), constant
    or (``linear_decay``) a function of the optimizer step; ``examples`` per epoch."""
    start = options.learning_rate * scale
    if options.learning_rate_schedule != "linear_decay":
        return start
    return linear_decay(start, total_steps(options, examples, epochs))


def encoder_rates(network: DIETNetwork, steps: int) -> list[tuple[list, Any]]:
    """(variables, learning rate) per layer of each fine-tuned encoder: its own rate, warm-up and
    linear decay, times ``layerwise_decay`` per layer down from the top."""
    groups: list[tuple[list, Any]] = []
    for slot, layer in zip(network.encoder_slots, network.encoder_layers, strict=True):
        groups += layer_rates(slot.encoder.optimization(), layer, steps)
    return groups


def layer_rates(settings: EncoderOptimization, layer: Any, steps: int) -> list[tuple[list, Any]]:
    """(variables, learning rate) per layer of one encoder's Keras layer (``encoder_rates``)."""
    warmup = round(settings.warmup_fraction * steps)
    return [(variables, warmup_linear_decay(settings.learning_rate * settings.layerwise_decay**depth,
                                            warmup, steps))
            for depth, variables in enumerate(layer.variable_groups())]


def diet_callbacks(
    network: DIETNetwork,
    trainer: DIETTrainer,
    training: EncodedData,
    evaluation: EncodedData | None,
) -> list[Callback]:
    """DIET's own parts of the training loop, in the order they run (see ``callbacks.py``)."""
    spec, options = network.spec, network.spec.training
    predict = compiled_predict(network, ragged_signature(training.ragged))
    kinds = list(spec.data.tags)

    def score(data: EncodedData) -> dict[str, float]:
        return evaluate(predict, data, kinds)

    parts: list[Callback] = []
    if kinds:
        size = min(MONITORED_EXAMPLES, len(training))
        rng = np.random.default_rng(options.random_seed)
        sample = rng.choice(len(training), size, replace=False)
        parts.append(TagF1Monitor(score, _subset(training, np.sort(sample)), kinds))
    parts += [ReturnFreeMemory(), History()]
    if evaluation is not None:
        parts.append(HoldoutEvaluation(score, evaluation, options.evaluate_every_number_of_epochs))
    if options.tensorboard_log_directory:
        parts.append(TensorBoardLogger(options.tensorboard_log_directory,
                                       options.tensorboard_log_level, trainer.batch_loss))
    parts.append(ProgressBar(f"{spec.name} epochs", options.show_progress))
    if evaluation is not None and (options.checkpoint_model or options.early_stopping_patience):
        parts.append(EarlyStopping(network, options.early_stopping_patience))
    return parts


@dataclass(frozen=True)
class LateJoin:
    """Examples that join training late: ``index`` (rows of the encoded data) train only in
    the last ``share`` of the epochs (at least one). Just before they join, ``on_join`` sees the
    network, which has not seen them yet (the calibration is fitted on its predictions there),
    so one training gives both a calibration on unseen examples and a network that learned
    from every example."""

    index: np.ndarray
    share: float
    on_join: Callable[[DIETNetwork], None]

    def join_epoch(self, epochs: int) -> int:
        return max(0, epochs - max(1, round(epochs * self.share)))


@large_blocks_on_heap()
def fit(
    spec: TrainingSpec,
    encoded: EncodedData,
    callbacks: Sequence[Callback] = (),
    resume: ResumePlan | None = None,
    late: LateJoin | None = None,
) -> tuple[DIETNetwork, dict[str, Any]]:
    """Train a new network as ``spec`` describes on ``encoded``; returns it and the per-epoch
    history.

    ``callbacks`` run after DIET's own (``diet_callbacks``) at every hook of the loop.
    ``resume``: start from a stored model's weights and train as fine-tuning does
    (``resume.py``: the epochs' share, each epoch's examples, the restarted learning rate).
    ``spec.encoders`` are fine-tuned with it (their inputs in ``encoded.ragged``).
    ``late``: examples held back until the last epochs (``LateJoin``); not with ``resume`` or a
    hold-out evaluation.
    """
    options = spec.training
    if options.tensorboard_log_directory:
        require_tensorboard(spec.name)
    rng = np.random.default_rng(options.random_seed)  # each epoch's batches
    holdout = _holdout(encoded.label_ids, options.evaluate_on_number_of_examples, options.random_seed)
    evaluation = None
    if late is not None and (resume is not None or len(holdout)):
        raise ValueError("fit: late-joining examples go with neither resume nor a hold-out evaluation")
    if len(holdout):
        keep = np.setdiff1d(np.arange(len(encoded)), holdout)
        evaluation = _subset(encoded, holdout)
        encoded = _subset(encoded, keep)
        resume = resume.subset(keep) if resume is not None else None

    ragged = ragged_signature(encoded.ragged)
    network = build_network(spec, ragged)
    epochs = resolve_epochs(options.epochs, options.batch_size, len(encoded))
    per_epoch, scale = len(encoded), 1.0
    if resume is not None:
        resume.restore(network)
        epochs, per_epoch = resume.epochs(epochs), resume.examples_per_epoch()
        scale = resume.options.learning_rate_fraction
    trainer = DIETTrainer(
        network, encoded, learning_rate(options, per_epoch, epochs, scale),
        {**input_signature(spec, True), **ragged},
        options.max_micro_batch_size, eager=options.run_eagerly,
        groups=encoder_rates(network, total_steps(options, per_epoch, epochs)),
    )
    parts = [*diet_callbacks(network, trainer, encoded, evaluation), *callbacks]

    joined = late is None
    early = None if late is None else np.setdiff1d(np.arange(len(encoded)), late.index)

    def batches(epoch: int) -> list[np.ndarray]:
        nonlocal joined
        pool = None if resume is None else resume.epoch_pool(rng)
        if not joined and epoch >= late.join_epoch(epochs):
            late.on_join(network)
            joined = True
        if not joined:
            pool = early
        return epoch_batches(spec, encoded, epoch, epochs, rng, pool)

    state = train_epochs(trainer, batches, epochs, parts)
    if not joined:  # stopped before the late examples joined: the calibration still needs them
        late.on_join(network)
    if resume is not None:
        state.history["finetune"] = {
            "epochs": epochs, "examples_per_epoch": per_epoch,
            "new_examples": int((~resume.rehearse).sum()), "known_examples": int(resume.rehearse.sum()),
        }
    return network, state.history
