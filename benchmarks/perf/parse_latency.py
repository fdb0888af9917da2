"""Parse latency of a trained model, measured as `nlu-engine benchmark` measures it, several times.

    .venv/bin/python -m benchmarks.perf.parse_latency -m MODEL.tar.gz --data TEST.md [--runs 3] [--scores]
        [--runtime float32|int8|int8_dynamic|bfloat16]

`nlu-engine benchmark` times parsing once, right after training, in the process that trained;
this script loads a kept archive (`--keep-models`) in a fresh process and times it `--runs` times:
the first 300 test messages one at a time (p50, p95) and all of them in one `parse_batch` call
(ms per message), in wall time and in the process's CPU time (``time.process_time``: all its
threads), which other work on shared cores inflates less, with the load average before each run.
Prints each run and the median of the runs; run it on an otherwise idle machine.
``--scores`` also scores the whole test set as ``nlu-engine benchmark`` does. The model parses
in the runtime its archive records (``nn/onnx_runtime.py``); ``--runtime`` compares the others
on one archive. "load_s" is ``Model.load``, which builds the ONNX graphs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from nlu_engine.assembly.model import Model
from nlu_engine.evaluation import evaluate
from nlu_engine.evaluation.benchmarking import cpu_model, headline_scores
from nlu_engine.training_data import load_data


def latencies(model: Model, texts: list[str]) -> dict[str, float]:
    """``nlu-engine benchmark``'s parse figures (wall ms), with their CPU ms beside them."""
    load = os.getloadavg()[0]
    wall, cpu = [], []
    for text in texts[:300]:
        start, start_cpu = time.perf_counter(), time.process_time()
        model.parse(text)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    start, start_cpu = time.perf_counter(), time.process_time()
    model.parse_batch(texts)
    batched, batched_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    wall.sort()
    return {
        "parse_p50_ms": round(statistics.median(wall), 2),
        "parse_p95_ms": round(wall[int(0.95 * (len(wall) - 1))], 2),
        "batched_ms_per_message": round(batched * 1000 / max(len(texts), 1), 3),
        "parse_cpu_p50_ms": round(statistics.median(cpu), 2),
        "batched_cpu_ms_per_message": round(batched_cpu * 1000 / max(len(texts), 1), 3),
        "load": round(load, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", required=True, help="a model archive")
    parser.add_argument("--data", required=True, help="test data whose texts are parsed")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scores", action="store_true", help="also score the test set")
    parser.add_argument("--runtime", default=None,
                        help="float32, int8, int8_dynamic or bfloat16 (default: the archive's)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    model = Model.load(args.model, runtime=args.runtime)
    load_s = round(time.perf_counter() - start, 2)
    test = load_data(args.data)
    texts = [m.text for m in test.messages]
    scores = {}
    if args.scores:
        summary = evaluate(test.messages, model.parse_batch(texts)).summary()
        scores = {k: round(100 * v, 2) for k, v in headline_scores(summary).items()}
    model.parse_batch(texts[:64])  # warm-up: first-call costs are not parse latency
    runs: list[dict[str, Any]] = []
    for i in range(args.runs):
        runs.append(latencies(model, texts))
        print(f"run {i + 1}: {json.dumps(runs[-1])}")
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(json.dumps({"model": args.model, "cpu": cpu_model(), "runtime": model.runtime,
                      "load_s": load_s, "runs": args.runs, "median": median, "scores": scores}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
