"""DIET's transformer as an ONNX graph, run by ONNX Runtime at parse time where it is installed.

``DIETInference.transform`` (``inference.py``) in NumPy spends most of a message's time in a
dozen small matrix products and the Python between them; ONNX Runtime runs the same network in
one call, with its own small-matrix kernels. The graph is built in memory from the archive's
named weights (``weight_names``) with the ``onnx`` package's helpers, when a model loads: the
archive stays as it was (``.npz``), and an archive from before this module parses the same.
It is float32 throughout, like the NumPy pass, and gives the same states within float32
rounding::

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
``NLU_ENGINE_DIET=numpy`` keeps the NumPy pass (for comparisons and tests; users need not
set it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.nn.onnx_runtime import (
    MS_DOMAIN,
    forced_runtime,
    model_of,
    onnx_runtime_available,
    process_threads,
    session,
)

#: the environment variable that keeps DIET's transformer in NumPy (``numpy``) or asks for
#: ONNX Runtime (``onnx``, the default where it is installed)
RUNTIME_VARIABLE = "NLU_ENGINE_DIET"
RUNTIMES = ("numpy", "onnx")
#: inputs up to this many positions run on a one-thread session, larger ones on all threads
SINGLE_THREAD_MAX_POSITIONS = 256
#: LayerNorm's epsilon, as ``nlu_engine.nn.ops.layer_norm``'s default and DIET's Keras layers
EPSILON = 1e-6


def use_onnx() -> bool:
    """Whether DIET's transformer runs under ONNX Runtime in this process."""
    installed = onnx_runtime_available()
    forced = forced_runtime(RUNTIME_VARIABLE, RUNTIMES, needing_onnx=("onnx",), installed=installed)
    return forced != "numpy" and installed


class _Graph:
    """The nodes and initializers of a graph being written, over DIET's named weights ``w``."""

    def __init__(self, w: dict[str, np.ndarray]) -> None:
        from onnx import helper, numpy_helper

        self.w, self.helper, self.numpy_helper = w, helper, numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, name: str, array: np.ndarray, dtype: Any = np.float32) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(array, dtype), name))
        return name

    def op(self, kind: str, inputs: list[str], output: str | list[str], domain: str = "",
           **attrs: Any) -> str:
        outputs = [output] if isinstance(output, str) else output
        self.nodes.append(self.helper.make_node(kind, inputs, outputs, name=outputs[0], domain=domain,
                                                **attrs))
        return outputs[0]

    def dense(self, x: str, layer: str, out: str) -> str:
        """x @ kernel (+ bias)."""
        kernel, bias = names.kernel(layer), names.bias(layer)
        y = self.op("MatMul", [x, self.const(kernel, self.w[kernel])], out + "_product")
        return self.op("Add", [y, self.const(bias, self.w[bias])], out) if bias in self.w else y

    def norm(self, x: str, layer: str, out: str) -> str:
        gamma = self.const(names.gamma(layer), self.w[names.gamma(layer)])
        beta = self.const(names.beta(layer), self.w[names.beta(layer)])
        return self.op("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=EPSILON)

    def attention(self, layer: names.TransformerLayer, x: str, heads: int, units: int) -> str:
        """Relative self-attention of the normed x [B, L, U] -> merge(a) W_o + b_o [B, L, U]."""
        w, op, const, p, depth = self.w, self.op, self.const, f"l{layer.index}_", units // heads
        qkv_kernel = np.concatenate(
            [w[names.kernel(layer.attention(part))] for part in ("query", "key", "value")], axis=1
        )  # [U, 3U]
        qkv = op("MatMul", [x, const(p + "qkv_kernel", qkv_kernel)], p + "qkv")  # [B, L, 3U]
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
        return self.dense(merged, layer.attention("output"), p + "attention_out")


def transformer_graph(
    w: dict[str, np.ndarray], layers: list[names.TransformerLayer], heads: int, units: int
) -> Any:
    """The transformer of ``DIETInference.transform`` as an ``onnx.ModelProto`` (module doc)."""
    from onnx import TensorProto, helper

    g = _Graph(w)
    scaled = g.op("Mul", [g.dense("x", names.TRANSFORMER_EMBEDDING, "embedded"),
                          g.const("sqrt_units", np.array(units**0.5))], "scaled")
    h = g.op("Add", [scaled, "position"], "h_in")  # [B, L, U]
    for layer in layers:
        p = f"l{layer.index}_"
        attended = g.attention(layer, g.norm(h, layer.attention_norm, p + "normed_a"), heads, units)
        h = g.op("Add", [h, attended], p + "h_a")
        inner = g.op("Gelu", [g.dense(g.norm(h, layer.ffn_norm, p + "normed_f"), layer.ffn_in, p + "ffn_in")],
                     p + "gelu", domain=MS_DOMAIN)  # [B, L, 4U]
        h = g.op("Add", [h, g.dense(inner, layer.ffn_out, p + "ffn_out")], p + "h")
    g.op("Gelu", [g.norm(h, names.TRANSFORMER_OUTPUT_NORM, "output_normed")], "states", domain=MS_DOMAIN)
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "length", "width"]),
        helper.make_tensor_value_info("bias", TensorProto.FLOAT, ["batch", 1, "queries", "length"]),
        helper.make_tensor_value_info("position", TensorProto.FLOAT, ["length", units]),
    ]
    if relative_rows(w, layers):
        inputs.append(
            helper.make_tensor_value_info("relative", TensorProto.FLOAT, ["length", "length", "rows"])
        )
    states = helper.make_tensor_value_info("states", TensorProto.FLOAT, ["batch", "length", units])
    return model_of(helper.make_graph(g.nodes, "diet_transformer", inputs, [states], g.inits))


