"""The BERT encoder as an ONNX graph, run by ONNX Runtime: in float32 by default, in int8 on request.

``BertEncoder`` (``bert.py``) holds the weights (pretrained, with a fine-tuning's tuned layers
merged in); ``encoder_graph`` writes the same network as an ONNX graph with ONNX Runtime's
fused transformer operators, built from those arrays with the ``onnx`` package's helpers (no
export, no download)::

    ids, mask (B, T) int32
    x = LayerNormalization(word[ids] + position[0:T] + token_type[0])     (B, T, H)
    for each layer:
        a = Attention(x, W_qkv (H, 3H), b_qkv, mask)                          com.microsoft, fused
        x = SkipLayerNormalization(a @ W_o, x, gamma, beta, b_o)              LN(x + a W_o + b_o)
        i = BiasGelu(x @ W_i, b_i)                                            (B, T, I), erf gelu
        x = SkipLayerNormalization(i @ W_out, x, gamma, beta, b_out)
    states = x                                                                (B, T, H) float32

``quantized_graph`` applies ONNX Runtime's dynamic quantisation to it: the weights of the
``Attention`` projections, ``W_o`` and ``W_i`` become int8 (per output channel), the activations
are quantised to uint8 on the fly per call, and those products run as int8 (VNNI) with float32
results; ``W_out`` (after gelu), embeddings, softmax and LayerNorm stay float32. The graph
lives only in memory, built when a model loads: the archive keeps the weights as they were
(``.npz``), so an archive from before this module parses as it did.

``choose_runtime`` decides once per process (``NLU_ENGINE_ENCODER`` overrides it):

* ``onnx`` (the default where ``onnxruntime`` and ``onnx`` are installed): the float32 graph,
  the NumPy encoder's features within float32 rounding and the same predictions, about twice
  as fast;
* ``float32`` (the default without them): the NumPy encoder, unchanged;
* ``int8``: the quantised graph, on request only. It is faster again on CPUs with int8 dot
  products (AVX-512 VNNI, AVX-VNNI, AMX), and kept SNIPS's scores to the hundredth, but on
  NLU-Evaluation-Data's folds a fine-tuned model's scores moved by up to 0.7 points against
  float32 (BENCHMARKS.md), outside the 0.1 the compressed path must hold.
"""

from __future__ import annotations

import logging
import weakref
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from nlu_engine.contract.errors import ConfigError
from nlu_engine.nn.onnx_runtime import (
    MS_DOMAIN,
    forced_runtime,
    model_of,
    onnx_runtime_available,
    process_threads,
    session,
)

if TYPE_CHECKING:
    from nlu_engine.featurizers.dense.bert import BertEncoder

logger = logging.getLogger(__name__)

Runtime = Literal["float32", "onnx", "int8"]
RUNTIMES: tuple[Runtime, ...] = ("float32", "onnx", "int8")
#: the environment variable that overrides the automatic choice (``float32``, ``onnx`` or ``int8``)
RUNTIME_VARIABLE = "NLU_ENGINE_ENCODER"
#: /proc/cpuinfo flags of an int8 dot product instruction ONNX Runtime's kernels use
INT8_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
#: /proc/cpuinfo flags of bfloat16 matrix instructions (fine-tuning's products, ``training_precision``)
BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
#: inputs up to this many sub-tokens run on a one-thread session, larger ones on all threads
SINGLE_THREAD_MAX_SUBTOKENS = 128
#: the product left in float32: the feed-forward output, whose input (after gelu) has the outliers
#: per-tensor int8 rounds worst; quantised too, SNIPS's exact-span entity F1 fell 0.22 (BENCHMARKS.md)
FLOAT32_PRODUCT = "_out"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first processor's feature flags (empty where /proc/cpuinfo is missing)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def has_bfloat16() -> bool:
    """Whether the CPU has bfloat16 matrix instructions oneDNN uses (AVX-512 BF16, AMX)."""
    return bool(cpu_flags() & BFLOAT16_FLAGS)


@cache
def choose_runtime() -> Runtime:
    """The encoder's parse runtime in this process (see the module doc)."""
    installed = onnx_runtime_available()
    forced = forced_runtime(RUNTIME_VARIABLE, RUNTIMES, needing_onnx=("onnx", "int8"), installed=installed)
    if forced == "int8" and not cpu_flags() & INT8_FLAGS:
        logger.warning("%s=int8: this CPU has no int8 dot products (AVX-512 VNNI, AVX-VNNI, AMX); "
                       "int8 runs, but slower than float32", RUNTIME_VARIABLE)
    if forced:
        return forced  # type: ignore[return-value]
    return "onnx" if installed else "float32"


