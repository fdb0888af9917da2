"""What ``serve --log-messages`` costs a parse: HTTP p50 with logging on against off, A B A B.

    .venv/bin/python -m benchmarks.perf.log_overhead [-m MODEL.tar.gz] [--data TEST.md] \
        [--requests 500] [--rounds 3] [--log-messages DB] [--server-arg=--workers=2]

Starts two ``nlu-engine serve`` processes on 127.0.0.1 with the same model, one without logging
(A) and one with ``--log-messages`` (B: a fresh SQLite file in a temporary folder by default, or
the ``--log-messages`` given, e.g. a ``postgresql://`` URL), and alternates between them: each
round sends ``--requests`` sequential ``POST /model/parse`` on one keep-alive connection to A,
then to B. Prints each run's p50 / p95, the median of the runs' p50 for each, their difference,
the rows the log wrote (which must be every request sent to B), and the CPU. Without ``-m`` it
trains the logistic-regression pipeline on ``data/nlu.yml`` first (a few seconds). Run it on an
otherwise idle machine; the issue's target is a difference of at most 0.3 ms.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, emit_json
from benchmarks.perf.serve_benchmark import Client, load_texts, percentile, status
from nlu_engine.evaluation.benchmarking import cpu_model
from nlu_engine.server.process import ServerProcess


def run(port: int, texts: list[str], count: int, offset: int) -> dict[str, float]:
    """``count`` sequential parses on one connection: p50 / p95 in ms, and the errors."""
    client = Client(port)
    latencies: list[float] = []
    errors = 0
    for text in itertools.islice(itertools.cycle(texts[offset:] + texts[:offset]), count):
        start = time.perf_counter()
        code, _ = client.parse(text)
        latencies.append(time.perf_counter() - start)
        errors += code != 200
    client.close()
    return {"p50_ms": round(percentile(latencies, 50) * 1000, 3),
            "p95_ms": round(percentile(latencies, 95) * 1000, 3), "errors": errors}


def default_model(folder: Path) -> str:
    from nlu_engine.assembly.model import train

    path = train(ROOT / "nlu_engine" / "pipelines" / "logreg.yml", ROOT / "data" / "nlu.yml",
                 out=folder, fixed_model_name="log-overhead", log=None)
    return str(path)


def measure(args: argparse.Namespace, model: str, database: str, texts: list[str]) -> dict[str, Any]:
    base = ["-m", model, *args.server_arg]
    off = ServerProcess(base, ready_path="/status", timeout=args.ready_timeout)
    on = ServerProcess([*base, "--log-messages", database], ready_path="/status", timeout=args.ready_timeout)
    runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    with off, on:
        for server in (off, on):  # warm both: the first parses trace and fill caches
            run(server.port, texts, args.warmup, 0)
        for round_ in range(args.rounds):
            for name, server in (("off", off), ("on", on)):  # A B A B
                runs[name].append(run(server.port, texts, args.requests, round_))
                time.sleep(args.pause)  # the writer's batch of the last run lands before the next
        log_status = status(on.port, None).get("message_log", {})
        info = status(off.port, None)
    p50 = {name: statistics.median(r["p50_ms"] for r in values) for name, values in runs.items()}
    sent = (args.warmup + args.rounds * args.requests)
    return {
        "model_file": info.get("model_file"),
        "pipeline": info.get("pipeline"),
        "server_args": args.server_arg,
        "database": "temporary SQLite file" if not args.log_messages else log_status.get("database"),
        "requests_per_run": args.requests,
        "rounds": args.rounds,
        "runs": runs,
        "p50_off_ms": round(p50["off"], 3),
        "p50_on_ms": round(p50["on"], 3),
        "difference_ms": round(p50["on"] - p50["off"], 3),
        "rows_written": log_status.get("rows_written"),
        "rows_dropped": log_status.get("rows_dropped"),
        "requests_logged": sent,
        "errors": sum(r["errors"] for values in runs.values() for r in values),
        "cpu": cpu_model(),
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", default=None,
                        help="model archive (default: train logreg on data/nlu.yml)")
    parser.add_argument("--data", default=None, help="NLU data file whose texts are sent (default: built-in)")
    parser.add_argument("--requests", type=int, default=500, help="sequential requests a run (default 500)")
    parser.add_argument("--rounds", type=int, default=3, help="A B rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=30, help="requests sent to each server first")
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between runs (default 0.5)")
    parser.add_argument("--log-messages", default=None, metavar="DB",
                        help="the log's database (default: a new SQLite file in a temporary folder)")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for both servers (repeatable), e.g. --server-arg=--workers=2")
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    parser.add_argument("--json", dest="json_out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1:
        parser.error("--requests and --rounds must be at least 1")
    texts = load_texts(args.data)
    with tempfile.TemporaryDirectory(prefix="nlu-log-overhead-") as tmp:
        model = args.model or default_model(Path(tmp))
        database = args.log_messages or str(Path(tmp) / "log.db")
        result = measure(args, model, database, texts)
    print(f"CPU: {result['cpu']}")
    print("| model | p50 off (ms) | p50 on (ms) | difference (ms) | rows written / sent | errors |")
    print("|---|---|---|---|---|---|")
    print(f"| {result['model_file']} | {result['p50_off_ms']} | {result['p50_on_ms']} | "
          f"{result['difference_ms']:+} | {result['rows_written']} / {result['requests_logged']} | "
          f"{result['errors']} |")
    emit_json(result, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
