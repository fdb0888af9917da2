"""Contrastive tuning of a fine-tuned encoder on pairs of training examples (SetFit's idea),
before DIET's own training (``contrastive_pairs``).

* **Pairs**: ``per_example`` pairs for each training example, a seeded draw: alternately one
  with another example of its intent (target 1) and one with an example of another intent
  (target 0). An intent with one example has no positive pair; one intent alone, no negative.
* **Loss**: SetFit's ``CosineSimilarityLoss``, the squared difference between the cosine of the
  two examples' sentence vectors (the encoder's own pooling, mean for MiniLM) and the target.
* **Steps**: ``PAIR_BATCH`` pairs a step, every pair once: ``ceil(pairs / PAIR_BATCH)`` steps.
  Only the encoder's trainable layers move, at its own learning rates (warm-up, linear decay,
  layer-wise decay: ``training.layer_rates``), with its dropout.

The tuned weights come back by name (what ``TrainableEncoder.adopt`` takes): with the sentence
head (few examples an intent) the encoder adopts them and the head reads its vectors; otherwise
DIET's network starts the encoder's layer from them (``EncoderSlot.start``), tuned on the
training share only, so the held-out calibration share stays unseen. The head's cross-fitted
calibration reads vectors of an encoder tuned on every example, the held-out folds' too: on the
10-shot file that left its ECE at 0.047 to 0.095 (BENCHMARKS.md, "Tried and not adopted"),
which is one reason the phase is off by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nlu_engine.classifiers.diet.batching import pad_ragged
from nlu_engine.contract.component import TrainableEncoder
from nlu_engine.contract.message import TEXT, Message

#: pairs a step (SetFit's default batch size)
PAIR_BATCH = 16


@dataclass(frozen=True)
class Tuned:
    """What the contrastive phase returns: the tuned weights and the loss of each step."""

    weights: dict[str, np.ndarray]
    losses: list[float]


def draw_pairs(labels: np.ndarray, per_example: int, seed: int | None) -> np.ndarray:
    """[P, 3] int rows (example, other example, target 1 or 0), shuffled: for each example
    ``per_example`` draws, even ones a positive, odd ones a negative (skipped when none exists)."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    members = {label: np.flatnonzero(labels == label) for label in np.unique(labels)}
    everyone = np.arange(len(labels))
    rows = []
    for i, label in enumerate(labels):
        same = members[label][members[label] != i]
        other = everyone[labels != label]
        for draw in range(per_example):
            pool, target = (same, 1) if draw % 2 == 0 else (other, 0)
            if len(pool):
                rows.append((i, int(rng.choice(pool)), target))
    pairs = np.array(rows, np.int64).reshape(-1, 3)
    return pairs[rng.permutation(len(pairs))]


def tune(encoder: TrainableEncoder, messages: Sequence[Message], labels: np.ndarray,
         per_example: int, seed: int | None) -> Tuned:
    """Tune ``encoder``'s trainable layers on pairs of ``messages`` (their label indices
    ``labels``) and return the tuned weights; the encoder itself is left as it was."""
    import keras

    layer = encoder.build()  # imports TensorFlow with the encoder's settings first
    import tensorflow as tf

    from nlu_engine.classifiers.diet.optimizer import GroupedAdam
    from nlu_engine.classifiers.diet.training import layer_rates

    if seed is not None:
        keras.utils.set_random_seed(seed)
    pairs = draw_pairs(labels, per_example, seed)
    inputs = encoder.encode_inputs(list(messages))
    words = np.array([len(m.tokens.get(TEXT) or ()) for m in messages], np.int32)
    steps = max(1, -(-len(pairs) // PAIR_BATCH))
    variables = [v for group in layer.variable_groups() for v in group]
    optimizer = GroupedAdam(variables, 0.0, layer_rates(encoder.optimization(), layer, steps))

    @tf.function(reduce_retracing=True)
    def step(batch: dict, num_words: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            _, sentence = layer(batch, num_words, training=True)
            left, right = tf.split(tf.math.l2_normalize(sentence, axis=-1), 2)
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(left * right, -1) - target))
        optimizer.apply(tape.gradient(loss, variables))
        return loss

    losses = []
    for start in range(0, len(pairs), PAIR_BATCH):
        chunk = pairs[start : start + PAIR_BATCH]
        index = np.concatenate([chunk[:, 0], chunk[:, 1]])
        batch = {key: tf.constant(pad_ragged([inputs[i][key] for i in index])) for key in inputs[0]}
        num_words = tf.constant(max(int(words[index].max()), 1))
        losses.append(float(step(batch, num_words, tf.constant(chunk[:, 2], tf.float32))))
    return Tuned(layer.tuned_weights(), losses)
