"""DIET's whole parse network as one ONNX graph: featurized inputs in, scores and tag logits out.

DIET (and the ResponseSelector, with or without a transformer) parses only here: one ONNX
Runtime call per batch runs the network from the featurized message to the intent (response)
similarities and the tag logits; ``inference.py`` feeds it and decodes the tags with
``crf_decode.py`` (the CRF's Viterbi and marginals, a decoding algorithm, not a network). The
graph is written with ``nn.onnx_builder`` in memory from the archive's named weights
(``weight_names``) when a model loads: the archive stays as it was (``.npz``). It is float32
whatever the model's runtime, and gives TensorFlow's outputs within float32 rounding for every
variant (tests/classifiers/diet)::

    inputs: token_mask [B, T], slot [B, L] (one-hot of the sentence position, L = T + 1),
            per sparse input its csr entries (ids, values, flat positions) [nnz] and its
            table [V, D] (fed from the weights' array: no copy of it in the sessions),
            dense_seq [B, T, Dd], dense_sent [B, Dd'] (those the model has)
    bag = bias + Σ_entries values · kernel[ids] at their positions  (Gather, ScatterND add)
    x_seq = unify(concat(bag_seq, dense_seq)) · token_mask                    [B, T, C]
    x = pad(x_seq, one position) + slot · unify(concat(bag_sent, dense_sent)) [B, L, C]
    x = text_hidden(x)                                                        [B, L, D]
    h = transformer(x) (below) or x                                           [B, L, U]
    sentence = Σ_l slot h;  text = sentence W_t + b_t                         [B, U], [B, E]
    labels = label_embed(label_hidden(label_dense(label features)))           [N, E] (constant)
    intent_sims = text · labelsᵀ (both L2-normalised when cosine)             [B, N]
    logits_entity = h[:, :T] W + b                                            [B, T, K]
    logits_role|group = h[:, :T] W_h + b', the decoded entity tags' part added by the decoder

The transformer (pre-LN, relative attention) with its mask, positions and clipped distances
computed in the graph from the mask::

    h = (x W_e + b_e) sqrt(U) + sinusoid(L, U)
    for each layer:
        n = LayerNorm(h)
        q, k, v = heads(n W_qkv)                                              [B, H, L, d] each
        logits = q kᵀ (+ Σ_k (q K_rᵀ)[b, h, i, k] relative[i, j, k])          [B, H, L, L]
        w = softmax(logits / sqrt(d) + bias(mask, causal))
        a = w v (+ (Σ_j w[b, h, i, j] relative[i, j, k]) V_r)                 [B, H, L, d]
        h = h + merge(a) W_o + b_o
        h = h + gelu(LayerNorm(h) W_i + b_i) W_out + b_out
    states = gelu(LayerNorm(h))

relative [L, L, Kr] is the one-hot of the distance j - i clipped to [-R, R] ([-R, 0] when
unidirectional). Shapes: B batch, T tokens, U transformer units, H heads, d = U / H, N labels,
E embedding dimension, K tags, Kr the rows of the relative tables K_r, V_r [H, Kr, d].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.nn.onnx_builder import FLOAT, INT32, GraphBuilder

#: LayerNorm's epsilon, as DIET's Keras layers
EPSILON = 1e-6
#: added to the attention logits of a position that may not be attended to (padding, the future)
NEG_INF = -1e9


@dataclass(frozen=True)
class Inputs:
    """The dense features a model's batches carry, by width (0: none); its sparse inputs are
    those it has a table for."""

    dense_seq: int = 0
    dense_sent: int = 0


@dataclass(frozen=True)
class Shape:
    """The network's shape: transformer heads and units, relative clipping R, causal or not,
    the similarity, the tag sets in decoding order, and transformer layers (0: none)."""

    heads: int
    units: int
    max_relative: int
    unidirectional: bool
    similarity: str
    tag_sets: tuple[str, ...]
    layers: int


def _dense(g: GraphBuilder, w: dict[str, np.ndarray], x: str, layer: str, out: str) -> str:
    """x @ kernel (+ bias) of the named Keras layer ``layer``."""
    return g.dense(x, layer, w[names.kernel(layer)], w.get(names.bias(layer)), out)


def _norm(g: GraphBuilder, w: dict[str, np.ndarray], x: str, layer: str, out: str) -> str:
    return g.layer_norm(x, layer, w[names.gamma(layer)], w[names.beta(layer)], EPSILON, out)


def _ffnn(g: GraphBuilder, w: dict[str, np.ndarray], x: str, stack: str) -> str:
    """An Ffnn stack: each of its dense layers followed by gelu (none: x itself)."""
    i = 0
    while names.kernel(names.hidden(stack, i)) in w:
        layer = names.hidden(stack, i)
        x = g.gelu(_dense(g, w, x, layer, layer + "_dense"), layer + "_out")
        i += 1
    return x


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


def _bag(g: GraphBuilder, w: dict[str, np.ndarray], kind: str, layer: str, rows: str) -> str:
    """A sparse input's csr entries (inputs ``<kind>_ids``, ``_values``, ``_positions``) times its
    table (the input ``<layer>_table``: fed, not copied into the session), plus its bias:
    [rows, D]."""
    ids = g.input(f"{kind}_ids", INT32, [f"{kind}_entries"])
    values = g.input(f"{kind}_values", FLOAT, [f"{kind}_entries"])
    positions = g.input(f"{kind}_positions", INT32, [f"{kind}_entries"])
    table = w[names.kernel(layer)]
    g.input(table_input(layer), FLOAT, [layer + "_vocabulary", table.shape[1]])
    bias = g.const(layer + "_bias", w.get(names.bias(layer), np.zeros(table.shape[1], np.float32)))
    return g.embedding_bag(ids, values, positions, rows, table_input(layer), bias, layer + "_out")


def table_input(layer: str) -> str:
    """The graph input a sparse layer's vocabulary-sized table is fed as."""
    return layer + "_table"


