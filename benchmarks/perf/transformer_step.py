"""Milliseconds of DIET's transformer training step, and of its gelu and dropout, in isolation.

    .venv/bin/python -m benchmarks.perf.transformer_step [--batch 64] [--length 12] [--steps 40]
        [--variants full,keras_ops,no_dropout,no_relative,one_layer,xla] [--ops]

Each variant builds DIET's default transformer (2 layers, 256 units, 4 heads, relative attention,
dropout 0.2; ``keras_ops`` with Keras's gelu and Dropout instead of DIET's, as before 3eaca7b)
and times forward + backward of a sum-of-squares loss on a [batch, length, 256] input, compiled
with ``tf.function``: the median of ``--steps`` steps after one warm-up.
``--ops`` times gelu and dropout alone on a [768, 1024] activation (forward and backward),
Keras's and DIET's, minus the same loop with no activation. TensorFlow's oneDNN setting is the
environment's (DIET training turns it off: see the README). Compare versions one after the
other (A B A B); the machine's noise is several percent.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # as in DIET training
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import tensorflow as tf

from benchmarks.common import median_ms
from nlu_engine.classifiers.diet import transformer
from nlu_engine.classifiers.diet.layers import Dropout, gelu

VARIANTS = {
    "full": {},
    "no_dropout": {"dropout_rate": 0.0},
    "no_relative": {"use_key_relative_position": False, "use_value_relative_position": False},
    "one_layer": {"num_layers": 1},
    "xla": {"jit_compile": True},
    "keras_ops": {"keras_ops": True},  # Keras's gelu and Dropout, as before 3eaca7b
}


def transformer_step(batch: int, length: int, steps: int, variant: dict) -> float:
    options = {
        "num_layers": 2, "dropout_rate": 0.2, "use_key_relative_position": True,
        "use_value_relative_position": True, **variant,
    }
    jit = options.pop("jit_compile", False)
    keras_ops = options.pop("keras_ops", False)
    keras.utils.set_random_seed(0)
    if keras_ops:  # the layers look these names up in their module when they are built
        transformer.Dropout, transformer.gelu = keras.layers.Dropout, keras.activations.gelu
    try:
        encoder = transformer.TransformerEncoder(
            options.pop("num_layers"), 256, 4, reg_lambda=0.002, max_relative_position=5, **options
        )
    finally:
        transformer.Dropout, transformer.gelu = Dropout, gelu
    x = tf.random.normal((batch, length, 256))  # [B, L, 256]
    mask = tf.ones((batch, length))  # [B, L]
    encoder(x, mask, training=True)

    def step(x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            y = encoder(x, mask, training=True)  # [B, L, 256]
            loss = tf.reduce_sum(y * y)
        gradients = tape.gradient(loss, encoder.trainable_variables)
        # one number that needs every gradient, so none of them is pruned from the graph
        return tf.add_n([tf.reduce_sum(g) for g in gradients])

    compiled = tf.function(step, jit_compile=jit)
    return median_ms(lambda: compiled(x, mask).numpy(), steps)


def activation_ms(activation: Callable[[tf.Tensor], tf.Tensor], steps: int) -> float:
    x = tf.random.normal((768, 1024))

    def step(x: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = activation(x)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, x)

    compiled = tf.function(step)
    return median_ms(lambda: compiled(x).numpy(), steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=12)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--variants", default="full", help=",".join(VARIANTS))
    parser.add_argument("--ops", action="store_true", help="also time gelu and dropout alone")
    args = parser.parse_args()
    for name in args.variants.split(","):
        if name not in VARIANTS:
            parser.error(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
        ms = transformer_step(args.batch, args.length, args.steps, VARIANTS[name])
        print(f"transformer {name:12s} {args.batch} x {args.length}: {ms:6.1f} ms")
    if args.ops:
        keras.utils.set_random_seed(0)
        seeds = keras.random.SeedGenerator(0)
        ours = Dropout(0.2)
        base = activation_ms(lambda x: x, 4 * args.steps)
        for name, activation in [
            ("keras gelu", keras.activations.gelu),
            ("diet gelu", gelu),
            ("keras dropout", lambda x: keras.random.dropout(x, 0.2, seed=seeds)),
            ("diet dropout", lambda x: ours(x, training=True)),
        ]:
            ms = activation_ms(activation, 4 * args.steps) - base
            print(f"{name:14s} [768, 1024], forward + backward: {ms:5.2f} ms")


if __name__ == "__main__":
    main()
