"""Where a parse's ONNX Runtime time goes, op by op: ONNX Runtime's own profiler on every network
a model parses with (the language model, the sentence encoder, DIET), one message and a batch.

    .venv/bin/python -m benchmarks.perf.onnx_profile -m MODEL.tar.gz --data TEST.md
        [--messages 200] [--batch 256] [--top 6] [--flush-mb 0] [--keep DIR]

Every ONNX Runtime session the model opens is opened with the profiler on (``enable_profiling``:
one JSON trace a session, written when the session ends its profiling). After a warm-up, four
phases run, each split out of the traces by the order of the sessions' runs:

* **pipeline, one message**: the first ``--messages`` test messages, ``Model.parse`` one at a time;
* **alone, one message**: each session runs again the very inputs it ran in the phase above,
  back to back, nothing else between its runs: the same graph and inputs, without the rest of
  the pipeline around it (``--flush-mb N`` reads N MB of other memory between the runs, as the
  pipeline's other components do, to tell the caches' share from the thread pool's);
* **pipeline, batch** and **alone, batch**: ``Model.parse_batch`` of the first ``--batch``
  messages, and each session's runs of it again.

Printed, per phase and graph: its runs' mean wall time (``model_run``), the kernels' share, and
the rest (the executor, allocation, inputs and outputs); of the intra-op thread pool, the time
the calling thread spent handing work to the pool's threads ("wake") and waiting for them, and
the tasks those threads ran; then the graph's slowest op types, with the same split. The
pipeline phases also print the process's CPU time beside the wall time, split by thread: the
calling thread, ONNX Runtime's pool threads (started with the model) and the threads started
before it (NumPy's BLAS). The profiler itself costs a few microseconds a node, in every phase
alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.assembly.model import Model
from nlu_engine.evaluation.benchmarking import cpu_model
from nlu_engine.training_data import load_data


@dataclass
class Profiled:
    """One profiled session: its runs' inputs (while ``keep`` is set) and the phase of each run."""

    session: Any
    threads: int
    phases: list[str] = field(default_factory=list)
    kept: list[dict[str, np.ndarray]] = field(default_factory=list)

    @property
    def graph(self) -> str:
        return f"{self.session.get_modelmeta().graph_name} ({self.threads} thr)"


_state: dict[str, Any] = {"phase": "load", "keep": False, "sessions": []}


