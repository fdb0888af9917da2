"""DIET's transformer as an ONNX graph, run by ONNX Runtime at parse time where it is installed.

DIET's transformer (and the ResponseSelector's) parses only here: ONNX Runtime runs it in one
call (``DIETInference`` in ``inference.py`` feeds it and reads the heads). The graph is written
with ``nn.onnx_builder`` in memory from the archive's named weights (``weight_names``) when a
model loads: the archive stays as it was (``.npz``). It is float32 whatever the model's runtime,
and gives TensorFlow's states within float32 rounding (tests/classifiers/diet)::

    x [B, L, D], bias [B, 1, 1|L, L], position [L, U], relative [L, L, Kr] (one-hot of the
    clipped distance of key j from query i; only with relative attention)
    h = (x W_e + b_e) sqrt(U) + position                                      [B, L, U]
    for each layer (pre-LN):
        n = LayerNorm(h)
        q, k, v = heads(n W_qkv)                                              [B, H, L, d] each
        logits = q kᵀ (+ Σ_k (q K_rᵀ)[b, h, i, k] relative[i, j, k])          [B, H, L, L]
        w = softmax(logits / sqrt(d) + bias)
        a = w v (+ (Σ_j w[b, h, i, j] relative[i, j, k]) V_r)                 [B, H, L, d]
        h = h + merge(a) W_o + b_o
        h = h + gelu(LayerNorm(h) W_i + b_i) W_out + b_out
    states = gelu(LayerNorm(h))                                               [B, L, U]

Shapes as ``inference.py``'s; Kr the rows of the relative tables K_r, V_r [H, Kr, d].
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.nn.onnx_builder import FLOAT, GraphBuilder
from nlu_engine.nn.onnx_runtime import Sessions

#: inputs up to this many positions run on a one-thread session, larger ones on all threads
SINGLE_THREAD_MAX_POSITIONS = 256
#: LayerNorm's epsilon, as DIET's Keras layers
EPSILON = 1e-6


def _dense(g: GraphBuilder, w: dict[str, np.ndarray], x: str, layer: str, out: str) -> str:
    """x @ kernel (+ bias) of the named Keras layer ``layer``."""
    return g.dense(x, layer, w[names.kernel(layer)], w.get(names.bias(layer)), out)


def _norm(g: GraphBuilder, w: dict[str, np.ndarray], x: str, layer: str, out: str) -> str:
    return g.layer_norm(x, layer, w[names.gamma(layer)], w[names.beta(layer)], EPSILON, out)


def _attention(g: GraphBuilder, w: dict[str, np.ndarray], layer: names.TransformerLayer, x: str,
               heads: int, units: int) -> str:
    """Relative self-attention of the normed x [B, L, U] -> merge(a) W_o + b_o [B, L, U]."""
    op, const, p, depth = g.op, g.const, f"l{layer.index}_", units // heads
    qkv_kernel = np.concatenate(
        [w[names.kernel(layer.attention(part))] for part in ("query", "key", "value")], axis=1
    )  # [U, 3U]
    qkv = g.matmul(x, p + "qkv_kernel", qkv_kernel, p + "qkv")  # [B, L, 3U]
    split_shape = const(p + "split_shape", np.array([0, 0, 3, heads, depth]), np.int64)
    split = op("Transpose", [op("Reshape", [qkv, split_shape], p + "qkv_heads")], p + "qkv_t",
               perm=[2, 0, 3, 1, 4])  # [3, B, H, L, d]
    thirds = [p + "q3", p + "k3", p + "v3"]  # [1, B, H, L, d] each
    op("Split", [split], thirds, axis=0)
    axis0 = const(p + "axis0", np.array([0]), np.int64)
    q, k, v = (op("Squeeze", [third, axis0], third[:-1]) for third in thirds)  # [B, H, L, d] each
    logits = op("MatMul", [q, op("Transpose", [k], p + "k_t", perm=[0, 1, 3, 2])], p + "logits")
    if layer.key_relative in w:
        table = const(layer.key_relative + "_t", w[layer.key_relative].transpose(0, 2, 1))  # [H, d, Kr]
        by_distance = op("MatMul", [q, table], p + "by_distance")  # [B, H, L, Kr]
        logits = op("Add", [logits, op("Einsum", [by_distance, "relative"], p + "key_relative",
                                       equation="bhik,ijk->bhij")], p + "logits_rel")
    scaled = op("Mul", [logits, const(p + "logit_scale", np.array(depth**-0.5))], p + "scaled_logits")
    weights = op("Softmax", [op("Add", [scaled, "bias"], p + "masked")], p + "weights",
                 axis=-1)  # [B, H, L, L]
    attended = op("MatMul", [weights, v], p + "attended")  # [B, H, L, d]
    if layer.value_relative in w:
        per_distance = op("Einsum", [weights, "relative"], p + "per_distance", equation="bhij,ijk->bhik")
        table = const(layer.value_relative, w[layer.value_relative])  # [H, Kr, d]
        attended = op("Add", [attended, op("MatMul", [per_distance, table], p + "value_relative")],
                      p + "attended_rel")
    merge_shape = const(p + "merge_shape", np.array([0, 0, units]), np.int64)
    merged = op("Reshape", [op("Transpose", [attended], p + "merge_t", perm=[0, 2, 1, 3]), merge_shape],
                p + "merged")  # [B, L, U]
    return _dense(g, w, merged, layer.attention("output"), p + "attention_out")


def transformer_graph(
    w: dict[str, np.ndarray], layers: list[names.TransformerLayer], heads: int, units: int
) -> Any:
    """DIET's transformer as an ``onnx.ModelProto`` (module doc)."""
    g = GraphBuilder("diet_transformer")
    g.input("x", FLOAT, ["batch", "length", "width"])
    g.input("bias", FLOAT, ["batch", 1, "queries", "length"])
    g.input("position", FLOAT, ["length", units])
    if relative_rows(w, layers):
        g.input("relative", FLOAT, ["length", "length", "rows"])
    scaled = g.op("Mul", [_dense(g, w, "x", names.TRANSFORMER_EMBEDDING, "embedded"),
                          g.const("sqrt_units", np.array(units**0.5))], "scaled")
    h = g.op("Add", [scaled, "position"], "h_in")  # [B, L, U]
    for layer in layers:
        p = f"l{layer.index}_"
        attended = _attention(g, w, layer, _norm(g, w, h, layer.attention_norm, p + "normed_a"), heads, units)
        h = g.op("Add", [h, attended], p + "h_a")
        inner = g.gelu(_dense(g, w, _norm(g, w, h, layer.ffn_norm, p + "normed_f"), layer.ffn_in,
                              p + "ffn_in"), p + "gelu")  # [B, L, 4U]
        h = g.op("Add", [h, _dense(g, w, inner, layer.ffn_out, p + "ffn_out")], p + "h")
    states = g.gelu(_norm(g, w, h, names.TRANSFORMER_OUTPUT_NORM, "output_normed"), "states")
    g.output(states, "states", FLOAT, ["batch", "length", units])
    return g.model()


