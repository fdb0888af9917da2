"""A small, frozen BERT encoder (NumPy; TensorFlow for bfloat16) reading ``safetensors`` weights.

Only inference: no dropout, no pooler, no training. It reads a model directory laid out as
Hugging Face writes it::

    config.json          BertConfig (hidden_size, num_hidden_layers, ...; model_type "bert")
    model.safetensors    the weights (names as in ``BertModel``, with or without a ``bert.`` prefix)
    tokenizer.json       a ``tokenizers`` WordPiece tokenizer, or
    vocab.txt            the WordPiece vocabulary (+ ``tokenizer_config.json`` for do_lower_case)

The network, read top to bottom (B = batch, T = sub-tokens, H = hidden size, h = heads)::

    x = LN(word[ids] + position[0:T] + token_type[0])           (B, T, H)
    for each layer (post-LN, as in BERT):
        q, k, v = split(x @ W_qkv + b_qkv)                       3 × (B, h, T, H/h)
        a = softmax(q k^T / sqrt(H/h) + mask_bias)               (B, h, T, T)
        x = LN(x + (a v) @ W_o + b_o)                            (B, T, H)
        x = LN(x + act(x @ W_i + b_i) @ W_out + b_out)           (B, T, H); W_i: (H, I)
    return x                                                     last hidden state

In NumPy the attention (split, softmax, merge) is ``nlu_engine.nn.attention``, the one DIET's
inference uses too.

``precision="float32"`` (the default) runs in NumPy, so parsing never imports TensorFlow; a
training may ask for TensorFlow's float32 graph (``tensorflow=True``), which is faster on large
batches once TensorFlow is loaded anyway. The kernels are kept as the checkpoint stores them,
(out, in): one message's few rows go through ``W x^T``, which OpenBLAS runs faster than ``x W^T``
when x has few rows, and batches through ``x W^T``. ``precision="bfloat16"`` rounds the inputs
and kernels of the dense layers to bfloat16 (the products are accumulated in float32;
embeddings, attention scores, softmax and LayerNorm stay float32) and runs in one TensorFlow
``tf.function`` with a ``[None, None]`` input signature, so batches of any shape reuse one graph.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.nn.attention import attention, mask_bias, merge_heads, split_qkv
from nlu_engine.nn.ops import gelu, layer_norm

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"

_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")
#: "bfloat16" runs the dense layers' matrix products in bfloat16 (float32 everywhere else):
#: several times faster on CPUs with AMX-BF16 or AVX512-BF16, and much slower on others.
PRECISIONS = ("float32", "bfloat16")
#: inputs up to this many sub-tokens (a message or a few) run on one BLAS thread (``threads``);
#: larger batches use the threads the process has
SINGLE_THREAD_MAX_SUBTOKENS = 128
#: products with up to this many rows (sub-tokens) run as ``W x^T``, larger ones as ``x W^T``
FEW_ROWS = 64


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    model_type: str = "bert"

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ConfigError(f"language model config '{path}' cannot be read ({error})") from None
        model_type = str(raw.get("model_type", "bert"))
        if model_type != "bert":
            raise ConfigError(
                f"language model '{path.parent}': model_type '{model_type}' is not supported; "
                "this encoder runs BERT-architecture models (BERT, MiniLM, LaBSE, ...)"
            )
        act = str(raw.get("hidden_act", "gelu"))
        if act not in _ACTIVATIONS:
            raise ConfigError(
                f"language model '{path.parent}': hidden_act '{act}' is not supported; "
                f"supported: {', '.join(_ACTIVATIONS)}"
            )
        if raw.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(
                f"language model '{path.parent}': only absolute position embeddings are supported"
            )
        try:
            return cls(
                vocab_size=int(raw["vocab_size"]),
                hidden_size=int(raw["hidden_size"]),
                num_hidden_layers=int(raw["num_hidden_layers"]),
                num_attention_heads=int(raw["num_attention_heads"]),
                intermediate_size=int(raw["intermediate_size"]),
                hidden_act=act,
                max_position_embeddings=int(raw.get("max_position_embeddings", 512)),
                type_vocab_size=int(raw.get("type_vocab_size", 2)),
                layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
                model_type=model_type,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ConfigError(
                f"language model config '{path}' lacks or has a bad value for {error}"
            ) from None


# --- weights ------------------------------------------------------------------------------------
_CHECKSUMS: dict[tuple[str, int, int], str] = {}


def weights_checksum(path: Path) -> str:
    """SHA-256 of a weights file (cached per path, size and modification time)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _CHECKSUMS:
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 22), b""):
                digest.update(block)
        _CHECKSUMS[key] = digest.hexdigest()
    return _CHECKSUMS[key]


