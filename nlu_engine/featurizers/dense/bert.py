"""A BERT encoder's weights (``safetensors``), its config and its WordPiece tokenizer.

It reads a model directory laid out as Hugging Face writes it::

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

It parses only as an ONNX graph (``bert_onnx.py``), in the model's runtime; it fine-tunes in
Keras (``bert_trainable.py``). The kernels are kept as the checkpoint stores them, (out, in).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.contract.errors import ConfigError

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"

_ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")


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


# --- the encoder ---------------------------------------------------------------------------------
class BertEncoder:
    """A BERT encoder's weights, checked against its config (the module doc): what
    ``bert_onnx.encoder_graph`` writes its graph from."""

    def __init__(self, config: BertConfig, weights: dict[str, np.ndarray]) -> None:
        self.config = config
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

    @classmethod
    def from_directory(cls, directory: Path) -> BertEncoder:
        config = BertConfig.from_file(directory / CONFIG_FILE)
        return cls(config, load_weights(directory / WEIGHTS_FILE, config))


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


def sentence_transformers_settings(folder: Path) -> tuple[str | None, bool, int | None]:
    """(pooling, normalize, max_seq_length) from a sentence-transformers folder, else Nones."""

    def read(path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    modules = read(folder / "modules.json")
    pooling: str | None = None
    normalize = False
    if isinstance(modules, list):
        for module in modules:
            kind = str(module.get("type", "")) if isinstance(module, dict) else ""
            if kind.endswith(".Pooling"):
                cfg = read(folder / str(module.get("path", "")) / "config.json") or {}
                if cfg.get("pooling_mode_cls_token"):
                    pooling = "cls"
                elif cfg.get("pooling_mode_max_tokens"):
                    pooling = "max"
                else:
                    pooling = "mean"
            elif kind.endswith(".Normalize"):
                normalize = True
    settings = read(folder / "sentence_bert_config.json")
    max_len = settings.get("max_seq_length") if isinstance(settings, dict) else None
    return pooling, normalize, int(max_len) if isinstance(max_len, int) else None
