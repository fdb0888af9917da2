"""Where a parse's time goes: each pipeline component's share of one message, and of a batch.

    .venv/bin/python -m benchmarks.perf.parse_shares -m MODEL.tar.gz --data TEST.md [--runs 3]
        [--runtime float32|int8|int8_dynamic|bfloat16]

Loads a kept archive and parses the first 300 test messages one at a time, as
``benchmarks.perf.parse_latency`` does, timing each component's ``process`` on its own; then the
whole test set in one batch the same way. Prints, per component, the median over the runs of its
p50 ms for one message and its ms per message in the batch, in wall time and in the process's CPU
time (which a machine shared with other work inflates less), and the whole parse's for reference
(the pipeline's ``process``, without building the result dicts, on one BLAS thread as
``Pipeline.process`` runs; the components' p50s need not add up to the whole's p50, their means
would).

Within DIET (and the ResponseSelector, which parses the same way) it also times each stage of
``process``: "inputs" (messages to arrays: ``encoding.encode``, ``make_batch`` and the graph's
feeds), "graph" (the ONNX Runtime call) and "CRF decode" (``crf_decode.decode_tag_sets``),
listed under the component as "<component> · <stage>"; what is left of its time is the
intents' softmax, calibration and writing the results into the messages.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from nlu_engine.assembly.model import Model
from nlu_engine.classifiers.diet import batching, encoding, inference
from nlu_engine.contract.message import Message
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.evaluation.benchmarking import cpu_model
from nlu_engine.nn.onnx_runtime import Sessions
from nlu_engine.training_data import load_data

#: the component whose ``process`` runs now, and the stage times recorded inside it (wall, CPU)
_current: dict[str, Any] = {"component": "", "wall": {}, "cpu": {}}


def _timed(stage: str, function: Callable) -> Callable:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        begin, begin_cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            key = f"{_current['component']} · {stage}"
            _current["wall"][key] = _current["wall"].get(key, 0.0) + (time.perf_counter() - begin) * 1000
            _current["cpu"][key] = _current["cpu"].get(key, 0.0) + (time.process_time() - begin_cpu) * 1000
    return wrapper


@contextlib.contextmanager
def diet_stages() -> Iterator[None]:
    """Time DIET's stages (module doc) while the block runs: the functions wrapped, then put back."""
    patches = [(encoding, "encode", "inputs"), (batching, "make_batch", "inputs"),
               (inference.DIETInference, "feeds", "inputs"), (Sessions, "run_all", "graph"),
               (inference, "decode_tag_sets", "CRF decode")]
    originals = [getattr(owner, name) for owner, name, _ in patches]
    for (owner, name, stage), original in zip(patches, originals, strict=True):
        setattr(owner, name, _timed(stage, original))
    try:
        yield
    finally:
        for (owner, name, _), original in zip(patches, originals, strict=True):
            setattr(owner, name, original)


def timed_parse(model: Model, texts: list[str], wall: dict[str, list[float]],
                cpu: dict[str, list[float]]) -> None:
    """Run the pipeline on ``texts`` (one batch), adding each component's wall and CPU ms (the
    process's: a batch may run on more than one thread) to ``wall`` and ``cpu``."""
    messages = [Message(text=text.strip()) for text in texts]
    with single_blas_thread():  # as ``Pipeline.process`` runs the components
        _timed_components(model, messages, wall, cpu)


def _timed_components(model: Model, messages: list[Message], wall: dict[str, list[float]],
                      cpu: dict[str, list[float]]) -> None:
    start, start_cpu = time.perf_counter(), time.process_time()
    for i, component in enumerate(model.pipeline.components):
        name = f"{i}_{component.component_name()}"
        _current.update(component=name, wall={}, cpu={})
        begin, begin_cpu = time.perf_counter(), time.process_time()
        component.process(messages)
        wall[name].append((time.perf_counter() - begin) * 1000)
        cpu[name].append((time.process_time() - begin_cpu) * 1000)
        for stage, ms in _current["wall"].items():
            wall[stage].append(ms)
            cpu[stage].append(_current["cpu"][stage])
    wall["whole parse"].append((time.perf_counter() - start) * 1000)
    cpu["whole parse"].append((time.process_time() - start_cpu) * 1000)


def one_run(model: Model, texts: list[str]) -> dict[str, dict[str, float]]:
    wall: dict[str, list[float]] = defaultdict(list)
    cpu: dict[str, list[float]] = defaultdict(list)
    for text in texts[:300]:
        timed_parse(model, [text], wall, cpu)
    batch_wall: dict[str, list[float]] = defaultdict(list)
    batch_cpu: dict[str, list[float]] = defaultdict(list)
    timed_parse(model, texts, batch_wall, batch_cpu)
    return {name: {"p50_ms": statistics.median(wall[name]), "cpu_p50_ms": statistics.median(cpu[name]),
                   "batched_ms_per_message": batch_wall[name][0] / len(texts),
                   "batched_cpu_ms_per_message": batch_cpu[name][0] / len(texts)} for name in wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", required=True, help="a model archive")
    parser.add_argument("--data", required=True, help="test data whose texts are parsed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--runtime", default=None,
                        help="float32, int8, int8_dynamic or bfloat16 (default: the archive's)")
    args = parser.parse_args(argv)
    model = Model.load(args.model, runtime=args.runtime)
    texts = [m.text for m in load_data(args.data).messages]
    model.parse_batch(texts[:64])  # warm-up: first-call costs are not parse latency
    print(f"CPU: {cpu_model()}")
    with diet_stages():
        runs = [one_run(model, texts) for _ in range(args.runs)]
    median = {name: {key: round(statistics.median(run[name][key] for run in runs), 3)
                     for key in runs[0][name]} for name in runs[0]}
    for name, figures in median.items():
        print(f"{name:40s} p50 {figures['p50_ms']:6.3f} ms (CPU {figures['cpu_p50_ms']:6.3f})   "
              f"batched {figures['batched_ms_per_message']:6.3f} ms/msg "
              f"(CPU {figures['batched_cpu_ms_per_message']:6.3f})")
    print(json.dumps({"model": args.model, "cpu": cpu_model(), "runs": args.runs, "median": median}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
