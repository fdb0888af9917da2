"""One training step (forward and backward) of three MiniLM-sized layers, float32 against bfloat16
matrix products, to see what oneDNN and the CPU's bfloat16 instructions give.

    TF_ENABLE_ONEDNN_OPTS=1 .venv/bin/python -m benchmarks.perf.encoder_step [--batch 64] [--length 20]
        [--dtype float32|bfloat16] [--runs 15]

Run it with ``TF_ENABLE_ONEDNN_OPTS=0`` and ``=1`` (TensorFlow reads it once, at import) and
both dtypes. The layers are random (384 wide, 12 heads, 1536 inner, as all-MiniLM-L6-v2's),
the loss a sum of squares; prints the median milliseconds of a step after one warm-up step.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from benchmarks.common import median_ms

HIDDEN, INNER, HEADS, LAYERS = 384, 1536, 12, 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=20, help="sub-tokens per example")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    import tensorflow as tf

    size, length, head = args.batch, args.length, HIDDEN // HEADS
    rng = np.random.default_rng(0)
    shapes = [(HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, INNER), (INNER, HIDDEN)]
    layers = [[tf.Variable(rng.normal(0, 0.02, s).astype(np.float32)) for s in shapes] for _ in range(LAYERS)]
    x0 = tf.constant(rng.normal(0, 1, (size * length, HIDDEN)).astype(np.float32))  # (B*S, H)
    dtype = tf.bfloat16 if args.dtype == "bfloat16" else tf.float32

    def mm(a: tf.Tensor, b: tf.Tensor, transpose_b: bool = False) -> tf.Tensor:
        return tf.cast(tf.matmul(tf.cast(a, dtype), tf.cast(b, dtype), transpose_b=transpose_b), tf.float32)

    def heads(t: tf.Tensor) -> tf.Tensor:  # (B*S, H) -> (B, h, S, d)
        return tf.transpose(tf.reshape(t, [size, length, HEADS, head]), [0, 2, 1, 3])

    @tf.function
    def step(x: tf.Tensor) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            h = x
            for qkv, out_a, inner, out_f in layers:
                q, k, v = tf.split(mm(h, qkv), 3, -1)
                scores = mm(heads(q), heads(k), transpose_b=True) / np.sqrt(head)  # (B, h, S, S)
                probs = tf.nn.softmax(scores)
                context = tf.reshape(tf.transpose(mm(probs, heads(v)), [0, 2, 1, 3]), [-1, HIDDEN])
                h = h + mm(context, out_a)
                h = h + mm(tf.nn.gelu(mm(h, inner)), out_f)
            loss = tf.reduce_sum(h * h)
        return tape.gradient(loss, [w for layer in layers for w in layer])

    milliseconds = median_ms(lambda: step(x0)[0].numpy(), args.runs)  # after one warm-up step
    print(json.dumps({"dtype": args.dtype, "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
                      "batch": size, "length": length,
                      "median_ms": round(milliseconds, 1)}))


if __name__ == "__main__":
    main()