def _concat(g: GraphBuilder, parts: list[str], out: str) -> str:
    return parts[0] if len(parts) == 1 else g.op("Concat", parts, out, axis=-1)


def _features(g: GraphBuilder, w: dict[str, np.ndarray], inputs: Inputs) -> str:
    """The combined input features after text_hidden, x [B, L, D] (module doc)."""
    op, const = g.op, g.const
    shape = op("Shape", ["token_mask"], "batch_tokens")  # [2]: B, T
    batch = op("Shape", ["token_mask"], "batch_size", start=0, end=1)  # [1]
    seq, sent = [], []
    if names.kernel(names.SEQ_BAG) in w:
        bag = _bag(g, w, "seq", names.SEQ_BAG, op("ReduceProd", [shape], "positions", keepdims=1))
        seq_shape = op("Concat", [shape, const("last", np.array([-1]), np.int64)], "seq_shape", axis=0)
        seq.append(op("Reshape", [bag, seq_shape], "seq_bag_tokens"))  # [B, T, Dt]
    if inputs.dense_seq:
        seq.append(g.input("dense_seq", FLOAT, ["batch", "tokens", inputs.dense_seq]))
    if names.kernel(names.SENT_BAG) in w:
        sent.append(_bag(g, w, "sent", names.SENT_BAG, batch))  # [B, Dt']
    if inputs.dense_sent:
        sent.append(g.input("dense_sent", FLOAT, ["batch", inputs.dense_sent]))
    if not seq:
        raise ValueError("the network has no token features (no sparse table, no dense width)")
    unify = names.kernel(names.hidden(names.SEQ_UNIFY, 0)) in w
    x_seq = _concat(g, seq, "seq_features")
    if unify:
        x_seq = _ffnn(g, w, x_seq, names.SEQ_UNIFY)  # [B, T, C]
    last = const("last", np.array([-1]), np.int64)
    x_seq = op("Mul", [x_seq, op("Unsqueeze", ["token_mask", last], "token_mask_3d")], "x_seq")
    x = op("Pad", [x_seq, const("pad_position", np.array([0, 0, 0, 0, 1, 0]), np.int64)], "x_padded")
    if sent:
        x_sent = _concat(g, sent, "sent_features")
        if unify:
            x_sent = _ffnn(g, w, x_sent, names.SENT_UNIFY)  # [B, C]
        placed = op("Mul", ["slot_3d",
                            op("Unsqueeze", [x_sent, const("middle", np.array([1]), np.int64)], "x_sent")],
                    "sentence_placed")  # [B, L, C]: the sentence slot right after the last token
        x = op("Add", [x, placed], "x_combined")
    return _ffnn(g, w, x, names.TEXT_HIDDEN)


