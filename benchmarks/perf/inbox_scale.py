"""The review inbox with a million logged messages: its first answer and one decision, in SQLite
and in PostgreSQL.

    .venv/bin/python -m benchmarks.perf.inbox_scale [--messages 1000000] [--databases sqlite,postgresql] \
        [--postgres URL] [--runs 5] [--max-seconds 3600] [--json OUT]

For each database it fills a new message log with ``--messages`` rows in bulk (the writer's own
``insert``, 10,000 rows a transaction) whose texts are the examples of ``data/nlu.yml`` as traffic
repeats them: as written, re-cased and re-punctuated, with a filler word, or with a number in them
(an order, a time), with the example's intent or another, a random confidence and now and then the
fallback. After each batch the review's index takes the new rows (``ReviewStore.catch_up``, what the
review's indexer thread does while traffic arrives); its time is reported as rows a second. Then
it starts the review app ``--runs`` times and times each one's first ``GET /api/inbox`` (the
target: <= 1 s), and ``POST /api/decide`` on the top group of the page, one decision each
(<= 100 ms, the write-back of ``reviewed.yml`` included); medians and maxima.

PostgreSQL is a throwaway cluster (Debian's ``initdb`` / ``pg_ctl``, as the tests make it) unless
``--postgres`` names a database (whose log and review tables are dropped at the end). Filling stops
at ``--max-seconds`` (the figures then say how many rows were reached); the temporary folder and the
cluster are removed at the end.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT as PROJECT_ROOT
from benchmarks.common import emit_json
from nlu_engine.evaluation.benchmarking import cpu_model

FILLERS = ["please", "now", "thanks", "hey", "pls", "asap", "today", "again", "ok", "hello"]
BATCH = 10_000


def examples() -> list[tuple[str, str]]:
    """(text, intent) of every example of the project's ``data/nlu.yml``."""
    from nlu_engine.training_data import load_data

    data = load_data(PROJECT_ROOT / "data" / "nlu.yml")
    return [(m.text, m.intent) for m in data.messages if m.intent and m.text]


def traffic_text(rng: random.Random, text: str) -> str:
    kind = rng.random()
    if kind < 0.4:
        return text
    if kind < 0.6:
        return rng.choice([text.upper(), text.capitalize(), text + "?", text + "!!", text.lower() + " ..."])
    words = text.split()
    if kind < 0.85:
        words.insert(rng.randint(0, len(words)), rng.choice(FILLERS))
    else:
        words.insert(rng.randint(0, len(words)), str(rng.randint(1, 99_999)))
    return " ".join(words)


def traffic_row(rng: random.Random, sample: list[tuple[str, str]], intents: list[str],
                at: float) -> dict[str, Any]:
    text, intent = rng.choice(sample)
    text = traffic_text(rng, text)
    if rng.random() < 0.15:
        intent = rng.choice(intents)
    confidence = round(rng.betavariate(5, 2), 4)
    second = rng.choice(intents)
    ranking = [{"name": intent, "confidence": confidence},
               {"name": second, "confidence": round(1 - confidence, 4)}]
    if confidence < 0.3:
        ranking.insert(0, {"name": "nlu_fallback", "confidence": 0.3})
        intent = "nlu_fallback"
    return {"id": uuid.uuid4().hex, "parsed_at": at, "endpoint": "parse", "worker": "bench", "model_id": "m",
            "model_file": "m.tar.gz", "sender_id": f"user{rng.randint(1, 5000)}", "message_id": None,
            "text": text, "intent": intent, "confidence": confidence,
            "out_of_scope": round(rng.random() * 0.6, 3),
            "intent_ranking": ranking, "entities": [],
            "parse_result": {"text": text, "intent": {"name": intent, "confidence": confidence}}}


