"""A soak of the HTTP server: ``serve --workers 2`` under steady load while its model is swapped.

    .venv/bin/python -m benchmarks.perf.soak [--seconds 600] [--clients 8] [--swap-every 10] \
        [--archives A.tar.gz B.tar.gz] [--json out.json] [--plot benchmarks/figures/soak_rss.png]

Starts ``nlu-engine serve --workers 2`` on 127.0.0.1 (a free port). ``--clients`` threads, each
on its own keep-alive connection, alternate ``POST /model/parse`` and ``POST /model/parse/batch``
(5 texts) until the time is up. Every ``--swap-every`` seconds ``PUT /model`` swaps between the
two archives, and every ``--broken-every``-th swap names a broken archive (a real one cut in
half) instead, whose refusal (400, "could not load the model") is expected while serving goes on
with the old model. Each worker's resident set size (VmRSS, from /proc) is sampled every second.

Counts every request and every unexpected answer (anything but 200, and for the swaps anything
but 204, or 400 for the broken archive), and reports each worker's RSS at the end of the first
minute (or of the first third of a shorter run) and at the end, with the growth between them.
Writes the JSON (``benchmarks.common.emit_json``) and, with ``--plot``, a picture of RSS over
time with the swaps marked. Without ``--archives`` it trains two small logistic-regression
archives on data/nlu.yml (no TensorFlow). Every loop is bounded by the duration.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, emit_json
from nlu_engine.server.process import LOOPBACK, ServerProcess

TEXTS = [
    "book a table for two in Berlin tomorrow",
    "what's the weather in paris",
    "hi there",
    "thanks, bye",
    "i want to order a pizza with extra cheese",
    "play some jazz",
    "café crème ☕ à Zürich",
]
BROKEN = "broken.tar.gz"


@dataclass
class Tally:
    """What the clients and the swapper saw, shared under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: dict[str, int] = field(default_factory=lambda: {"parse": 0, "batch": 0})
    errors: list[str] = field(default_factory=list)
    swaps: list[dict[str, Any]] = field(default_factory=list)

    def error(self, what: str) -> None:
        with self.lock:
            if len(self.errors) < 1000:
                self.errors.append(what)


def worker_pids(pid: int) -> list[int]:
    """uvicorn's worker processes under ``pid`` (children started by multiprocessing's spawn, not
    its resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and f"PPid:\t{pid}\n" in (entry / "status").read_text()
                    and b"spawn_main" in (entry / "cmdline").read_bytes()):
                found.append(int(entry.name))
        except OSError:  # it ended meanwhile
            continue
    return sorted(found)


def rss_mb(pid: int) -> float | None:
    """VmRSS of ``pid`` in MB; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def client(port: int, deadline: float, tally: Tally, offset: int, pause: float) -> None:
    """Alternate single and batch parses on one keep-alive connection until ``deadline``."""
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=60)
    headers = {"Content-Type": "application/json"}
    for i in itertools.count(offset):
        if time.monotonic() >= deadline:
            break
        if i % 2:
            kind, path, body = "batch", "/model/parse/batch", {"texts": [TEXTS[(i + k) % len(TEXTS)]
                                                                        for k in range(5)]}
        else:
            kind, path, body = "parse", "/model/parse", {"text": TEXTS[i % len(TEXTS)]}
        try:
            connection.request("POST", path, json.dumps(body), headers)
            response = connection.getresponse()
            payload = response.read()
            if response.status != 200:
                tally.error(f"{kind}: {response.status} {payload[:200]!r}")
        except (OSError, http.client.HTTPException) as error:
            tally.error(f"{kind}: {type(error).__name__}: {error}")
            connection.close()
            connection = http.client.HTTPConnection(LOOPBACK, port, timeout=60)
        with tally.lock:
            tally.requests[kind] += 1
        if pause:
            time.sleep(pause)
    connection.close()


