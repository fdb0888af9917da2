"""DIET's storage format: the files of its folder in a model archive, and how its weights are
rounded for them.

    diet.json           ``format`` (``WEIGHTS_FORMAT``), the weights' shapes, and the state the
                        component hands over: intents, tag vocabularies, input widths and
                        feature blocks, training history
    weights.npz         the network's weights by name (``weight_names``) at float16; the sparse
                        input tables (``SPARSE_TABLES``, vocabulary x 128: most of the model) as
                        int8 with one float32 scale per row (``<name>:int8``, ``<name>:scale``)
    label_features.npz  the label features the network was trained with
    examples.npz        hashes of the training examples, for fine-tuning's rehearsal

The calibration writes its own files (``classifiers/calibration.py``). Training rounds the
weights as they are stored (``stored_precision``) before it predicts with them, so a model
predicts the same before and after saving. Nothing here reads the component: it hands its
arrays and state to :func:`save` and gets them back from :func:`load`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.classifiers.diet import weight_names
from nlu_engine.contract.npz import Expected, load_npz, refusal, shown

STATE_FILE = "diet.json"
WEIGHTS_FILE = "weights.npz"
LABEL_FEATURES_FILE = "label_features.npz"
EXAMPLES_FILE = "examples.npz"  # hashes of the training examples, for fine-tuning's rehearsal
#: 2: weights by name (``DIETNetwork.export_weights``), read by the parse graph (``onnx_graph.py``)
WEIGHTS_FORMAT = 2
#: the sparse input tables (see ``sparse_weights_dtype``) and how their int8 form is stored
SPARSE_TABLES = weight_names.SPARSE_TABLES
INT8, SCALE = ":int8", ":scale"
FLOAT_WEIGHTS = ("float16", "float32")  # as saved (float16), or as trained
LABEL_KERNEL = weight_names.kernel(weight_names.LABEL_DENSE)  # [label features, units]

#: a sparse table's int8 form: name -> (q [V, U] int8, scale [V] float32)
Quantized = dict[str, tuple[np.ndarray, np.ndarray]]


# --- rounding -------------------------------------------------------------------------------
def quantize_rows(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per row: weights [V, U] -> (q [V, U] int8, scale [V] float32), with
    weights ~= q * scale[:, None] and an error of at most half a step (max |row| / 254)."""
    scale = np.empty(len(weights), np.float32)  # [V]
    q = np.empty(weights.shape, np.int8)
    for start in range(0, len(weights), 8192):  # in slices: no full-size float temporaries
        rows = weights[start : start + 8192]
        part = (np.abs(rows).max(axis=1) / 127.0).astype(np.float32)
        safe = np.where(part > 0, part, 1.0)[:, None]
        q[start : start + 8192] = np.clip(np.rint(rows / safe), -127, 127)
        scale[start : start + 8192] = part
    return q, scale


