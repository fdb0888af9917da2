"""``serve --workers N --log-messages``: every request logged once, none lost, none twice.

    .venv/bin/python -m benchmarks.perf.log_workers [-m MODEL.tar.gz] [--workers 2] [--clients 8] \
        [--requests 10000] [--log-messages DB] [--json OUT]

Starts ``nlu-engine serve --workers N --log-messages DB`` on 127.0.0.1 (a new SQLite file in a
temporary folder unless ``--log-messages`` names another database, e.g. a ``postgresql://`` URL),
sends ``--requests`` ``POST /model/parse`` from ``--clients`` threads, every request carrying its
own ``message_id``, each thread opening a new connection every ``--per-connection`` requests (on one
shared socket the first worker to wake accepts every connection that is open at once: 8 keep-alive
connections alone would all go to one worker), stops the server (its writers flush on
shutdown) and counts the rows: the issue's target is 0 errors, one row per request, no
``message_id`` twice. ``--log-messages postgresql`` logs to a throwaway PostgreSQL cluster (Debian's
``initdb`` / ``pg_ctl``, as the tests make it). Without ``-m`` it trains the logistic-regression pipeline on
``data/nlu.yml`` first (a few seconds). Only the loopback address is used; every loop is bounded.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.common import emit_json
from benchmarks.perf.log_overhead import default_model
from benchmarks.perf.serve_benchmark import load_texts
from nlu_engine.evaluation.benchmarking import cpu_model
from nlu_engine.server.process import LOOPBACK, ServerProcess


def send_all(port: int, texts: list[str], clients: int, total: int, max_seconds: float,
             per_connection: int) -> dict[str, Any]:
    """``total`` parses from ``clients`` threads, request n carrying ``message_id`` "m<n>"."""
    counter = itertools.count()
    lock = threading.Lock()
    outcome = {"ok": 0, "errors": 0}
    deadline = time.perf_counter() + max_seconds

    def worker() -> None:
        connection = http.client.HTTPConnection(LOOPBACK, port, timeout=60)
        ok = errors = 0
        while time.perf_counter() < deadline:
            with lock:
                n = next(counter)
            if n >= total:
                break
            if (ok + errors) % per_connection == 0:
                connection.close()  # the next request connects anew
            body = json.dumps({"text": texts[n % len(texts)], "message_id": f"m{n}"}).encode("utf-8")
            try:
                connection.request("POST", "/model/parse", body=body,
                                   headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
                ok, errors = (ok + 1, errors) if response.status == 200 else (ok, errors + 1)
            except (OSError, http.client.HTTPException):
                errors += 1
                connection.close()
        connection.close()
        with lock:
            outcome["ok"] += ok
            outcome["errors"] += errors

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max_seconds + 60)
    seconds = time.perf_counter() - start
    return {**outcome, "seconds": round(seconds, 2), "requests_per_second": round(outcome["ok"] / seconds, 1)}


def count_rows(database: str, total: int) -> dict[str, Any]:
    from nlu_engine.server.message_store import open_store

    store = open_store(database, create=False)
    try:
        rows = store.rows()
    finally:
        store.close()
    ids = Counter(row["message_id"] for row in rows)
    expected = {f"m{n}" for n in range(total)}
    return {"rows": len(rows), "distinct_row_ids": len({row["id"] for row in rows}),
            "message_ids_twice": sum(1 for count in ids.values() if count > 1),
            "message_ids_missing": len(expected - set(ids)),
            "rows_by_worker": sorted(Counter(row["worker"] for row in rows).values(), reverse=True)}


def throwaway_postgres(stack: ExitStack) -> str:
    """The URL of a PostgreSQL cluster in a temporary folder, removed when ``stack`` closes."""
    from tests.postgres import Cluster

    cluster = Cluster()
    stack.callback(cluster.remove)
    return cluster.url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-m", "--model", default=None)
    parser.add_argument("--data", default=None, help="messages to send (default: a built-in list)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--per-connection", type=int, default=20, metavar="K",
                        help="requests a connection carries before the client connects anew")
    parser.add_argument("--max-seconds", type=float, default=900.0)
    parser.add_argument("--log-messages", default=None, metavar="DB",
                        help="a database URL or SQLite path; 'postgresql': a throwaway cluster "
                             "(default: a new SQLite file)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="log-workers-") as folder, ExitStack() as stack:
        model = args.model or default_model(Path(folder))
        database = args.log_messages or str(Path(folder) / "log.db")
        if database == "postgresql":
            database = throwaway_postgres(stack)
        server = ServerProcess(["-m", model, "--workers", str(args.workers), "--log-messages", database],
                               ready_path="/status", timeout=120)
        with server:
            sent = send_all(server.port, load_texts(args.data), args.clients, args.requests,
                            args.max_seconds, max(1, args.per_connection))
            code = server.stop(timeout=60)
        stored = count_rows(database, args.requests)
    result = {"workers": args.workers, "clients": args.clients, "requests": args.requests,
              "per_connection": args.per_connection,
              "server_exit_code": code, **sent, **stored, "cpu": cpu_model()}
    emit_json(result, args.json)
    met = (sent["errors"] == 0 and stored["rows"] == args.requests == stored["distinct_row_ids"]
           and stored["message_ids_twice"] == 0 and stored["message_ids_missing"] == 0)
    print(f"target {'met' if met else 'NOT met'}: {sent['errors']} errors, {stored['rows']} rows for "
          f"{args.requests} requests, {stored['message_ids_twice']} twice, "
          f"{stored['message_ids_missing']} missing", file=sys.stderr)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