def _attention_inputs(g: GraphBuilder, shape: Shape, rows: int) -> None:
    """The attention's "bias" [B, 1, 1|L, L], "position" [L, U] and, with ``rows``, "relative"
    [L, L, Kr], from the mask [B, L] (module doc)."""
    op, const = g.op, g.const
    length = op("Squeeze", [op("Shape", ["mask"], "length_1d", start=1, end=2),
                            const("first", np.array([0]), np.int64)], "length")
    steps = op("Range", [const("zero", np.array(0), np.int64), length, const("one", np.array(1), np.int64)],
               "steps")  # [L]
    blocked = op("Unsqueeze", [op("Sub", [const("one_f", np.array(1.0)), "mask"], "padding"),
                               const("heads_queries", np.array([1, 2]), np.int64)], "blocked")  # [B, 1, 1, L]
    keys = op("Unsqueeze", [steps, const("first", np.array([0]), np.int64)], "keys")  # [1, L]: j
    queries = op("Unsqueeze", [steps, const("middle", np.array([1]), np.int64)], "queries")  # [L, 1]: i
    if shape.unidirectional:
        future = op("Cast", [op("Greater", [keys, queries], "later")], "future", to=FLOAT)  # [L, L]
        blocked = op("Min", [op("Add", [blocked, future], "blocked_sum"), "one_f"], "blocked_causal")
    op("Mul", [blocked, const("neg_inf", np.array(NEG_INF))], "bias")
    k = np.arange(shape.units)
    rates = (1.0 / np.power(10000.0, 2 * (k // 2) / shape.units)).astype(np.float32)
    angles = op("Mul", [op("Cast", [queries], "queries_f", to=FLOAT), const("angle_rates", rates[None])],
                "angles")  # [L, U]
    op("Where", [const("even", k % 2 == 0, np.bool_), op("Sin", [angles], "sin"), op("Cos", [angles], "cos")],
       "position")
    if rows:
        right = 0 if shape.unidirectional else shape.max_relative
        distance = op("Sub", [keys, queries], "distance")  # [L, L]: j - i
        clipped = op("Clip", [distance, const("left", np.array(-shape.max_relative), np.int64),
                              const("right", np.array(right), np.int64)], "clipped")
        index = op("Add", [clipped, const("shift", np.array(shape.max_relative), np.int64)], "table_rows")
        op("OneHot", [index, const("depth", np.array([rows]), np.int64),
                      const("off_on", np.array([0.0, 1.0]))], "relative", axis=-1)  # [L, L, Kr]


def _transformer(g: GraphBuilder, w: dict[str, np.ndarray], shape: Shape, x: str) -> str:
    """gelu(transformer(x)) [B, L, U] (module doc)."""
    layers = [names.TransformerLayer(i) for i in range(shape.layers)]
    _attention_inputs(g, shape, relative_rows(w, layers))
    scaled = g.op("Mul", [_dense(g, w, x, names.TRANSFORMER_EMBEDDING, "embedded"),
                          g.const("sqrt_units", np.array(shape.units**0.5))], "scaled")
    h = g.op("Add", [scaled, "position"], "h_in")  # [B, L, U]
    for layer in layers:
        p = f"l{layer.index}_"
        normed = _norm(g, w, h, layer.attention_norm, p + "normed_a")
        h = g.op("Add", [h, _attention(g, w, layer, normed, shape.heads, shape.units)], p + "h_a")
        inner = g.gelu(_dense(g, w, _norm(g, w, h, layer.ffn_norm, p + "normed_f"), layer.ffn_in,
                              p + "ffn_in"), p + "gelu")  # [B, L, 4U]
        h = g.op("Add", [h, _dense(g, w, inner, layer.ffn_out, p + "ffn_out")], p + "h")
    return g.gelu(_norm(g, w, h, names.TRANSFORMER_OUTPUT_NORM, "output_normed"), "states")


def _l2_normalized(g: GraphBuilder, x: str) -> str:
    """x / sqrt(max(Σ x², 1e-12)) over the last axis (``tf.nn.l2_normalize``)."""
    op, const = g.op, g.const
    squares = op("ReduceSum", [op("Mul", [x, x], x + "_sq"), const("last", np.array([-1]), np.int64)],
                 x + "_sum_sq", keepdims=1)
    norm = op("Sqrt", [op("Max", [squares, const("tiny", np.array(1e-12))], x + "_clamped")], x + "_norm")
    return op("Div", [x, norm], x + "_unit")


def _intent_head(g: GraphBuilder, w: dict[str, np.ndarray], shape: Shape, h: str,
                 label_features: np.ndarray) -> None:
    """Outputs "sentence" [B, U], "text_embed" [B, E] and "intent_sims" [B, N]."""
    op, const = g.op, g.const
    placed = op("Mul", [h, "slot_3d"], "sentence_only")
    sentence = op("ReduceSum", [placed, const("middle", np.array([1]), np.int64)], "sentence",
                  keepdims=0)  # [B, U]
    text = _dense(g, w, sentence, names.TEXT_EMBED, "text_embed")  # [B, E]
    labels = _dense(g, w, const("label_features", label_features), names.LABEL_DENSE, "labels_in")
    labels = _dense(g, w, _ffnn(g, w, labels, names.LABEL_HIDDEN), names.LABEL_EMBED, "labels")  # [N, E]
    if shape.similarity == "cosine":
        text_unit, labels = _l2_normalized(g, text), _l2_normalized(g, labels)
    else:
        text_unit = text
    sims = op("MatMul", [text_unit, op("Transpose", [labels], "labels_t", perm=[1, 0])],
              "intent_sims")  # [B, N]
    g.output(sentence, "sentence", FLOAT, ["batch", "units"])
    g.output(text, "text_embed", FLOAT, ["batch", "embedding"])
    g.output(sims, "intent_sims", FLOAT, ["batch", "labels"])


def _tag_heads(g: GraphBuilder, w: dict[str, np.ndarray], shape: Shape, h: str) -> dict[str, np.ndarray]:
    """Outputs "logits_<tag set>" [B, T, K]. A role's or group's logits also read an embedding of
    the decoded entity tags, a linear term: the graph gives the rest, and the returned table
    [K_entity, K] (the tag embedding folded into the logits' kernel) is that term per entity tag,
    which the decoder adds once the entity tags are decoded."""
    first, last, middle = (g.const(n, np.array([v]), np.int64)
                           for n, v in (("first", 0), ("last", -1), ("middle", 1)))
    tokens = g.op("Slice", [h, first, last, middle], "token_states")  # [B, T, U]
    tables: dict[str, np.ndarray] = {}
    for kind in shape.tag_sets:
        layer = names.tag_logits(kind)
        kernel, bias = w[names.kernel(layer)], w.get(names.bias(layer))
        embed = names.kernel(names.ENTITY_TAG_EMBED)
        if kind != "entity" and "entity" in shape.tag_sets and embed in w:
            width = w[embed].shape[1]  # the tag embedding's width E_t
            kernel, by_tag = kernel[:-width], kernel[-width:]  # [U, K], [E_t, K]
            tables[kind] = (w[embed] @ by_tag).astype(np.float32)  # [K_entity, K]
            tag_bias = w.get(names.bias(names.ENTITY_TAG_EMBED))
            extra = tag_bias @ by_tag if tag_bias is not None else np.zeros(by_tag.shape[1], np.float32)
            bias = extra if bias is None else bias + extra
        logits = g.dense(tokens, layer, kernel, bias, f"logits_{kind}")
        g.output(logits, f"logits_{kind}", FLOAT, ["batch", "tokens", kernel.shape[1]])
    return tables


def diet_graph(
    w: dict[str, np.ndarray], shape: Shape, inputs: Inputs, label_features: np.ndarray | None
) -> tuple[Any, dict[str, np.ndarray]]:
    """DIET's parse network as an ``onnx.ModelProto`` (module doc), and the role and group
    logits' entity-tag tables (``_tag_heads``). ``label_features`` [N, Dl]: the intent head's
    labels (None: no intent head)."""
    g = GraphBuilder("diet")
    g.input("token_mask", FLOAT, ["batch", "tokens"])
    g.input("slot", FLOAT, ["batch", "length"])
    g.op("Unsqueeze", ["slot", g.const("last", np.array([-1]), np.int64)], "slot_3d")  # [B, L, 1]
    x = _features(g, w, inputs)  # [B, L, D]
    pad = g.const("pad_slot", np.array([0, 0, 0, 1]), np.int64)
    g.op("Add", [g.op("Pad", ["token_mask", pad], "token_mask_padded"), "slot"], "mask")  # [B, L]
    h = _transformer(g, w, shape, x) if shape.layers else x
    if label_features is not None:
        _intent_head(g, w, shape, h, np.asarray(label_features, np.float32))
    tables = _tag_heads(g, w, shape, h)
    if not g.outputs:  # neither head (one intent, no entities): the states, which nothing reads
        g.output(h, "states", FLOAT, ["batch", "length", "units"])
    return g.model(), tables


def relative_rows(w: dict[str, np.ndarray], layers: list[names.TransformerLayer]) -> int:
    """Kr, the rows of the relative-position tables [H, Kr, d] (0 without relative attention)."""
    tables = [w[n] for layer in layers for n in (layer.key_relative, layer.value_relative) if n in w]
    return tables[0].shape[1] if tables else 0