def relative_rows(w: dict[str, np.ndarray], layers: list[names.TransformerLayer]) -> int:
    """Kr, the rows of the relative-position tables [H, Kr, d] (0 without relative attention)."""
    tables = [w[n] for layer in layers for n in (layer.key_relative, layer.value_relative) if n in w]
    return tables[0].shape[1] if tables else 0


class OnnxTransformer:
    """One DIET transformer under ONNX Runtime: its graph, built from the named weights, and its
    sessions (``nn.onnx_runtime.Sessions``)."""

    def __init__(
        self, w: dict[str, np.ndarray], layers: list[names.TransformerLayer], heads: int, units: int
    ) -> None:
        self.graph = transformer_graph(w, layers, heads, units)
        rows = relative_rows(w, layers)
        #: one-hot rows of the clipped distances [Kr, Kr] (None without relative attention)
        self._one_hot = np.eye(rows, dtype=np.float32) if rows else None
        self._sessions = Sessions(self.graph, SINGLE_THREAD_MAX_POSITIONS)

    def __call__(self, x: np.ndarray, bias: np.ndarray, position: np.ndarray,
                 index: np.ndarray | None) -> np.ndarray:
        """x [B, L, D], bias [B, 1, 1|L, L], position [L, U], the relative positions' table rows
        index [L, L] (``nn.attention.relative_positions``) -> [B, L, U]."""
        feeds = {"x": np.ascontiguousarray(x, np.float32), "bias": np.ascontiguousarray(bias, np.float32),
                 "position": np.ascontiguousarray(position, np.float32)}
        if self._one_hot is not None and index is not None:
            feeds["relative"] = self._one_hot[index]  # [L, L, Kr]
        return self._sessions.run(feeds, x.shape[0] * x.shape[1])  # type: ignore[no-any-return]
