"""The BERT encoder's parse graph, run by ONNX Runtime in the model's runtime.

``BertEncoder`` (``bert.py``) holds the weights (pretrained, with a fine-tuning's tuned layers
merged in); ``encoder_graph`` writes the network once, with ``nn.onnx_builder`` and ONNX
Runtime's fused transformer operators (no export, no download)::

    ids, mask (B, T) int32
    x = LayerNormalization(word[ids] + position[0:T] + token_type[0])     (B, T, H)
    for each layer (the first ``layers`` of them):
        a = Attention(x, W_qkv (H, 3H), b_qkv, mask)                          com.microsoft, fused
        x = SkipLayerNormalization(a @ W_o, x, gamma, beta, b_o)              LN(x + a W_o + b_o)
        i = act(x @ W_i + b_i)                                                (B, T, I)
        x = SkipLayerNormalization(i @ W_out, x, gamma, beta, b_out)
    states = x                                                                (B, T, H) float32

``act`` is BiasGelu (erf gelu), FastGelu (the tanh approximation: ``gelu_new``,
``gelu_pytorch_tanh``) or Relu, as the model's ``hidden_act`` says. The model's runtime
(``nn.onnx_runtime``) chooses the graph:

* ``float32``: the graph as written; TensorFlow's states within float32 rounding;
* ``bfloat16``: the four products read bfloat16-rounded inputs and kernels (``precision:
  bfloat16``), as TensorFlow's bfloat16 layers computed them; everything else float32;
* ``int8``: the three dense products of each layer (``W_o``, ``W_i``, ``W_out``) as ONNX
  Runtime's ``MatMulNBits``: int8 weights with a scale per block of 32 inputs, the activations
  quantised per block of 32 at each call, int8 dot products (``nn.onnx_builder``); the fused
  attention, embeddings, softmax and LayerNorm stay float32. Fast on CPUs with int8 dot products
  (``nn.cpu``); its error is about a fifth of per-tensor dynamic quantisation's, yet a few
  messages of few-shot models still move by more than 0.1 (BENCHMARKS.md), so it is opt-in.
* ``int8_dynamic``: the same three products as ONNX Runtime's ``DynamicQuantizeMatMul``: int8
  weights with a scale per output column, the input quantised once per call (one scale), MLAS's
  int8 GEMM; ``W_i`` reads the first LayerNorm's normalised values (gamma folded into its kernel,
  beta into its bias: ``GraphBuilder.normalised_matmul``), which keeps its input's large channels
  from taking up the one scale. The graph runs about twice as fast as float32's on a CPU with
  int8 dot products, its states about 10 % off float32's (block int8: 2 %), yet the default
  pipeline's scores hold (BENCHMARKS.md, "One parse, to the kernel").

The graph lives only in memory, built when a model loads: the archive keeps the weights as they
were (``.npz``, ``safetensors``). Training runs the frozen layers below the tuned ones through
the float32 graph too (``frozen_encoder``).
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from nlu_engine.nn.onnx_builder import FLOAT, INT32, GraphBuilder
from nlu_engine.nn.onnx_runtime import Runtime, Sessions

if TYPE_CHECKING:
    from nlu_engine.featurizers.dense.bert import BertEncoder

logger = logging.getLogger(__name__)

#: inputs up to this many sub-tokens run on a one-thread session, larger ones on the process's
#: threads. None does: even one message's pass reads all of the encoder's weights (tens of MB),
#: which two threads read in much less time than one (BENCHMARKS.md); a server's workers each
#: have their share of the cores as the process's threads (``contract.threads``)
SINGLE_THREAD_MAX_SUBTOKENS = 0


# --- the graph ----------------------------------------------------------------------------------
def _embeddings(g: GraphBuilder, encoder: BertEncoder) -> str:
    """LN(word[ids] + position[0:T] + token_type[0]) (B, T, H)."""
    word = g.op("Gather", [g.const("word", encoder.word), "ids"], "word_vectors")
    length = g.op("Slice", [g.op("Shape", ["ids"], "ids_shape"), g.const("one", np.array([1]), np.int64),
                            g.const("two", np.array([2]), np.int64)], "length")
    position = g.op("Slice", [g.const("position", encoder.position), g.const("zero", np.array([0]), np.int64),
                              length], "position_vectors")  # (T, H)
    summed = g.op("Add", [g.op("Add", [word, position], "word_position"),
                          g.const("token_type", encoder.token_type[0])], "summed")
    return g.layer_norm(summed, "embeddings", *encoder.emb_ln, float(encoder.config.layer_norm_eps),
                        "embedded")


def _activation(g: GraphBuilder, kind: str, product: str, bias: str, out: str) -> str:
    if kind == "gelu":
        return g.ms("BiasGelu", [product, bias], out)
    if kind in ("gelu_new", "gelu_pytorch_tanh"):
        return g.ms("FastGelu", [product, bias], out)
    return g.op("Relu", [g.op("Add", [product, bias], out + "_in")], out)


def _layer(g: GraphBuilder, encoder: BertEncoder, index: int, x: str, out: str) -> str:
    cfg, layer, p = encoder.config, encoder.layers[index], f"l{index}_"
    eps = float(cfg.layer_norm_eps)

    def skip_norm(a: str, skip: str, norm: str, bias: str, out: str) -> str:
        gamma, beta = g.const(p + norm + "_g", layer[norm][0]), g.const(p + norm + "_b", layer[norm][1])
        return g.ms("SkipLayerNormalization", [a, skip, gamma, beta, g.const(p + bias, layer[bias])], out,
                    epsilon=eps)

    # kernels are stored (out, in) as the checkpoint has them; the graph multiplies x @ W^T
    a = g.ms("Attention", [g.product_input(x), g.kernel(p + "qkv_w", layer["qkv_w"].T),
                           g.const(p + "qkv_b", layer["qkv_b"]), "mask"], p + "attention",
             num_heads=cfg.num_attention_heads)
    x = skip_norm(g.matmul(a, p + "o_w", layer["o_w"].T, p + "o"), x, "ln1", "o_b", p + "x1")
    # x is the first LayerNorm's output: under int8_dynamic W_i reads its normalised values
    product = g.normalised_matmul(x, p + "i_w", layer["i_w"].T, *layer["ln1"], p + "i")
    inner = _activation(g, cfg.hidden_act, product, g.const(p + "i_b", layer["i_b"]), p + "act")
    return skip_norm(g.matmul(inner, p + "out_w", layer["out_w"].T, p + "out"), x, "ln2", "out_b", out)


def encoder_graph(encoder: BertEncoder, layers: int | None = None, runtime: Runtime = "float32") -> Any:
    """The encoder's graph (an ``onnx.ModelProto``; see the module doc) through its first
    ``layers`` layers (all by default; 0: the embeddings' output), in ``runtime``."""
    g = GraphBuilder("bert_encoder", matmul_dtype=runtime)
    g.input("ids", INT32, ["batch", "length"])
    g.input("mask", INT32, ["batch", "length"])
    x = _embeddings(g, encoder)
    for i in range(len(encoder.layers) if layers is None else layers):
        x = _layer(g, encoder, i, x, f"x{i + 1}")
    g.output(x, "states", FLOAT, ["batch", "length", encoder.config.hidden_size])
    return g.model()


class OnnxEncoder:
    """A ``BertEncoder`` under ONNX Runtime: ``(ids, mask) -> states`` in one graph call."""

    def __init__(self, encoder: BertEncoder, runtime: Runtime = "float32", layers: int | None = None) -> None:
        self.config = encoder.config
        self.runtime = runtime
        self.graph = encoder_graph(encoder, layers, runtime)
        self._sessions = Sessions(self.graph, SINGLE_THREAD_MAX_SUBTOKENS)

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """``ids``, ``mask``: int (B, T) -> float32 (B, T, H), the hidden states. Under
        ``int8_dynamic`` each row runs alone, cut to its mask's length (the padding's states are
        zeros): the input's one int8 scale per call is then the message's own, so a message's
        states do not depend on the batch it came in (10 % apart otherwise)."""
        ids, mask = np.ascontiguousarray(ids, np.int32), np.ascontiguousarray(mask, np.int32)
        if self.runtime != "int8_dynamic" or len(ids) == 0:
            return self._sessions.run({"ids": ids, "mask": mask}, ids.size)  # type: ignore[no-any-return]
        states = np.zeros((*ids.shape, self.config.hidden_size), np.float32)
        for row, length in enumerate(mask.sum(axis=1)):
            if length:
                feeds = {"ids": ids[row : row + 1, :length], "mask": mask[row : row + 1, :length]}
                states[row, :length] = self._sessions.run(feeds, int(length))[0]
        return states


_COMPILED: weakref.WeakKeyDictionary[BertEncoder, dict[tuple[str, int | None], OnnxEncoder]] = (
    weakref.WeakKeyDictionary()
)


def _compiled(encoder: BertEncoder, runtime: Runtime, layers: int | None) -> OnnxEncoder:
    graphs = _COMPILED.setdefault(encoder, {})
    if (runtime, layers) not in graphs:
        graphs[(runtime, layers)] = OnnxEncoder(encoder, runtime, layers)
    return graphs[(runtime, layers)]


def parse_encoder(encoder: BertEncoder, runtime: Runtime) -> OnnxEncoder:
    """What encodes messages for features in ``runtime`` (built once per encoder and runtime)."""
    return _compiled(encoder, runtime, None)


def frozen_encoder(encoder: BertEncoder, layers: int) -> OnnxEncoder:
    """The float32 graph of the first ``layers`` layers: the frozen input of a fine-tuning."""
    return _compiled(encoder, "float32", layers)
