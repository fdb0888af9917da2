"""Train nlu_engine and Rasa 3.6 on the same data with the same config.yml, side by side.

    .venv/bin/python -m benchmarks.rasa.compare_rasa --data ../shared/datasets/SNIPS/train.md \
        --config pipelines/diet.yml --epochs 3 --rounds 2

Runs A B A B ... (ours, then Rasa's, per round) so machine noise hits both, and prints per-epoch
time, whole-command wall time, peak memory and archive size for each, with the ratios. Rasa
runs through ../shared/tools/rasa-reference (its own venv; `rasa-reference setup` once).
Only DIETClassifier's `epochs` is changed in the config; everything else is as written, so
each engine applies its own defaults to the parameters the file leaves out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.common import DIET_CONFIG, RASA_REFERENCE, RESULTS


def with_epochs(config: Path, epochs: int, out: Path) -> Path:
    raw = yaml.safe_load(config.read_text())
    for step in raw["pipeline"]:
        if step.get("name") == "DIETClassifier":
            step["epochs"] = epochs
    raw.setdefault("assistant_id", "benchmark")
    out.write_text(yaml.safe_dump(raw, sort_keys=False))
    return out


def run_ours(config: Path, data: Path, out: Path) -> dict:
    command = [sys.executable, "-m", "nlu_engine", "train", "--config", str(config), "--data", str(data),
               "--out", str(out), "--fixed-model-name", "ours"]
    start = time.perf_counter()
    process = subprocess.Popen(command, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit("nlu_engine training failed")
    archive = out / "ours.tar.gz"
    with tarfile.open(archive) as tar:
        name = next(m.name for m in tar.getmembers() if m.name.endswith("diet.json"))
        history = json.load(tar.extractfile(name))["history"]  # type: ignore[arg-type]
    seconds = [e["seconds"] for e in history["epochs"]]
    return {
        "wall_s": round(wall, 1),
        "epoch_s_mean": round(sum(seconds) / len(seconds), 2),
        "epoch_s_median": round(statistics.median(seconds), 2),
        "peak_mb": round(usage.ru_maxrss / 1024),
        "archive_mb": round(archive.stat().st_size / 1e6, 2),
    }


def run_rasa(config: Path, data: Path, out: Path, epochs: int) -> dict:
    # Rasa caches trained components in ./.rasa/cache and would restore them instead of training
    # the same config and data again: each run gets an empty working folder
    workdir = out / "rasa-cwd"
    workdir.mkdir(parents=True, exist_ok=True)
    paths = [str(p.resolve()) for p in (config, data, out)]
    result = subprocess.run([str(RASA_REFERENCE), "train", *paths],
                            capture_output=True, text=True, check=False, cwd=workdir)
    text = result.stdout + result.stderr
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    bar = re.search(r"Epochs: *100%.*?\[(\d+):(\d+)(?::(\d+))?<", text)
    if not (wall and rss):
        raise SystemExit(f"rasa-reference failed:\n{text[-2000:]}")
    parts = [float(p) for p in wall.group(1).split(":")]
    wall_s = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    epoch_s = None
    if bar:
        h_m_s = [int(g) for g in bar.groups() if g is not None]
        total = h_m_s[0] * 60 + h_m_s[1] if len(h_m_s) == 2 else h_m_s[0] * 3600 + h_m_s[1] * 60 + h_m_s[2]
        epoch_s = round(total / epochs, 2)
    archives = sorted((out / "models").glob("*.tar.gz"))
    return {
        "wall_s": round(wall_s, 1),
        "epoch_s_mean": epoch_s,
        "peak_mb": round(int(rss.group(1)) / 1024),
        "archive_mb": round(archives[-1].stat().st_size / 1e6, 2) if archives else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--config", default=str(DIET_CONFIG))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default=str(RESULTS / "compare_rasa.json"))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="compare-rasa-") as tmp:
        config = with_epochs(Path(args.config), args.epochs, Path(tmp) / "config.yml")
        for round_ in range(args.rounds):
            ours = run_ours(config, Path(args.data), Path(tmp) / f"ours{round_}")
            print("ours", ours, flush=True)
            rasa = run_rasa(config, Path(args.data), Path(tmp) / f"rasa{round_}", args.epochs)
            print("rasa", rasa, flush=True)
            rows.append({"round": round_ + 1, "ours": ours, "rasa": rasa})
    def median(engine: str, key: str) -> float:
        return statistics.median(r[engine][key] for r in rows if r[engine][key] is not None)

    summary = {key: {"ours": median("ours", key), "rasa": median("rasa", key)}
               for key in ("epoch_s_mean", "wall_s", "peak_mb", "archive_mb")}
    for value in summary.values():
        value["rasa_over_ours"] = round(value["rasa"] / value["ours"], 2) if value["ours"] else None
    result = {"data": args.data, "config": args.config, "epochs": args.epochs, "rounds": rows,
              "median": summary, "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