# --- the graph ----------------------------------------------------------------------------------
def encoder_graph(encoder: BertEncoder) -> Any:
    """The encoder layers' float32 ONNX graph (an ``onnx.ModelProto``; see the module doc)."""
    from onnx import TensorProto, helper, numpy_helper

    cfg = encoder.config
    if cfg.hidden_act != "gelu":
        raise ConfigError(f"the ONNX encoder runs hidden_act gelu only, not {cfg.hidden_act}")
    inits: list[Any] = []
    nodes: list[Any] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array, np.float32), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=MS_DOMAIN, **attrs))
        return output

    eps = float(cfg.layer_norm_eps)

    def add_layer(p: str, layer: dict[str, Any], x: str, out: str) -> str:
        def w(key: str, transpose: bool = False) -> str:
            return const(p + key, layer[key].T if transpose else layer[key])

        def matmul(a: str, key: str) -> str:
            out = p + key.removesuffix("_w")  # "l0_o_w" names the kernel, "l0_o" the product
            nodes.append(helper.make_node("MatMul", [a, w(key, True)], [out], name=out))
            return out

        def skip_norm(a: str, skip: str, norm: str, bias: str, out: str) -> str:
            gamma, beta = const(p + norm + "_g", layer[norm][0]), const(p + norm + "_b", layer[norm][1])
            return node("SkipLayerNormalization", [a, skip, gamma, beta, w(bias)], out, epsilon=eps)

        a = node("Attention", [x, w("qkv_w", True), w("qkv_b"), "mask"], p + "attention",
                 num_heads=cfg.num_attention_heads)
        x = skip_norm(matmul(a, "o_w"), x, "ln1", "o_b", p + "x1")
        inner = node("BiasGelu", [matmul(x, "i_w"), w("i_b")], p + "gelu")
        return skip_norm(matmul(inner, "out_w"), x, "ln2", "out_b", out)

    x, last = "embedded", len(encoder.layers) - 1
    for i, layer in enumerate(encoder.layers):
        x = add_layer(f"l{i}_", layer, x, "states" if i == last else f"x{i + 1}")
    hidden = cfg.hidden_size
    graph = helper.make_graph(
        nodes, "bert_encoder_layers",
        [helper.make_tensor_value_info("embedded", TensorProto.FLOAT, ["batch", "length", hidden]),
         helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "length"])],
        [helper.make_tensor_value_info("states", TensorProto.FLOAT, ["batch", "length", hidden])],
        inits,
    )
    return model_of(graph)


def quantized_graph(model: Any) -> Any:
    """``model`` with its Attention and MatMul weights but ``FLOAT32_PRODUCT``'s in int8 per
    output channel (dynamic quantisation of the activations), as an ``onnx.ModelProto``."""
    import tempfile

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="nlu_engine_onnx_") as folder:
        path = Path(folder) / "encoder_int8.onnx"
        # its advice to pre-process the graph (shape inference) is a root-logger warning
        logging.disable(logging.WARNING)
        try:
            quantize_dynamic(
                model, path, op_types_to_quantize=["MatMul", "Attention"], per_channel=True,
                nodes_to_exclude=[n.name for n in model.graph.node if n.name.endswith(FLOAT32_PRODUCT)],
                weight_type=QuantType.QInt8, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        finally:
            logging.disable(logging.NOTSET)
        return onnx.load(str(path))


class OnnxEncoder:
    """A ``BertEncoder``'s parse path under ONNX Runtime: same call, same features within float32
    rounding (``quantize``: within quantisation error). The embeddings run in NumPy (a lookup and
    a LayerNorm), the layers in the graph: one session on one thread for a message or a few, one
    on the process's threads for larger batches (created on first use)."""

    def __init__(self, encoder: BertEncoder, quantize: bool = False) -> None:
        self.encoder = encoder
        self.config = encoder.config
        graph = encoder_graph(encoder)
        self.graph = quantized_graph(graph) if quantize else graph
        self._sessions: dict[int, Any] = {1: session(self.graph, 1)}

    def __call__(
        self, ids: np.ndarray, mask: np.ndarray, stop: int | None = None, tensorflow: bool = False
    ) -> np.ndarray:
        """``ids``, ``mask``: int (B, T) -> float32 (B, T, H), the last hidden states; anything
        else the float32 encoder asks for (``stop``, ``tensorflow``) it computes itself."""
        if (stop is not None and stop != len(self.encoder.layers)) or tensorflow:
            return self.encoder(ids, mask, stop, tensorflow)
        threads = 1 if ids.size <= SINGLE_THREAD_MAX_SUBTOKENS else process_threads()
        if threads not in self._sessions:
            self._sessions[threads] = session(self.graph, threads)
        embedded = self.encoder.embed(ids)
        feeds = {"embedded": embedded, "mask": np.ascontiguousarray(mask, np.int32)}
        return self._sessions[threads].run(None, feeds)[0]  # type: ignore[no-any-return]


_COMPILED: weakref.WeakKeyDictionary[BertEncoder, OnnxEncoder] = weakref.WeakKeyDictionary()


def parse_encoder(encoder: BertEncoder) -> BertEncoder | OnnxEncoder:
    """What encodes messages for features: ``encoder`` under ONNX Runtime when ``choose_runtime``
    says ``onnx`` or ``int8`` (built once per encoder), else ``encoder`` itself. A bfloat16
    encoder stays as it is."""
    runtime = choose_runtime()
    if encoder.precision != "float32" or runtime == "float32":
        return encoder
    if encoder not in _COMPILED:
        _COMPILED[encoder] = OnnxEncoder(encoder, quantize=runtime == "int8")
    return _COMPILED[encoder]