def relative_rows(w: dict[str, np.ndarray], layers: list[names.TransformerLayer]) -> int:
    """Kr, the rows of the relative-position tables [H, Kr, d] (0 without relative attention)."""
    tables = [w[n] for layer in layers for n in (layer.key_relative, layer.value_relative) if n in w]
    return tables[0].shape[1] if tables else 0


class OnnxTransformer:
    """One DIET transformer under ONNX Runtime: its graph, built from the named weights, and its
    sessions, one thread for a message or a few, the process's threads for larger batches
    (created on first use)."""

    def __init__(
        self, w: dict[str, np.ndarray], layers: list[names.TransformerLayer], heads: int, units: int
    ) -> None:
        self.graph = transformer_graph(w, layers, heads, units)
        rows = relative_rows(w, layers)
        #: one-hot rows of the clipped distances [Kr, Kr] (None without relative attention)
        self._one_hot = np.eye(rows, dtype=np.float32) if rows else None
        self._sessions: dict[int, Any] = {1: session(self.graph, 1)}

    def __call__(self, x: np.ndarray, bias: np.ndarray, position: np.ndarray,
                 index: np.ndarray | None) -> np.ndarray:
        """x [B, L, D], bias [B, 1, 1|L, L], position [L, U], the relative positions' table rows
        index [L, L] (``nn.attention.relative_positions``) -> [B, L, U]."""
        threads = 1 if x.shape[0] * x.shape[1] <= SINGLE_THREAD_MAX_POSITIONS else process_threads()
        if threads not in self._sessions:
            self._sessions[threads] = session(self.graph, threads)
        feeds = {"x": np.ascontiguousarray(x, np.float32), "bias": np.ascontiguousarray(bias, np.float32),
                 "position": np.ascontiguousarray(position, np.float32)}
        if self._one_hot is not None and index is not None:
            feeds["relative"] = self._one_hot[index]  # [L, L, Kr]
        return self._sessions[threads].run(None, feeds)[0]  # type: ignore[no-any-return]
