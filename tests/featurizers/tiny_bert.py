"""A tiny random BERT written to a folder, for the language model's tests.

``config.json`` + ``model.safetensors`` + ``vocab.txt`` of a 2-layer BERT with hidden size 8:
small enough to encode and fine-tune in a test within seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "hello", "world", "un", "##believ", "##able", "book", "a", "table", "for", "two",
    "!", "the", "##s", "to", "paris", "fly", "from", "hi", "there", "order", "check",
    # the rest of the tiny training set's words (tests/conftest.py)
    "good", "morning", "hey", "bot", "flight", "please", "i", "need", "ticket", "london",
    "people", "rome", "tomorrow", "where", "is", "status", "of", "my", "now", "track", "berlin",
    "nyc", "madrid",
]  # fmt: skip
HIDDEN, LAYERS, HEADS, INTERMEDIATE = 8, 2, 2, 16


def tiny_bert(folder: Path, max_positions: int = 16, seed: int = 0) -> Path:
    """config.json + model.safetensors + vocab.txt of a random 2-layer BERT."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    config = {
        "model_type": "bert",
        "vocab_size": len(VOCAB),
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": INTERMEDIATE,
        "hidden_act": "gelu",
        "max_position_embeddings": max_positions,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
    }

    def r(*shape: int) -> np.ndarray:
        return rng.normal(0, 0.5, size=shape).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": r(len(VOCAB), HIDDEN),
        "embeddings.position_embeddings.weight": r(max_positions, HIDDEN),
        "embeddings.token_type_embeddings.weight": r(2, HIDDEN),
        "embeddings.LayerNorm.weight": 1 + r(HIDDEN) * 0.1,
        "embeddings.LayerNorm.bias": r(HIDDEN) * 0.1,
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            w[p + f"attention.self.{name}.weight"] = r(HIDDEN, HIDDEN)
            w[p + f"attention.self.{name}.bias"] = r(HIDDEN)
        w[p + "attention.output.dense.weight"] = r(HIDDEN, HIDDEN)
        w[p + "attention.output.dense.bias"] = r(HIDDEN)
        w[p + "attention.output.LayerNorm.weight"] = 1 + r(HIDDEN) * 0.1
        w[p + "attention.output.LayerNorm.bias"] = r(HIDDEN) * 0.1
        w[p + "intermediate.dense.weight"] = r(INTERMEDIATE, HIDDEN)
        w[p + "intermediate.dense.bias"] = r(INTERMEDIATE)
        w[p + "output.dense.weight"] = r(HIDDEN, INTERMEDIATE)
        w[p + "output.dense.bias"] = r(HIDDEN)
        w[p + "output.LayerNorm.weight"] = 1 + r(HIDDEN) * 0.1
        w[p + "output.LayerNorm.bias"] = r(HIDDEN) * 0.1
    # Hugging Face BertForPreTraining checkpoints prefix names with "bert."
    save_file({f"bert.{k}": v for k, v in w.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    return folder


def sentence_transformers_files(folder: Path, pooling: str, normalize: bool) -> None:
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if normalize:
        modules.append(
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        )
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": HIDDEN,
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_max_tokens": pooling == "max",
            }
        )
    )
