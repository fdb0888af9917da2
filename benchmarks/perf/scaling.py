"""Scale-out figures: corpus parsing, cross-validation and HTTP serving, one process against two.

    .venv/bin/python -m benchmarks.perf.scaling -m <OUT>/models/snips.tar.gz [--rows 200000] [--runs 3]
        [--sections parse,cv,http] [--workdir /tmp/scaling] [--json results.json]

1. parse: a corpus of ``--rows`` messages (the texts of SNIPS and NLU-Evaluation-Data, repeated
   and shuffled with a fixed seed) parsed by ``nlu-engine parse --input --output`` in process
   (batched), with ``--workers 2``, and with ``--ray`` and 1 and 2 actors. Rows per second are
   the command's own figure (from the first row read to the last written: the workers' and
   actors' start and model load are in it; the command's start, the model load in process and
   Ray's start are not) and, beside it, rows over the command's whole wall time. The outputs are
   compared byte for byte.
2. cv: ``nlu-engine test --cross-validation --folds 10`` of ``--cv-config`` on ``--cv-data``
   (default: SNIPS's 700 test messages, DIET with 20 epochs), sequential and ``--ray``; wall
   time, and whether the per-fold scores equal a sequential run with ``--cpus-per-trial 1``.
3. http: ``nlu-engine serve`` with 1 and 2 workers, ``--clients`` concurrent clients sending
   ``--requests`` requests; requests per second and errors.

Each figure is the median of ``--runs`` runs. Run it on a machine with nothing else running:
two processes on a two-core machine measure contention, not scaling, when other jobs share it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import NLU_EVAL, SNIPS, emit_json

CORPUS_SOURCES = [SNIPS, NLU_EVAL]
PARSE_MODES = {
    "in-process": [],
    "--workers 2": ["--workers", "2"],
    "--ray, 1 actor": ["--ray", "--workers", "1"],
    "--ray, 2 actors": ["--ray", "--workers", "2"],
}
SUMMARY = re.compile(r"parsed (\d+) rows.* in ([\d.]+) s, (\d+) rows/s")


def make_corpus(path: Path, rows: int, seed: int = 13) -> int:
    """``rows`` lines of benchmark texts, repeated and shuffled; returns the distinct texts."""
    from nlu_engine.training_data import load_data

    texts = sorted({m.text for source in CORPUS_SOURCES for m in load_data([str(source)]).messages})
    rng = random.Random(seed)
    lines = [texts[i % len(texts)] for i in range(rows)]
    rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(texts)


def nlu_engine(*args: str, timeout: float = 7200) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "nlu_engine", *args], capture_output=True, text=True,
                            timeout=timeout, env=env)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"nlu-engine {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result, seconds


def bench_parse(model: str, workdir: Path, rows: int, runs: int) -> dict[str, Any]:
    corpus = workdir / "corpus.txt"
    distinct = make_corpus(corpus, rows)
    figures: dict[str, Any] = {}
    for name, flags in PARSE_MODES.items():
        own, wall = [], []
        for run in range(runs):
            out = workdir / f"parse-{len(figures)}-{run}.jsonl"
            result, seconds = nlu_engine("parse", "-m", model, "--input", str(corpus), "--output", str(out),
                                         "--force", *flags)
            match = SUMMARY.search(result.stderr)
            assert match, result.stderr
            own.append(int(match.group(3)))
            wall.append(rows / seconds)
        figures[name] = {"rows_per_second": statistics.median(own),
                         "rows_per_second_wall": round(statistics.median(wall), 1), "runs": own}
    outputs = sorted(workdir.glob("parse-*.jsonl"))
    reference = outputs[0].read_bytes()
    identical = all(path.read_bytes() == reference for path in outputs[1:])
    base = figures["in-process"]["rows_per_second"]
    for figure in figures.values():
        figure["speedup"] = round(figure["rows_per_second"] / base, 2)
    return {"rows": rows, "distinct_texts": distinct, "modes": figures, "outputs_identical": identical}


def per_fold(out: Path) -> list[Any]:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))["cross_validation"]["per_fold"]


def bench_cv(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    common = ["test", "--cross-validation", "--folds", "10", "--config", args.cv_config, "--data",
              args.cv_data, "--no-plot", *[a for s in args.cv_set for a in ("--set", s)]]
    modes = {"sequential": [], "--ray": ["--ray"],
             "sequential, --cpus-per-trial 1": ["--cpus-per-trial", "1"]}
    figures: dict[str, Any] = {}
    for name, flags in modes.items():
        times = []
        for run in range(args.runs if name != "sequential, --cpus-per-trial 1" else 1):
            out = workdir / f"cv-{len(figures)}-{run}"
            _, seconds = nlu_engine(*common, "--out", str(out), *flags)
            times.append(round(seconds, 1))
        figures[name] = {"seconds": statistics.median(times), "runs": times, "out": str(out)}
    ray_folds = per_fold(Path(figures["--ray"]["out"]))
    return {
        "config": args.cv_config, "data": args.cv_data, "set": args.cv_set, "modes": figures,
        "speedup": round(figures["sequential"]["seconds"] / figures["--ray"]["seconds"], 2),
        "ray_equals_sequential_cpus_per_trial_1":
            ray_folds == per_fold(Path(figures["sequential, --cpus-per-trial 1"]["out"])),
        "ray_equals_sequential_default": ray_folds == per_fold(Path(figures["sequential"]["out"])),
    }


def warm_up(port: int, texts: list[str], workers: int, timeout: float = 180.0) -> None:
    """Parse until every worker has answered: /status is ready as soon as the first worker is,
    and a worker still importing TensorFlow and loading the model would otherwise be measured as
    part of the load test (and take the cores from the one answering)."""
    import httpx

    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as client:
        while len(seen) < max(workers, 1):
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(seen)} of {workers} workers answered within {timeout:.0f} s")
            for text in texts[:20]:
                client.post("/model/parse", json={"text": text})
            seen.add(str(client.get("/status").json().get("worker_id")))
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as fresh:
                seen.add(str(fresh.get("/status").json().get("worker_id")))


def bench_http(model: str, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.perf.serve_benchmark import concurrent, load_texts
    from nlu_engine.server.process import ServerProcess

    texts = load_texts(str(SNIPS / "test.md"))
    figures: dict[str, Any] = {}
    for workers in (1, 2):
        rates, errors = [], 0
        for _ in range(args.runs):
            with ServerProcess(["-m", model, "--workers", str(workers)], ready_path="/status",
                               timeout=120) as server:
                warm_up(server.port, texts, workers)
                result = concurrent(server.port, texts, args.clients, args.requests, 120.0, None)
            rates.append(result["requests_per_second"])
            errors += result["errors"]
        figures[f"{workers} worker{'s' if workers > 1 else ''}"] = {
            "requests_per_second": statistics.median(rates), "runs": rates, "errors": errors}
    one, two = (figure["requests_per_second"] for figure in figures.values())
    return {"clients": args.clients, "requests": args.requests, "modes": figures,
            "speedup": round(two / one, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", required=True, help="model archive to parse and serve with")
    parser.add_argument("--rows", type=int, default=200_000, help="corpus rows (default 200000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; the median is reported")
    parser.add_argument("--sections", default="parse,cv,http", help="comma-separated: parse, cv, http")
    parser.add_argument("--cv-config", default="diet")
    parser.add_argument("--cv-data", default=str(SNIPS / "test.md"))
    parser.add_argument("--cv-set", action="append", default=None, metavar="COMPONENT.KEY=VALUE",
                        help="training overrides (default with --cv-config diet: DIETClassifier.epochs=20)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--workdir", default=None, help="folder for the corpus and outputs (default: a temp)")
    parser.add_argument("--json", dest="json_out", default=None)
    args = parser.parse_args(argv)
    if args.cv_set is None:
        args.cv_set = ["DIETClassifier.epochs=20"] if args.cv_config == "diet" else []
    import tempfile

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="nlu-scaling-"))
    workdir.mkdir(parents=True, exist_ok=True)
    model = str(Path(args.model).resolve())
    sections = set(args.sections.split(","))
    results: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_average_before": os.getloadavg()}
    if "parse" in sections:
        results["parse"] = bench_parse(model, workdir, args.rows, args.runs)
    if "cv" in sections:
        results["cv"] = bench_cv(args, workdir)
    if "http" in sections:
        results["http"] = bench_http(model, args)
    results["load_average_after"] = os.getloadavg()
    emit_json(results, args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