def fill(target: str, messages: int, deadline: float, seed: int) -> dict[str, Any]:
    """Fill the log at ``target``, the review's index catching up after each batch."""
    from nlu_engine.review.decisions import open_review
    from nlu_engine.server.message_store import open_store

    rng = random.Random(seed)
    sample = examples()
    intents = sorted({intent for _, intent in sample})
    log = open_store(target)
    review = open_review(target)
    inserting = indexing = 0.0
    written = 0
    start = time.time() - 86400
    try:
        while written < messages and time.perf_counter() < deadline:
            rows = [traffic_row(rng, sample, intents, start + (written + i) * 0.05)
                    for i in range(min(BATCH, messages - written))]
            began = time.perf_counter()
            log.insert(rows)
            inserting += time.perf_counter() - began
            began = time.perf_counter()
            review.catch_up()
            indexing += time.perf_counter() - began
            written += len(rows)
    finally:
        review.close()
        log.close()
    return {"messages": written, "insert_seconds": round(inserting, 1), "index_seconds": round(indexing, 1),
            "index_rows_per_second": round(written / indexing) if indexing else None}


def time_page(target: str, data: Path, runs: int) -> dict[str, Any]:
    """``runs`` times: a new review app, its first inbox page, then one decision on its top group."""
    from starlette.testclient import TestClient

    from nlu_engine.review.app import ReviewSettings, create_app

    first, decide, starts = [], [], []
    groups = messages = 0
    for _ in range(runs):
        began = time.perf_counter()
        app = create_app(ReviewSettings(db=target, data=data))
        starts.append(time.perf_counter() - began)
        client = TestClient(app, base_url="http://127.0.0.1")
        began = time.perf_counter()
        page = client.get("/api/inbox")
        first.append(time.perf_counter() - began)
        body = page.json()
        groups, messages = body["total"], body["messages"]
        group = body["groups"][0]
        decision = {"intent": "greet", "reviewer": "bench",
                    "messages": [{"id": m["id"], "version": m["version"]} for m in group["messages"]]}
        began = time.perf_counter()
        answer = client.post("/api/decide", json=decision)
        decide.append(time.perf_counter() - began)
        if answer.status_code != 200:
            raise RuntimeError(f"the decision was answered {answer.status_code}: {answer.text[:200]}")
        app.state.review.store.close()
    return {"groups": groups, "pending": messages, "runs": runs,
            "app_start_ms": round(statistics.median(starts) * 1000, 1),
            "first_page_ms": round(statistics.median(first) * 1000, 1),
            "first_page_max_ms": round(max(first) * 1000, 1),
            "decision_ms": round(statistics.median(decide) * 1000, 1),
            "decision_max_ms": round(max(decide) * 1000, 1)}


def measure(name: str, target: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    data = folder / "data"
    data.mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "data" / "nlu.yml", data / "nlu.yml")
    deadline = time.perf_counter() + args.max_seconds
    result = {"database": name, **fill(target, args.messages, deadline, args.seed)}
    print(f"{name}: {result}", file=sys.stderr, flush=True)
    result.update(time_page(target, data, args.runs))
    print(f"{name}: {result}", file=sys.stderr, flush=True)
    return result


def drop_all(url: str) -> None:
    import sqlalchemy as sa

    from nlu_engine.review.decisions import review_metadata
    from nlu_engine.server.message_store import database_url, metadata

    engine = sa.create_engine(database_url(url))
    with engine.begin() as connection:
        review_metadata.drop_all(connection)
        metadata.drop_all(connection)
    engine.dispose()


def run_postgres(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    if args.postgres:
        try:
            return measure("postgresql", args.postgres, args, folder)
        finally:
            drop_all(args.postgres)
    from tests.postgres import Cluster

    try:
        cluster = Cluster()
    except BaseException as error:  # pytest's Skipped: PostgreSQL is not installed
        return {"database": "postgresql", "skipped": str(error)}
    try:
        return measure("postgresql", cluster.url, args, folder)
    finally:
        cluster.remove()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--postgres", help="a postgresql:// database to use instead of a throwaway cluster")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=3600, help="bound on filling each database")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    results = []
    folder = Path(tempfile.mkdtemp(prefix="nlu-inbox-scale-"))
    try:
        for name in args.databases.split(","):
            if name == "sqlite":
                results.append(measure("sqlite", str(folder / "log.db"), args, folder))
            elif name == "postgresql":
                results.append(run_postgres(args, folder))
            else:
                parser.error(f"--databases: '{name}' is neither sqlite nor postgresql")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    summary = {"cpu": cpu_model(), "targets": {"first_page_ms": 1000, "decision_ms": 100}, "results": results}
    emit_json(summary, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
