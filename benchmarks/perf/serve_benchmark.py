"""Measure the HTTP server: start-to-ready time, sequential latency, concurrent throughput, memory.

    .venv/bin/python -m benchmarks.perf.serve_benchmark -m models/snips-diet.tar.gz \
        [--data ../shared/datasets/SNIPS/test.md] [--requests 500] [--clients 8] [--total 2000]

Starts ``nlu-engine serve`` as a child process on 127.0.0.1 (a free port) and measures:
1. ready: seconds from process start to the first 200 on ``GET /status`` (model load included);
2. sequential: p50 / p95 / mean latency of ``POST /model/parse`` over ``--requests`` requests on
   one keep-alive connection, and the requests per second that gives;
3. concurrent: requests per second with ``--clients`` client threads (one keep-alive connection
   each) sending ``--total`` requests in all, stopping early after ``--max-seconds``;
4. memory: resident set size (VmRSS) and its peak (VmHWM) of the server process.

Prints a markdown table row and a JSON object. Only the loopback address is used and every
loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import emit_json
from nlu_engine.server.process import LOOPBACK, ServerProcess

DEFAULT_TEXTS = [
    "book a table for two in Berlin tomorrow",
    "what's the weather like in paris this weekend",
    "play some jazz by miles davis on spotify",
    "add this song to my road trip playlist",
    "rate this book four out of six stars",
    "find the movie schedule at the nearest cinema",
    "search for the creative work called the last unicorn",
    "hi there",
    "thanks, bye",
    "will it rain in new york city at noon",
    "i want to book a restaurant in san francisco for 8 people",
    "play the latest album from the beatles",
]


def load_texts(data: str | None, limit: int = 2000) -> list[str]:
    if not data:
        return DEFAULT_TEXTS
    from nlu_engine.training_data import load_data

    texts = [m.text for m in load_data([data]).messages][:limit]
    if not texts:
        raise SystemExit(f"no examples in {data}")
    return texts


class Client:
    """One keep-alive connection sending ``POST /model/parse``."""

    def __init__(self, port: int, token: str | None = None, timeout: float = 30.0) -> None:
        self.connection = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def parse(self, text: str) -> tuple[int, bytes]:
        body = json.dumps({"text": text}).encode("utf-8")
        try:
            self.connection.request("POST", "/model/parse", body=body, headers=self.headers)
            response = self.connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self.connection.close()  # reconnects on the next request
            return 0, b""

    def close(self) -> None:
        self.connection.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def sequential(port: int, texts: list[str], count: int, token: str | None) -> dict[str, Any]:
    client = Client(port, token)
    latencies: list[float] = []
    errors = 0
    start = time.perf_counter()
    for text in itertools.islice(itertools.cycle(texts), count):
        t0 = time.perf_counter()
        status, _ = client.parse(text)
        latencies.append(time.perf_counter() - t0)
        errors += status != 200
    elapsed = time.perf_counter() - start
    client.close()
    return {
        "requests": count,
        "errors": errors,
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p95_ms": round(percentile(latencies, 95) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2),
        "requests_per_second": round(count / elapsed, 1),
    }


def concurrent(
    port: int, texts: list[str], clients: int, total: int, max_seconds: float, token: str | None
) -> dict[str, Any]:
    lock = threading.Lock()
    counter = itertools.count()
    done = {"ok": 0, "errors": 0}
    latencies: list[float] = []
    deadline = time.perf_counter() + max_seconds

    def worker(offset: int) -> None:
        client = Client(port, token)
        ok = errors = 0
        mine: list[float] = []
        while time.perf_counter() < deadline:
            with lock:
                n = next(counter)
            if n >= total:
                break
            t0 = time.perf_counter()
            status, _ = client.parse(texts[(n + offset) % len(texts)])
            mine.append(time.perf_counter() - t0)
            if status == 200:
                ok += 1
            else:
                errors += 1
        client.close()
        with lock:
            done["ok"] += ok
            done["errors"] += errors
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max_seconds + 30)
    elapsed = time.perf_counter() - start
    answered = done["ok"] + done["errors"]
    return {
        "clients": clients,
        "requests": answered,
        "errors": done["errors"],
        "seconds": round(elapsed, 2),
        "requests_per_second": round(done["ok"] / elapsed, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 2) if latencies else None,
        "p95_ms": round(percentile(latencies, 95) * 1000, 2) if latencies else None,
    }


def status(port: int, token: str | None) -> dict[str, Any]:
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    connection.request("GET", "/status", headers=headers)
    data = json.loads(connection.getresponse().read())
    connection.close()
    return data if isinstance(data, dict) else {}


def _status(pid: int) -> dict[str, str]:
    values = {}
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as status_file:
            for line in status_file:
                key, _, rest = line.partition(":")
                values[key] = rest.strip()
    except OSError:
        pass
    return values


def memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak) of the server and its worker processes (--workers), in MB."""
    pids = [pid] + [
        int(entry.name) for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and _status(int(entry.name)).get("PPid") == str(pid)
    ]
    totals = {"VmRSS": 0.0, "VmHWM": 0.0}
    for each in pids:
        status_values = _status(each)
        for key in totals:
            if key in status_values:
                totals[key] += int(status_values[key].split()[0]) / 1024
    return {"rss_mb": round(totals["VmRSS"], 1), "peak_rss_mb": round(totals["VmHWM"], 1),
            "processes": len(pids)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", required=True, help="model archive (or folder) to serve")
    parser.add_argument("--data", default=None, help="NLU data file whose texts are sent (default: built-in)")
    parser.add_argument("--requests", type=int, default=500, help="sequential requests (default 500)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--total", type=int, default=2000, help="concurrent requests in all (default 2000)")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="time cap of the concurrent phase")
    parser.add_argument("--warmup", type=int, default=20, help="requests sent before measuring")
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    parser.add_argument("--token", default=None, help="run the server with --auth-token TOKEN")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="extra argument for nlu-engine serve (repeatable), "
                             "e.g. --server-arg=--workers=2")
    parser.add_argument("--json", dest="json_out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)

    texts = load_texts(args.data)
    server_args = ["-m", args.model, *args.server_arg]
    if args.token:
        server_args += ["--auth-token", args.token]
    server = ServerProcess(server_args, ready_path=f"/status?token={args.token}" if args.token else "/status",
                           timeout=args.ready_timeout)
    server.start()
    try:
        ready = round(server.ready_seconds, 2)
        assert server.process is not None
        pid = server.process.pid
        memory_loaded = memory(pid)
        info = status(server.port, args.token)
        warm = Client(server.port, args.token)
        for text in itertools.islice(itertools.cycle(texts), args.warmup):
            warm.parse(text)
        warm.close()
        seq = sequential(server.port, texts, args.requests, args.token)
        conc = concurrent(server.port, texts, args.clients, args.total, args.max_seconds, args.token)
        memory_after = memory(pid)
        batching = status(server.port, args.token).get("batching", {})
    finally:
        server.stop()
    result = {
        "model": str(args.model),
        "model_file": info.get("model_file"),
        "pipeline": info.get("pipeline"),
        "ready_seconds": ready,
        "sequential": seq,
        "concurrent": conc,
        "memory_after_load": memory_loaded,
        "memory_after_load_test": memory_after,
        "batching": batching,
        "texts": args.data or "built-in",
        "python": sys.version.split()[0],
    }
    print("| model | ready (s) | p50 (ms) | p95 (ms) | sequential req/s | "
          f"{args.clients} clients req/s | errors | RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {Path(args.model).name} | {ready} | {seq['p50_ms']} | {seq['p95_ms']} | "
          f"{seq['requests_per_second']} | {conc['requests_per_second']} | "
          f"{seq['errors'] + conc['errors']} | {memory_after['rss_mb']} |")
    emit_json(result, args.json_out)
    return 0 if seq["errors"] + conc["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