@contextlib.contextmanager
def profiled_sessions(folder: Path) -> Iterator[list[Profiled]]:
    """Every ``onnxruntime.InferenceSession`` opened in the block profiles into ``folder``, and
    records the phase of each of its runs."""
    import onnxruntime as ort

    original = ort.InferenceSession

    class Session(original):  # type: ignore[misc, valid-type]
        def __init__(self, model: Any, options: Any = None, *args: Any, **kwargs: Any) -> None:
            options = options or ort.SessionOptions()
            options.enable_profiling = True
            options.profile_file_prefix = str(folder / f"session{len(_state['sessions'])}")
            super().__init__(model, options, *args, **kwargs)
            self._profiled = Profiled(self, options.intra_op_num_threads or 0)
            _state["sessions"].append(self._profiled)

        def run(self, outputs: Any, feeds: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            self._profiled.phases.append(_state["phase"])
            if _state["keep"]:
                self._profiled.kept.append(dict(feeds))
            return super().run(outputs, feeds, *args, **kwargs)

    ort.InferenceSession = Session
    try:
        yield _state["sessions"]
    finally:
        ort.InferenceSession = original


def thread_cpu() -> dict[int, float]:
    """CPU seconds of each of this process's threads so far (Linux; empty elsewhere)."""
    found = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for task in Path("/proc/self/task").glob("*"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (task / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            found[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def timed(phase: str, work: Any, before_load: set[int]) -> dict[str, float]:
    """Run ``work()`` in ``phase``: its wall and process CPU seconds, and the CPU seconds of the
    calling thread, of the threads started before the model loaded (NumPy's BLAS) and of those
    started since (ONNX Runtime's thread pools)."""
    _state["phase"] = phase
    threads_before = thread_cpu()
    start, start_cpu = time.perf_counter(), time.process_time()
    work()
    spent = {"wall": time.perf_counter() - start, "cpu": time.process_time() - start_cpu}
    threads_after = thread_cpu()
    me = threading.get_native_id()
    used = {tid: cpu - threads_before.get(tid, 0.0) for tid, cpu in threads_after.items()}
    spent["caller"] = used.pop(me, 0.0)
    spent["blas"] = sum(cpu for tid, cpu in used.items() if tid in before_load)
    spent["pools"] = sum(cpu for tid, cpu in used.items() if tid not in before_load)
    return spent


def replay(sessions: list[Profiled], phase: str, flush_mb: int) -> None:
    """Each session runs its kept inputs again, back to back (``--flush-mb``: reading that much
    other memory between two runs)."""
    other = np.ones(flush_mb * 2**18, np.float32) if flush_mb else None
    _state["phase"] = phase
    for profiled in sessions:
        for feeds in profiled.kept:
            if other is not None:
                other.sum()
            profiled.session.run(None, feeds)
        profiled.kept.clear()


def events_by_phase(profiled: Profiled) -> dict[str, list[tuple[dict, list[dict]]]]:
    """The session's trace: per phase, each run's ``model_run`` event and its kernels' events."""
    trace = json.loads(Path(profiled.session.end_profiling()).read_text())
    runs = sorted((e for e in trace if e.get("name") == "model_run"), key=lambda e: e["ts"])
    kernels = sorted((e for e in trace if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")),
                     key=lambda e: e["ts"])
    found: dict[str, list[tuple[dict, list[dict]]]] = defaultdict(list)
    k = 0
    for run, phase in zip(runs, profiled.phases, strict=True):
        inside = []
        while k < len(kernels) and kernels[k]["ts"] < run["ts"] + run["dur"]:
            if kernels[k]["ts"] >= run["ts"]:
                inside.append(kernels[k])
            k += 1
        found[phase].append((run, inside))
    return found


def pool_split(kernel: dict, last_tasks: dict[str, int]) -> tuple[float, float, int]:
    """(µs handing work to the pool, µs waiting for it, tasks the pool's threads ran) of a kernel;
    ``last_tasks`` carries each pool thread's running task count from kernel to kernel."""
    stats = kernel["args"].get("thread_scheduling_stats") or {}
    main = stats.get("main_thread", {})
    tasks = 0
    for thread, sub in (stats.get("sub_threads") or {}).items():
        tasks += max(0, int(sub.get("num_run", 0)) - last_tasks.get(thread, 0))
        last_tasks[thread] = int(sub.get("num_run", 0))
    wake = float(main.get("Distribution", 0)) + float(main.get("DistributionEnqueue", 0))
    return wake, float(main.get("Wait", 0)) + float(main.get("WaitRevoke", 0)), tasks


def summary(runs: list[tuple[dict, list[dict]]]) -> dict[str, Any]:
    """Means over the runs, in µs: the run, its kernels, the pool; and per op type."""
    n = len(runs)
    ops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    last: dict[str, int] = {}
    total = kernels = wake = wait = tasks = 0.0
    for run, inside in runs:
        total += run["dur"]
        for kernel in inside:
            op_wake, op_wait, op_tasks = pool_split(kernel, last)
            row = ops[kernel["args"].get("op_name", "?")]
            row[0] += kernel["dur"]
            row[1] += op_wake
            row[2] += op_wait
            row[3] += 1
            kernels += kernel["dur"]
            wake, wait, tasks = wake + op_wake, wait + op_wait, tasks + op_tasks
    return {"runs": n, "run_us": total / n, "kernels_us": kernels / n, "wake_us": wake / n,
            "wait_us": wait / n, "pool_tasks": tasks / n,
            "ops": {op: [v / n for v in row] for op, row in ops.items()}}


def table(phases: dict[str, dict[str, dict[str, Any]]], top: int) -> list[str]:
    """The markdown table: per phase and graph, the run and its split, then its slowest ops."""
    lines = ["| phase | graph / op | runs | µs a run | kernels | outside kernels | pool: wake / wait µs "
             "| pool tasks |", "|---|---|---|---|---|---|---|---|"]
    for phase, graphs in phases.items():
        for graph, s in graphs.items():
            lines.append(f"| {phase} | **{graph}** | {s['runs']} | {s['run_us']:.0f} | "
                         f"{s['kernels_us']:.0f} | {s['run_us'] - s['kernels_us']:.0f} | "
                         f"{s['wake_us']:.0f} / {s['wait_us']:.0f} | {s['pool_tasks']:.1f} |")
            ordered = sorted(s["ops"].items(), key=lambda item: -item[1][0])[:top]
            for op, (us, op_wake, op_wait, count) in ordered:
                lines.append(f"| | {op} ×{count:.0f} | | {us:.0f} | | | {op_wake:.0f} / {op_wait:.0f} | |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", required=True, help="a model archive")
    parser.add_argument("--data", required=True, help="test data whose texts are parsed")
    parser.add_argument("--messages", type=int, default=200, help="messages parsed one at a time")
    parser.add_argument("--batch", type=int, default=256, help="messages parsed in one batch")
    parser.add_argument("--top", type=int, default=6, help="op types listed per graph")
    parser.add_argument("--flush-mb", type=int, default=0, help="MB read between two runs alone")
    parser.add_argument("--keep", help="a folder to keep the traces in (default: deleted)")
    args = parser.parse_args(argv)
    texts = [m.text for m in load_data(args.data).messages]
    with tempfile.TemporaryDirectory(prefix="onnx-profile-") as scratch:
        folder = Path(args.keep or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        with profiled_sessions(folder) as sessions:
            before_load = set(thread_cpu())
            model = Model.load(args.model)
            timed("warm-up", lambda: [model.parse(t) for t in texts[:20]] + model.parse_batch(texts[:64]),
                  before_load)
            _state["keep"] = True
            one = timed("pipeline, one message", lambda: [model.parse(t) for t in texts[: args.messages]],
                        before_load)
            _state["keep"] = False
            replay(sessions, "alone, one message", args.flush_mb)
            _state["keep"] = True
            batch = timed("pipeline, batch", lambda: model.parse_batch(texts[: args.batch]), before_load)
            _state["keep"] = False
            replay(sessions, "alone, batch", args.flush_mb)
            traces = {}
            for p in sessions:
                traces[p.graph if p.graph not in traces else f"{p.graph} #{len(traces)}"] = events_by_phase(p)
    order = ["pipeline, one message", "alone, one message", "pipeline, batch", "alone, batch"]
    phases = {phase: {graph: summary(found[phase]) for graph, found in traces.items() if found.get(phase)}
              for phase in order}
    print(f"CPU: {cpu_model()}; model {args.model}; {args.messages} messages one at a time, a batch of "
          f"{min(args.batch, len(texts))}; --flush-mb {args.flush_mb}; load {os.getloadavg()[0]:.1f}")
    size = min(args.batch, len(texts))
    for name, spent, count in (("one message", one, args.messages), ("batch", batch, size)):
        print(f"whole parse, {name}: {1000 * spent['wall'] / count:.3f} ms wall, "
              f"{1000 * spent['cpu'] / count:.3f} ms CPU a message (profiler on); of the CPU: calling "
              f"thread {1000 * spent['caller'] / count:.3f}, ONNX Runtime's pool threads "
              f"{1000 * spent['pools'] / count:.3f}, threads from before the model loaded (BLAS) "
              f"{1000 * spent['blas'] / count:.3f}")
    print("\n".join(table(phases, args.top)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
