"""The parse runtime: ONNX Runtime sessions, and the runtime name a model parses with.

Every network parses under ONNX Runtime, each whole in one graph: DIET, from its featurized
inputs to its scores and tag logits (``classifiers/diet/onnx_graph.py``, the ResponseSelector's
too, with or without a transformer) and the language model's encoder
(``featurizers/dense/bert_onnx.py``).
Each graph is written with ``onnx_builder`` from the weights an archive keeps (``.npz``) when a
model loads, and handed here. Training stays in TensorFlow.

The runtime is a property of the model, one of ``RUNTIMES``:

* ``float32``: the default;
* ``int8``: the language model's encoder's dense products in int8 with a scale per block of 32
  (``bert_onnx``, ``onnx_builder``), fast on CPUs with int8 dot products (``nn.cpu``); DIET's
  graph stays float32;
* ``int8_dynamic``: the same products in int8 with a scale per output column and one scale per
  call for the input (``DynamicQuantizeMatMul``, ``bert_onnx``): 1.5 to 2 times the float32
  graph's speed on such CPUs, coarser than ``int8`` yet within the default pipeline's scores;
  DIET stays float32;
* ``bfloat16``: the encoder's matrix products on bfloat16-rounded inputs and kernels, as
  ``precision: bfloat16`` trained it; DIET stays float32.

It is chosen at training (the config's top-level ``runtime``; a language model with
``precision: bfloat16`` makes bfloat16 the default), recorded in the archive's manifest, and may
be overridden when loading (``Model.load(path, runtime=...)``, ``--runtime``). An archive from
before the manifest recorded it parses as it did: bfloat16 if it has such a language model,
float32 otherwise.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from nlu_engine.contract.errors import NOTICE, ConfigError
from nlu_engine.contract.threads import process_threads
from nlu_engine.nn.cpu import Cpu, detect

logger = logging.getLogger(__name__)

#: the ONNX operator set the graphs are written in, and the domain of ONNX Runtime's own
#: operators (Attention, SkipLayerNormalization, Gelu, ...)
OPSET = 17
MS_DOMAIN = "com.microsoft"

Runtime = Literal["float32", "int8", "int8_dynamic", "bfloat16"]
RUNTIMES: tuple[Runtime, ...] = ("float32", "int8", "int8_dynamic", "bfloat16")
#: the runtimes that are fast only with int8 dot products (``Cpu.vnni``)
INT8_RUNTIMES = frozenset({"int8", "int8_dynamic"})
DEFAULT_RUNTIME: Runtime = "float32"
INSTALL = "pip install 'onnxruntime>=1.20,<2' 'onnx>=1.17,<2'"


def check_runtime(name: Any, where: str = "runtime") -> Runtime:
    """``name`` if it is a runtime, else a one-line ``ConfigError`` naming the runtimes."""
    if name not in RUNTIMES:
        raise ConfigError(f"{where} {name!r} is not a runtime: use one of {', '.join(RUNTIMES)}")
    return name  # type: ignore[no-any-return]


def require_onnxruntime() -> None:
    """Import ``onnxruntime`` and ``onnx``, or a one-line ``ConfigError`` saying what to install."""
    for module in ("onnxruntime", "onnx"):
        try:
            __import__(module)
        except Exception as error:  # ImportError, or a broken build's own error at import
            detail = " ".join(str(error).split())[:200]
            raise ConfigError(
                f"the parse runtime needs {module}, which cannot be imported "
                f"({type(error).__name__}: {detail}); install it: {INSTALL}"
            ) from None


def runtime_for_cpu(runtime: Runtime, explicit: bool, cpu: Cpu | None = None,
                    training: bool = False) -> Runtime:
    """The runtime a model parses with on this CPU: ``runtime``, except an int8 one the archive
    recorded (not ``explicit``ly asked for) on a CPU without int8 dot products, which runs float32
    instead. Either case says so in one warning. ``training``: ``runtime`` is the config's, which
    names the runtime to use where the CPU is fast in it (the shipped ``diet.yml``'s
    ``int8_dynamic``): without int8 dot products the model trains, records and parses float32,
    said in one notice."""
    cpu = cpu or detect()
    _warn_slow_path(cpu)
    if runtime not in INT8_RUNTIMES or cpu.vnni:
        return runtime
    if training:
        logger.log(NOTICE, "runtime %s: this CPU has no int8 dot products (AVX-512 VNNI, AVX-VNNI, "
                   "AMX), on which it would parse slower than float32: the model trains and parses in "
                   "float32", runtime)
        return "float32"
    if explicit:
        logger.warning("runtime %s: this CPU has no int8 dot products (AVX-512 VNNI, AVX-VNNI, "
                       "AMX); it parses in int8, but slower than float32", runtime)
        return runtime
    logger.warning("this model was trained for runtime %s, but this CPU has no int8 dot products "
                   "(AVX-512 VNNI, AVX-VNNI, AMX): it parses in float32 instead (--runtime %s "
                   "forces %s)", runtime, runtime, runtime)
    return "float32"


_SLOW_PATHS_SAID: set[Cpu] = set()


def _warn_slow_path(cpu: Cpu) -> None:
    """One warning a process, at the first model it loads or trains, on a CPU without AVX2."""
    line = cpu.slow_path()
    if line and cpu not in _SLOW_PATHS_SAID:
        _SLOW_PATHS_SAID.add(cpu)
        logger.warning(line)


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


class Sessions:
    """One graph's sessions: one thread for inputs up to ``single_thread_max`` positions (0:
    none), the process's threads (``process_threads``) for larger ones. The session small
    inputs use is created at once, the other on first use."""

    def __init__(self, model: Any, single_thread_max: int) -> None:
        self.model = model
        self.single_thread_max = single_thread_max
        first = 1 if single_thread_max > 0 else process_threads()
        self._by_threads: dict[int, Any] = {first: session(model, first)}

    def run(self, feeds: dict[str, Any], size: int) -> Any:
        """The graph's first output for ``feeds``; ``size`` (positions) chooses the threads."""
        return self.run_all(feeds, size)[0]

    def run_all(self, feeds: dict[str, Any], size: int) -> list[Any]:
        """The graph's outputs for ``feeds``, in its order; ``size`` (positions) chooses the threads."""
        threads = 1 if size <= self.single_thread_max else process_threads()
        if threads not in self._by_threads:
            self._by_threads[threads] = session(self.model, threads)
        return self._by_threads[threads].run(None, feeds)  # type: ignore[no-any-return]