def load_weights(path: Path, config: BertConfig) -> dict[str, np.ndarray]:
    """The encoder's weights as float32 arrays, keyed as in ``BertModel`` without a prefix."""
    from safetensors.numpy import load_file

    try:
        raw = load_file(str(path))
    except Exception as error:  # safetensors raises its own error types
        raise ConfigError(f"language model weights '{path}' cannot be read ({error})") from None
    weights: dict[str, np.ndarray] = {}
    for name, array in raw.items():
        for prefix in ("bert.", "model."):
            if name.startswith(prefix):
                name = name[len(prefix) :]
        # old TF-converted checkpoints call LayerNorm parameters gamma / beta
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        )
        weights[name] = np.asarray(array, dtype=np.float32)
    needed = ["embeddings.word_embeddings.weight"] + [
        f"encoder.layer.{i}.output.dense.weight" for i in range(config.num_hidden_layers)
    ]
    missing = [n for n in needed if n not in weights]
    if missing:
        raise ConfigError(
            f"language model weights '{path}' lack {missing[0]}"
            f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''}; "
            "they do not match a BERT model with this config.json"
        )
    for name, shape in expected_shapes(config).items():
        if name in weights and weights[name].shape != shape:
            raise ConfigError(
                f"language model weights '{path}': {name} has shape {weights[name].shape}, "
                f"config.json implies {shape}; the weights do not match this config.json"
            )
    return weights


def expected_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """Every encoder weight's name and shape (PyTorch layout: Linear kernels are (out, in))."""
    h = config.hidden_size
    e = "embeddings."
    shapes: dict[str, tuple[int, ...]] = {
        e + "word_embeddings.weight": (config.vocab_size, h),
        e + "position_embeddings.weight": (config.max_position_embeddings, h),
        e + "token_type_embeddings.weight": (config.type_vocab_size, h),
        e + "LayerNorm.weight": (h,),
        e + "LayerNorm.bias": (h,),
    }
    for layer in range(config.num_hidden_layers):
        shapes.update(layer_shapes(config, layer))
    return shapes


def layer_shapes(config: BertConfig, layer: int) -> dict[str, tuple[int, ...]]:
    """The names and shapes of one encoder layer's weights."""
    h, i = config.hidden_size, config.intermediate_size
    p = f"encoder.layer.{layer}."
    shapes: dict[str, tuple[int, ...]] = {}
    for name in ("query", "key", "value"):
        shapes[f"{p}attention.self.{name}.weight"] = (h, h)
        shapes[f"{p}attention.self.{name}.bias"] = (h,)
    shapes.update({
        p + "attention.output.dense.weight": (h, h),
        p + "attention.output.dense.bias": (h,),
        p + "attention.output.LayerNorm.weight": (h,),
        p + "attention.output.LayerNorm.bias": (h,),
        p + "intermediate.dense.weight": (i, h),
        p + "intermediate.dense.bias": (i,),
        p + "output.dense.weight": (h, i),
        p + "output.dense.bias": (h,),
        p + "output.LayerNorm.weight": (h,),
        p + "output.LayerNorm.bias": (h,),
    })
    return shapes


# --- the encoder --------------------------------------------------------------------------------
def _np_activation(x: np.ndarray, kind: str) -> np.ndarray:
    if kind == "relu":
        return np.maximum(x, 0)
    if kind == "gelu":  # exact, erf-based
        return gelu(x)
    inner = np.float32(np.sqrt(2.0 / np.pi)) * (x + np.float32(0.044715) * x**3)
    return 0.5 * x * (1.0 + np.tanh(inner))  # the tanh approximation