def dequantize_rows(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    weights = q.astype(np.float32)  # [V, U]
    weights *= scale[:, None]
    return weights


def half_precision(weights: np.ndarray) -> np.ndarray:
    """float32 values rounded to float16 precision (other dtypes unchanged)."""
    if weights.dtype != np.float32:
        return weights
    return weights.astype(np.float16).astype(np.float32)


def stored_precision(
    exported: dict[str, np.ndarray], sparse_weights_dtype: str
) -> tuple[dict[str, np.ndarray], Quantized]:
    """(the network's ``exported`` weights rounded as they will be stored, the int8 form of the
    sparse tables when ``sparse_weights_dtype`` is ``int8``). Weights are stored as float16
    (half the archive) and the sparse input tables as int8 with one scale per row; rounding
    them now, one at a time (``exported`` is emptied as it goes), keeps predictions identical
    before and after saving."""
    weights: dict[str, np.ndarray] = {}
    quantized: Quantized = {}
    for name in list(exported):
        values = exported.pop(name)
        if sparse_weights_dtype == "int8" and name in SPARSE_TABLES:
            q, scale = quantize_rows(values)
            del values
            quantized[name] = (q, scale)
            weights[name] = dequantize_rows(q, scale)
        else:
            weights[name] = half_precision(values)
    return weights, quantized


# --- the folder -----------------------------------------------------------------------------
@dataclass
class Stored:
    """What DIET's folder holds, besides the calibration."""

    state: dict[str, Any]  # diet.json, less its format and the weights' shapes
    weights: dict[str, np.ndarray]  # float32 where stored as float16; int8 tables dequantized
    quantized: Quantized  # the int8 form of the sparse tables
    label_features: np.ndarray  # float32 [N, V_label]
    example_hashes: np.ndarray | None  # None in a model saved before fine-tuning existed


def save(directory: Path, stored: Stored) -> None:
    """Write ``stored`` into ``directory`` (weights at float16, sparse tables as int8)."""
    arrays = {
        name: w.astype(np.float16) if w.dtype == np.float32 else w
        for name, w in stored.weights.items() if name not in stored.quantized
    }
    for name, (q, scale) in stored.quantized.items():
        arrays[f"{name}{INT8}"], arrays[f"{name}{SCALE}"] = q, scale
    np.savez_compressed(directory / WEIGHTS_FILE, **arrays)
    np.savez(directory / LABEL_FEATURES_FILE, label_features=stored.label_features)
    np.savez_compressed(directory / EXAMPLES_FILE, hashes=stored.example_hashes)
    state = {
        "format": WEIGHTS_FORMAT,
        **stored.state,
        "weight_shapes": {name: list(w.shape) for name, w in stored.weights.items()},
    }
    (directory / STATE_FILE).write_text(json.dumps(state, ensure_ascii=False))


def load(directory: Path) -> Stored:
    """What :func:`save` wrote into ``directory``; ValueError for a model of another format,
    ArchiveMemberError (``contract.npz``) for an array that is not what ``diet.json`` records
    (shape) or the format stores (dtype), or that holds NaN or infinite values."""
    state = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    if not isinstance(state, dict) or state.get("format") != WEIGHTS_FORMAT:
        found = state.get("format", 1) if isinstance(state, dict) else "unknown"
        raise ValueError(
            f"the model was saved by an older nlu_engine (weights format {found}, "
            f"this version reads {WEIGHTS_FORMAT}); train it again"
        )
    shapes = _weight_shapes(state.pop("weight_shapes", None))
    hashes = None
    if (directory / EXAMPLES_FILE).is_file():
        hashes = load_npz(directory / EXAMPLES_FILE, {"hashes": Expected(dtype="uint64")})["hashes"]
    label_shape = None
    if isinstance(state.get("intents"), list) and LABEL_KERNEL in shapes:
        label_shape = (len(state["intents"]), shapes[LABEL_KERNEL][0])
    label_features = load_npz(
        directory / LABEL_FEATURES_FILE, {"label_features": Expected(label_shape, "float32")}
    )["label_features"]
    weights, quantized = _read_weights(directory / WEIGHTS_FILE, shapes)
    if missing := sorted(set(shapes) - set(weights)):
        raise refusal(directory / WEIGHTS_FILE, f"lacks the weight {shown(missing[0])} {STATE_FILE} names")
    if extra := sorted(set(weights) - set(shapes)):
        raise refusal(directory / WEIGHTS_FILE, f"holds {shown(extra[0])}, which {STATE_FILE} does not name")
    del state["format"]
    return Stored(state=state, weights=weights, quantized=quantized, label_features=label_features,
                  example_hashes=hashes)


def _weight_shapes(raw: Any) -> dict[str, tuple[int, ...]]:
    """``diet.json``'s ``weight_shapes``: weight name -> shape."""
    if not isinstance(raw, dict) or not all(
        isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape) for shape in raw.values()
    ):
        raise ValueError(f"{STATE_FILE}: weight_shapes is not a map of weight names to shapes")
    return {str(name): tuple(shape) for name, shape in raw.items()}


def _read_weights(path: Path, shapes: dict[str, tuple[int, ...]]) -> tuple[dict[str, np.ndarray], Quantized]:
    """(every weight in float32, the int8 tables' stored form) from ``weights.npz``, each array
    checked against ``shapes`` and the format's dtypes before it is read: a weight at float16,
    a sparse table at int8 with a float32 scale per row."""
    expected: dict[str, Expected] = {}
    for name, shape in shapes.items():
        expected[name] = Expected(shape, FLOAT_WEIGHTS, required=False)
        if name in SPARSE_TABLES and shape:
            expected[f"{name}{INT8}"] = Expected(shape, "int8", required=False)
            expected[f"{name}{SCALE}"] = Expected(shape[:1], "float32", required=False)
    stored = load_npz(path, expected)
    weights: dict[str, np.ndarray] = {}
    quantized: Quantized = {}
    for name, w in stored.items():
        if name.endswith(INT8):
            base = name[: -len(INT8)]
            scale = stored.get(f"{base}{SCALE}")
            if base in stored or scale is None or w.ndim != 2 or scale.shape != (w.shape[0],):
                raise refusal(path, f"the quantized weights {shown(base)} are malformed")
            quantized[base] = (w, scale)
            weights[base] = dequantize_rows(w, scale)
        elif not name.endswith(SCALE):
            weights[name] = w.astype(np.float32) if w.dtype == np.float16 else w
    return weights, quantized