def swapper(port: int, start: float, deadline: float, every: float, broken_every: int, tally: Tally) -> None:
    """``PUT /model`` every ``every`` seconds: the two archives in turn, the broken one at times."""
    good = itertools.cycle(["b.tar.gz", "a.tar.gz"])
    for n in itertools.count(1):
        at = start + n * every
        if at >= deadline:
            break
        time.sleep(max(0.0, at - time.monotonic()))
        name = BROKEN if broken_every and n % broken_every == 0 else next(good)
        connection = http.client.HTTPConnection(LOOPBACK, port, timeout=120)
        began = time.monotonic()
        try:
            connection.request("PUT", "/model", json.dumps({"model_file": name}),
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            status, text = response.status, response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as error:
            status, text = 0, f"{type(error).__name__}: {error}"
        finally:
            connection.close()
        expected = (400 if name == BROKEN else 204)
        refused_clearly = name != BROKEN or "could not load the model" in text
        swap = {"at_s": round(began - start, 1), "model_file": name, "status": status,
                "seconds": round(time.monotonic() - began, 2)}
        with tally.lock:
            tally.swaps.append(swap)
        if status != expected or not refused_clearly:
            tally.error(f"PUT /model {name}: {status} {text[:200]}")


def sample_rss(server_pid: int, start: float, deadline: float, samples: list[dict[str, Any]]) -> None:
    """Each worker's RSS every second until ``deadline``."""
    while time.monotonic() < deadline:
        rss = {pid: rss_mb(pid) for pid in worker_pids(server_pid)}
        samples.append({"t": round(time.monotonic() - start, 1),
                        "rss_mb": {str(pid): round(mb, 1) for pid, mb in rss.items() if mb is not None}})
        time.sleep(1.0)


def growth(samples: list[dict[str, Any]], baseline_s: float) -> dict[str, dict[str, float]]:
    """Per worker: RSS at ``baseline_s`` (the first sample from then on) and at the end (median of
    the last 5 samples), and the peak of the ``baseline_s`` seconds after the baseline against
    the peak of the last ``baseline_s`` seconds (RSS steps with the model loaded, so peaks over
    a window compare like with like), each as a growth in percent."""
    workers: dict[str, dict[str, float]] = {}
    end_t = samples[-1]["t"]
    for pid in sorted({pid for s in samples for pid in s["rss_mb"]}):
        series = [(s["t"], s["rss_mb"][pid]) for s in samples if pid in s["rss_mb"]]
        after = [mb for t, mb in series if t >= baseline_s] or [series[-1][1]]
        end = statistics.median(mb for _, mb in series[-5:])
        first = max((mb for t, mb in series if baseline_s <= t < 2 * baseline_s), default=after[0])
        last = max((mb for t, mb in series if t >= end_t - baseline_s), default=end)
        workers[pid] = {"baseline_mb": after[0], "end_mb": round(end, 1),
                        "growth_pct": round(100 * (end - after[0]) / after[0], 2),
                        "peak_after_baseline_mb": first, "peak_last_window_mb": last,
                        "peak_growth_pct": round(100 * (last - first) / first, 2),
                        "peak_mb": max(mb for _, mb in series)}
    return workers


def plot(samples: list[dict[str, Any]], swaps: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    for n, pid in enumerate(sorted({pid for s in samples for pid in s["rss_mb"]})):
        points = [(s["t"], s["rss_mb"][pid]) for s in samples if pid in s["rss_mb"]]
        ax.plot([t for t, _ in points], [mb for _, mb in points], label=f"worker {n + 1} (pid {pid})")
    for swap in swaps:
        broken = swap["model_file"] == BROKEN
        ax.axvline(swap["at_s"], color="red" if broken else "grey", alpha=0.6 if broken else 0.15, lw=1)
    ax.set_xlabel("seconds (grey: model swap, red: broken archive refused)")
    ax.set_ylabel("RSS (MB)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def prepare(models: Path, archives: list[str] | None) -> None:
    """a.tar.gz, b.tar.gz (given, or two small archives trained here) and the broken one."""
    if archives:
        for name, source in zip(("a", "b"), archives, strict=True):
            shutil.copy(source, models / f"{name}.tar.gz")
    else:
        from nlu_engine.assembly.model import train

        word_only = {"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"},
                                                    {"name": "CountVectorsFeaturizer"},
                                                    {"name": "LogisticRegressionClassifier"}]}
        data = ROOT / "data" / "nlu.yml"
        logreg = ROOT / "nlu_engine" / "pipelines" / "logreg.yml"
        train(logreg, data, out=models, fixed_model_name="a", log=None)
        train(word_only, data, out=models, fixed_model_name="b", log=None)
    whole = (models / "a.tar.gz").read_bytes()
    (models / BROKEN).write_bytes(whole[: len(whole) // 2])


def run(seconds: float = 600, clients: int = 8, swap_every: float = 10, broken_every: int = 5,
        workers: int = 2, archives: list[str] | None = None, pause: float = 0.0,
        plot_path: Path | None = None) -> dict[str, Any]:
    """The soak; returns its result (the JSON)."""
    with tempfile.TemporaryDirectory(prefix="nlu-soak-") as folder:
        models = Path(folder)
        prepare(models, archives)
        args = ["-m", str(models / "a.tar.gz"), "--workers", str(workers), "--log-level", "warning"]
        with ServerProcess(args, ready_path="/status", timeout=180) as server:
            assert server.process is not None
            tally, samples = Tally(), []
            start = time.monotonic()
            deadline = start + seconds
            threads = [threading.Thread(target=client, args=(server.port, deadline, tally, i, pause))
                       for i in range(clients)]
            threads.append(threading.Thread(target=swapper, args=(server.port, start, deadline, swap_every,
                                                                   broken_every, tally)))
            threads.append(threading.Thread(target=sample_rss, args=(server.process.pid, start, deadline,
                                                                      samples)))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(seconds + 300)
            elapsed = time.monotonic() - start
            log = server.log()
    pids = {pid for s in samples for pid in s["rss_mb"]}
    if len(pids) > workers:
        tally.error(f"{len(pids) - workers} worker(s) restarted: pids {sorted(pids)}")
    if "Traceback" in log:
        tally.error("a traceback in the server log")
    baseline_s = min(60.0, seconds / 3)
    good = [s for s in tally.swaps if s["model_file"] != BROKEN]
    broken = [s for s in tally.swaps if s["model_file"] == BROKEN]
    result = {
        "seconds": round(elapsed, 1), "workers": workers, "clients": clients,
        "swap_every_s": swap_every, "broken_every": broken_every,
        "requests": tally.requests, "requests_per_s": round(sum(tally.requests.values()) / elapsed, 1),
        "swaps": len(good), "broken_swaps_refused": len([s for s in broken if s["status"] == 400]),
        "swap_seconds_median": statistics.median([s["seconds"] for s in good]) if good else None,
        "unexpected_errors": len(tally.errors), "error_samples": tally.errors[:10],
        "rss_baseline_at_s": baseline_s, "rss": growth(samples, baseline_s) if samples else {},
        "samples": samples,
    }
    if plot_path is not None and samples:
        plot(samples, tally.swaps, plot_path,
             f"serve --workers {workers}, {clients} clients, a swap every {swap_every:g} s "
             f"({elapsed / 60:.0f} min)")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600, help="duration (default: 600)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--swap-every", type=float, default=10, help="seconds between swaps (default: 10)")
    parser.add_argument("--broken-every", type=int, default=5,
                        help="every Nth swap names the broken archive (default: 5; 0: never)")
    parser.add_argument("--archives", nargs=2, metavar=("A", "B"), default=None,
                        help="the two archives to swap between (default: two small ones trained here)")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds each client waits between requests")
    parser.add_argument("--json", default=None, help="also write the JSON here")
    parser.add_argument("--plot", default=None, help="draw RSS over time into this PNG")
    args = parser.parse_args(argv)
    result = run(args.seconds, args.clients, args.swap_every, args.broken_every, args.workers,
                 args.archives, args.pause, Path(args.plot) if args.plot else None)
    emit_json(result, args.json)


if __name__ == "__main__":
    main()
