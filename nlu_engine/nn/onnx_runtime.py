"""ONNX Runtime sessions for the parse paths that run a graph: the language model's encoder
(``featurizers/dense/bert_onnx.py``) and DIET's transformer (``classifiers/diet/onnx_graph.py``).

Both build their graph in memory from the weights an archive keeps (``.npz``) with the ``onnx``
package's helpers, and hand it here. ``onnxruntime`` and ``onnx`` are optional (the ``lm``
extra): without them, those paths stay in NumPy. Importing this module imports neither.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

#: the ONNX operator set the graphs are written in, and the domain of ONNX Runtime's own
#: operators (Attention, SkipLayerNormalization, Gelu, ...)
OPSET = 17
MS_DOMAIN = "com.microsoft"


def onnx_runtime_available() -> bool:
    """Whether ``onnxruntime`` and ``onnx`` are installed (nothing is imported)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def forced_runtime(
    variable: str, runtimes: tuple[str, ...], needing_onnx: tuple[str, ...], installed: bool
) -> str:
    """The runtime the environment variable ``variable`` forces ("" when unset), after checking
    it is one of ``runtimes`` and, for those in ``needing_onnx``, that ONNX Runtime is
    ``installed``; otherwise a one-line ``ConfigError``."""
    from nlu_engine.contract.errors import ConfigError

    forced = os.environ.get(variable, "").strip().lower()
    if forced and forced not in runtimes:
        raise ConfigError(
            f"{variable}={forced!r} is not a runtime; use one of {', '.join(runtimes)} "
            "or unset it for the default"
        )
    if forced in needing_onnx and not installed:
        raise ConfigError(
            f"{variable}={forced} needs onnxruntime and onnx: "
            "pip install 'onnxruntime>=1.20,<2' 'onnx>=1.17,<2'"
        )
    return forced


def model_of(graph: Any) -> Any:
    """An ``onnx.ModelProto`` of ``graph`` (an ``onnx.GraphProto``) that ONNX Runtime reads."""
    from onnx import helper

    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="nlu_engine")
    model.ir_version = 9  # what onnxruntime >= 1.16 reads
    return model


def session(model: Any, threads: int) -> Any:
    """An ``onnxruntime.InferenceSession`` of ``model`` (an ``onnx.ModelProto``) on the CPU with
    ``threads`` intra-op threads, logging errors only."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only
    if threads != 1:  # spinning threads would take the cores from the process's other work
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def process_threads() -> int:
    """The threads a large batch may use: the process's BLAS share (``contract.threads``), else
    every core."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return os.cpu_count() or 1
