"""Parse latency of a trained model, measured as `nlu-engine benchmark` measures it, several times.

    .venv/bin/python benchmarks/parse_latency.py -m MODEL.tar.gz --data TEST.md [--runs 3]

`nlu-engine benchmark` times parsing once, right after training, in the process that trained;
this script loads a kept archive (`--keep-models`) in a fresh process and times it `--runs` times:
the first 300 test messages one at a time (p50, p95) and all of them in one `parse_batch` call
(ms per message). Prints each run and the median of the runs; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nlu_engine.assembly.model import Model  # noqa: E402
from nlu_engine.evaluation.benchmarking import _latencies, cpu_model  # noqa: E402
from nlu_engine.training_data import load_data  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", required=True, help="a model archive")
    parser.add_argument("--data", required=True, help="test data whose texts are parsed")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    model = Model.load(args.model)
    texts = [m.text for m in load_data(args.data).messages]
    model.parse_batch(texts[:64])  # warm-up: first-call costs are not parse latency
    runs = []
    for i in range(args.runs):
        runs.append(_latencies(model, texts))
        print(f"run {i + 1}: {json.dumps(runs[-1])}")
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(json.dumps({"model": args.model, "cpu": cpu_model(), "runs": args.runs, "median": median}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
