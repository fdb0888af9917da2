"""Slow headers against a real ``nlu-engine serve``: a thousand connections sending their request's
headers a byte a second, and 8 normal clients beside them.

    .venv/bin/python -m benchmarks.perf.slow_headers [--archive A.tar.gz] [--slow 1000] \
        [--clients 8] [--header-timeout 15] [--idle-seconds 10] [--json out.json]

Starts ``nlu-engine serve --header-timeout T`` on 127.0.0.1 (a ``logreg.yml`` model trained on
``data/nlu.yml`` unless ``--archive`` names one). First ``--clients`` threads, each on its own
keep-alive connection, send ``POST /model/parse`` for ``--idle-seconds``: the idle server's
latencies. Then ``--slow`` connections open and each sends one byte of a request's headers a
second (never the end), while the same clients parse again, until every slow connection has been
answered or closed, or ``T + 15`` seconds have passed. Reported: the normal clients' p50 / p99 (ms),
requests and errors in both phases; for the slow connections, how many got 408, how many were
closed without an answer, how many were still open at the end, and the slowest answer (seconds
from the connection's opening). Loopback only; the run is bounded in connections and time.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import resource
import selectors
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, emit_json
from nlu_engine.server.process import LOOPBACK, ServerProcess

TEXTS = ["book a table for two in Berlin tomorrow", "what's the weather in paris", "hi there",
         "thanks, bye", "play some jazz"]
REQUEST = (b"POST /model/parse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"X-Padding: " + b"a" * 200 + b"\r\nContent-Length: 15\r\n\r\n")


def normal_clients(port: int, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` threads parsing on keep-alive connections for ``seconds``: latencies, errors."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(offset: int) -> None:
        connection = http.client.HTTPConnection(LOOPBACK, port, timeout=60)
        i = offset
        while time.monotonic() < deadline:
            body = json.dumps({"text": TEXTS[i % len(TEXTS)]})
            i += 1
            started = time.perf_counter()
            try:
                connection.request("POST", "/model/parse", body, {"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
                what = f"status {response.status}"
            except (OSError, http.client.HTTPException) as error:
                ok, what = False, f"{type(error).__name__}: {error}"
                connection.close()
                connection = http.client.HTTPConnection(LOOPBACK, port, timeout=60)
            with lock:
                if ok:
                    latencies.append((time.perf_counter() - started) * 1000)
                elif len(errors) < 100:
                    errors.append(what)
        connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 120)
    ordered = sorted(latencies)
    return {"requests": len(latencies) + len(errors), "errors": len(errors), "error_samples": errors[:5],
            "p50_ms": round(statistics.median(ordered), 2) if ordered else None,
            "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 2) if ordered else None}


def slow_connections(port: int, count: int, limit: float, ready: threading.Event) -> dict[str, Any]:
    """``count`` connections sending a byte of headers a second until each is answered or closed,
    or ``limit`` seconds pass: what each got."""
    selector = selectors.DefaultSelector()
    opened: dict[socket.socket, dict[str, Any]] = {}
    for _ in range(count):
        sock = socket.create_connection((LOOPBACK, port), timeout=10)
        sock.setblocking(False)
        opened[sock] = {"opened": time.monotonic(), "sent": 0, "answer": b""}
        selector.register(sock, selectors.EVENT_READ)
    ready.set()
    done: list[dict[str, Any]] = []
    deadline = time.monotonic() + limit
    next_byte = time.monotonic()
    while opened and time.monotonic() < deadline:
        if time.monotonic() >= next_byte:
            next_byte += 1.0
            for sock, state in list(opened.items()):
                with contextlib.suppress(BlockingIOError, OSError):
                    state["sent"] += sock.send(REQUEST[state["sent"]:state["sent"] + 1])
        for key, _ in selector.select(timeout=max(0.0, min(0.2, next_byte - time.monotonic()))):
            sock, state = key.fileobj, opened[key.fileobj]  # type: ignore[index]
            try:
                chunk = sock.recv(65536)  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            state["answer"] += chunk
            if not chunk:  # closed by the server: what it answered before, if anything
                state["closed"] = time.monotonic() - state["opened"]
                selector.unregister(sock)
                sock.close()  # type: ignore[union-attr]
                done.append(opened.pop(sock))  # type: ignore[arg-type]
    for sock in opened:
        sock.close()
    selector.close()
    answered = [d for d in done if d["answer"].startswith(b"HTTP/1.1 408 ")]
    return {"connections": count, "answered_408": len(answered),
            "closed_without_answer": sum(1 for d in done if not d["answer"]),
            "still_open_at_the_end": len(opened),
            "slowest_answer_s": round(max((d["closed"] for d in answered), default=0.0), 2),
            "header_bytes_sent_max": max((d["sent"] for d in done), default=0)}


def train_model(folder: Path) -> Path:
    from nlu_engine.assembly.model import train

    return train(ROOT / "nlu_engine" / "pipelines" / "logreg.yml", ROOT / "data" / "nlu.yml", out=folder,
                 fixed_model_name="slow-headers", log=None)


def run(archive: Path | None = None, slow: int = 1000, clients: int = 8, header_timeout: float = 15.0,
        idle_seconds: float = 10.0) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = slow + 256
    if soft < needed:  # the client's sockets here, the server's (the child inherits the limit)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))
    with tempfile.TemporaryDirectory(prefix="slow-headers-") as tmp:
        model = archive or train_model(Path(tmp))
        args = ["-m", str(model), "--header-timeout", str(header_timeout)]
        with ServerProcess(args, ready_path="/status") as server:
            idle = normal_clients(server.port, clients, idle_seconds)
            ready = threading.Event()
            result: dict[str, Any] = {}
            holder = threading.Thread(target=lambda: result.update(
                slow_connections(server.port, slow, header_timeout + 15, ready)))
            holder.start()
            ready.wait(120)
            beside = normal_clients(server.port, clients, header_timeout)
            holder.join(header_timeout + 60)
    return {"header_timeout_s": header_timeout, "clients": clients, "idle": idle,
            "beside_slow_connections": beside, "slow": result,
            "p50_ratio": round(beside["p50_ms"] / idle["p50_ms"], 2)
            if beside["p50_ms"] and idle["p50_ms"] else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", type=Path, default=None)
    parser.add_argument("--slow", type=int, default=1000, help="slow connections (at most 5000)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--header-timeout", type=float, default=15.0)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not 1 <= args.slow <= 5000 or not 0 < args.header_timeout <= 120:
        parser.error("--slow must be 1-5000 and --header-timeout 0-120 s: the run is bounded")
    emit_json(run(args.archive, args.slow, args.clients, args.header_timeout, args.idle_seconds), args.json)


if __name__ == "__main__":
    main()