def _dense(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """x (N, in) @ kernel (out, in)^T + bias -> (N, out), C-contiguous."""
    if x.shape[0] <= FEW_ROWS:
        return np.add((kernel @ x.T).T, bias, order="C")
    return x @ kernel.T + bias


class BertEncoder:
    """Frozen BERT: ``(ids, mask) -> last hidden states`` (see the module doc).

    ``float32`` runs in NumPy: for a single message that is several times faster than a graph
    call, and a model that is only parsed with never imports TensorFlow, whatever the batch.
    ``bfloat16`` needs bfloat16 matrix products and runs in TensorFlow.
    """

    def __init__(
        self, config: BertConfig, weights: dict[str, np.ndarray], precision: str = "float32"
    ) -> None:
        if precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.config = config
        self.precision = precision
        heads = config.num_attention_heads
        if config.hidden_size % heads:
            raise ConfigError(
                f"language model: hidden_size {config.hidden_size} is not divisible by "
                f"num_attention_heads {heads}"
            )

        def get(name: str) -> np.ndarray:
            try:
                return np.ascontiguousarray(weights[name], np.float32)
            except KeyError:
                raise ConfigError(f"language model weights lack '{name}'") from None

        e = "embeddings."
        self.word = get(e + "word_embeddings.weight")  # (V, H)
        self.position = get(e + "position_embeddings.weight")  # (P, H)
        self.token_type = get(e + "token_type_embeddings.weight")  # (2, H)
        self.emb_ln = (get(e + "LayerNorm.weight"), get(e + "LayerNorm.bias"))
        self.layers: list[dict[str, Any]] = []
        for i in range(config.num_hidden_layers):
            p = f"encoder.layer.{i}."
            a = p + "attention.self."
            self.layers.append(
                {
                    "qkv_w": np.concatenate(
                        [get(a + n + ".weight") for n in ("query", "key", "value")], 0
                    ),  # (3H, H): kernels (out, in), as stored
                    "qkv_b": np.concatenate([get(a + n + ".bias") for n in ("query", "key", "value")]),
                    "o_w": get(p + "attention.output.dense.weight"),  # (H, H)
                    "o_b": get(p + "attention.output.dense.bias"),
                    "ln1": (
                        get(p + "attention.output.LayerNorm.weight"),
                        get(p + "attention.output.LayerNorm.bias"),
                    ),
                    "i_w": get(p + "intermediate.dense.weight"),  # (I, H)
                    "i_b": get(p + "intermediate.dense.bias"),
                    "out_w": get(p + "output.dense.weight"),  # (H, I)
                    "out_b": get(p + "output.dense.bias"),
                    "ln2": (get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias")),
                }
            )
        self._tf_calls: dict[int, Any] = {}  # number of layers run -> compiled forward pass

    @classmethod
    def from_directory(cls, directory: Path, precision: str = "float32") -> BertEncoder:
        config = BertConfig.from_file(directory / CONFIG_FILE)
        return cls(config, load_weights(directory / WEIGHTS_FILE, config), precision)

    def __call__(
        self, ids: np.ndarray, mask: np.ndarray, stop: int | None = None, tensorflow: bool = False
    ) -> np.ndarray:
        """``ids``, ``mask``: int (B, T) -> float32 (B, T, H): the last hidden states, or with
        ``stop`` the hidden states after the first ``stop`` layers (0: the embeddings' output),
        the input a fine-tuned top of the encoder starts from. ``tensorflow`` runs float32 in
        TensorFlow (training only: parsing stays in NumPy)."""
        stop = len(self.layers) if stop is None else stop
        if self.precision == "float32" and not tensorflow:
            if ids.size <= SINGLE_THREAD_MAX_SUBTOKENS:
                with single_blas_thread():
                    return self._numpy_forward(ids, mask, stop)
            return self._numpy_forward(ids, mask, stop)
        if stop not in self._tf_calls:
            self._tf_calls[stop] = self._build_tf(stop)
        return self._tf_calls[stop](ids.astype(np.int32), mask.astype(np.int32)).numpy()  # type: ignore[no-any-return]

    # --- NumPy (float32) ----------------------------------------------------------------------
    def embed(self, ids: np.ndarray) -> np.ndarray:
        """int (B, T) -> float32 (B, T, H): the embeddings' output, the first layer's input."""
        length = ids.shape[1]
        x = self.word[ids] + self.position[None, :length] + self.token_type[None, None, 0]
        return layer_norm(x, *self.emb_ln, self.config.layer_norm_eps).astype(np.float32, copy=False)

    def _numpy_forward(self, ids: np.ndarray, mask: np.ndarray, stop: int) -> np.ndarray:
        cfg = self.config
        eps, heads, hidden = cfg.layer_norm_eps, cfg.num_attention_heads, cfg.hidden_size
        batch, length = ids.shape
        x = self.embed(ids).reshape(-1, hidden)  # (B*T, H)
        bias = mask_bias(mask)  # (B, 1, 1, T)
        for layer in self.layers[:stop]:
            qkv = _dense(x, layer["qkv_w"], layer["qkv_b"]).reshape(batch, length, 3 * hidden)  # (B, T, 3H)
            query, key, value = split_qkv(qkv, heads)  # 3 x (B, h, T, d)
            context = merge_heads(attention(query, key, value, bias)).reshape(-1, hidden)  # (B*T, H)
            x = layer_norm(x + _dense(context, layer["o_w"], layer["o_b"]), *layer["ln1"], eps)
            inner = _np_activation(_dense(x, layer["i_w"], layer["i_b"]), cfg.hidden_act)  # (B*T, I)
            x = layer_norm(x + _dense(inner, layer["out_w"], layer["out_b"]), *layer["ln2"], eps)
        return x.reshape(batch, length, hidden).astype(np.float32, copy=False)

    # --- TensorFlow (large float32 batches; bfloat16 matrix products) ---------------------------
    def _build_tf(self, stop: int) -> Any:
        from nlu_engine.nn.tensorflow_runtime import import_tensorflow

        tf = import_tensorflow()

        matmul_dtype = tf.bfloat16 if self.precision == "bfloat16" else tf.float32

        def kernel(array: np.ndarray) -> Any:
            return tf.constant(tf.cast(array, matmul_dtype))

        layers = [
            {**layer, **{name: kernel(layer[name]) for name in ("qkv_w", "o_w", "i_w", "out_w")}}
            for layer in self.layers[:stop]
        ]
        word, position = tf.constant(self.word), tf.constant(self.position)
        token_type, emb_ln = tf.constant(self.token_type[0]), tuple(map(tf.constant, self.emb_ln))
        cfg = self.config
        eps, heads, hidden = cfg.layer_norm_eps, cfg.num_attention_heads, cfg.hidden_size
        head_dim = hidden // heads

        def layer_norm(x: Any, params: tuple[Any, Any]) -> Any:
            mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
            return (x - mean) * tf.math.rsqrt(var + eps) * params[0] + params[1]

        def dense(x: Any, w: Any, b: Any) -> Any:  # product in the kernel's dtype, float32 result
            return tf.cast(tf.matmul(tf.cast(x, w.dtype), w, transpose_b=True), tf.float32) + b

        def act(x: Any) -> Any:
            if cfg.hidden_act == "relu":
                return tf.nn.relu(x)
            return tf.nn.gelu(x, approximate=cfg.hidden_act != "gelu")

        def forward(ids: Any, mask: Any) -> Any:
            batch, length = tf.shape(ids)[0], tf.shape(ids)[1]
            x = tf.gather(word, ids) + position[tf.newaxis, :length] + token_type  # (B, T, H)
            x = tf.reshape(layer_norm(x, emb_ln), [-1, hidden])  # (B*T, H)
            bias = (1.0 - tf.cast(mask, tf.float32))[:, tf.newaxis, tf.newaxis, :] * -1e9

            def split_heads(t: Any) -> Any:  # (B*T, H) -> (B, h, T, d)
                return tf.transpose(tf.reshape(t, [batch, length, heads, head_dim]), [0, 2, 1, 3])

            for layer in layers:
                q, k, v = tf.split(dense(x, layer["qkv_w"], layer["qkv_b"]), 3, axis=-1)
                scores = tf.matmul(split_heads(q), split_heads(k), transpose_b=True) / np.sqrt(head_dim)
                context = tf.matmul(tf.nn.softmax(scores + bias, axis=-1), split_heads(v))
                context = tf.reshape(tf.transpose(context, [0, 2, 1, 3]), [-1, hidden])
                x = layer_norm(x + dense(context, layer["o_w"], layer["o_b"]), layer["ln1"])
                inner = act(dense(x, layer["i_w"], layer["i_b"]))  # (B*T, I)
                x = layer_norm(x + dense(inner, layer["out_w"], layer["out_b"]), layer["ln2"])
            return tf.reshape(x, [batch, length, hidden])

        signature = [tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)]
        return tf.function(forward, input_signature=signature, reduce_retracing=True)


# --- WordPiece ------------------------------------------------------------------------------------
class WordPiece:
    """The model's WordPiece tokenizer (``tokenizers``), splitting each word into sub-token ids."""

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer
        from tokenizers.implementations import BertWordPieceTokenizer

        settings: dict[str, Any] = {}
        settings_path = directory / TOKENIZER_CONFIG_FILE
        if settings_path.is_file():
            try:
                settings = json.loads(settings_path.read_text(encoding="utf-8"))
            except ValueError:
                settings = {}
        if (directory / TOKENIZER_FILE).is_file():
            tokenizer = Tokenizer.from_file(str(directory / TOKENIZER_FILE))
        elif (directory / VOCAB_FILE).is_file():
            tokenizer = BertWordPieceTokenizer(
                str(directory / VOCAB_FILE),
                lowercase=bool(settings.get("do_lower_case", True)),
                strip_accents=settings.get("strip_accents"),
                handle_chinese_chars=bool(settings.get("tokenize_chinese_chars", True)),
            )._tokenizer
        else:
            raise ConfigError(
                f"language model '{directory}' has neither {TOKENIZER_FILE} nor {VOCAB_FILE}"
            )
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer

        def special(name: str, default: str) -> int:
            text = settings.get(name, default)
            if isinstance(text, dict):  # {"content": "[CLS]", ...}
                text = text.get("content", default)
            token_id = tokenizer.token_to_id(str(text))
            if token_id is None:
                raise ConfigError(f"language model '{directory}': vocabulary lacks {text}")
            return int(token_id)

        self.cls_id = special("cls_token", "[CLS]")
        self.sep_id = special("sep_token", "[SEP]")
        self.unk_id = special("unk_token", "[UNK]")
        self.pad_id = special("pad_token", "[PAD]")

    def split_words(self, sentences: list[list[str]]) -> list[list[list[int]]]:
        """Per sentence, per word: its sub-token ids (``[UNK]`` for a word that yields none).

        Each word is split on its own (as Rasa does), so sub-tokens never cross a word boundary.
        """
        result: list[list[list[int]]] = []
        nonempty = [words if words else [""] for words in sentences]
        encodings = self.tokenizer.encode_batch(
            nonempty, is_pretokenized=True, add_special_tokens=False
        )
        for words, encoding in zip(sentences, encodings, strict=True):
            pieces: list[list[int]] = [[] for _ in words]
            for token_id, word_id in zip(encoding.ids, encoding.word_ids, strict=True):
                if word_id is not None and word_id < len(words):
                    pieces[word_id].append(token_id)
            result.append([p or [self.unk_id] for p in pieces])
        return result


def model_files_present(directory: Path) -> bool:
    return (
        (directory / CONFIG_FILE).is_file()
        and (directory / WEIGHTS_FILE).is_file()
        and ((directory / TOKENIZER_FILE).is_file() or (directory / VOCAB_FILE).is_file())
    )

