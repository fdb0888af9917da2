"""`nlu-engine test` beside `rasa test nlu` on one Rasa project: the files each writes, their
report keys and the headline figures.

    .venv/bin/python -m benchmarks.rasa.compare_rasa_test_nlu --project examples/travel_assistant

The project's NLU data is split 80/20 (`nlu-engine data split`, seed 42). Both engines train the
project's config.yml and domain.yml on the same 80 % (Rasa 3.6 through its venv, `$RASA_VENV`,
default ${TMPDIR:-/tmp}/rasa-ref) and test on the same 20 % with their own test command. Printed and written
to JSON (default benchmark_results/compare_rasa_test_nlu.json): the result files only one engine
wrote, for each report both wrote the keys only one has, and side by side intent accuracy (fallback
undone in both), response selection accuracy and each extractor's token-level micro F1. From the
intent successes and errors (`--successes`), each engine's intent confidences: percentiles, the
share of test messages below each threshold 0.1 ... 0.9 (what a FallbackClassifier with that
threshold would catch, leaving out its ambiguity rule), and the threshold at which nlu_engine's
share is closest to Rasa's at the config's FallbackClassifier threshold. One run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import RASA_VENV, RESULTS, ROOT

RASA_ENV = {"RASA_TELEMETRY_ENABLED": "false", "SQLALCHEMY_SILENCE_UBER_WARNING": "1",
            "TF_CPP_MIN_LOG_LEVEL": "3"}


def run(command: list[str], cwd: Path, log: Path) -> float:
    """Run ``command`` (output to ``log``); its wall seconds."""
    start = time.perf_counter()
    env = {**os.environ, **RASA_ENV, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as handle:
        done = subprocess.run(command, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{log.read_text()[-3000:]}")
    return time.perf_counter() - start


def headline(results: Path) -> dict[str, Any]:
    def load(name: str) -> dict[str, Any]:
        path = results / name
        return json.loads(path.read_text()) if path.is_file() else {}

    figures: dict[str, Any] = {
        "intent accuracy": load("intent_report.json").get("accuracy"),
        "response selection accuracy": load("response_selection_report.json").get("accuracy"),
    }
    extractors = [*results.glob("*Extractor*_report.json"), *results.glob("DIETClassifier_report.json")]
    for path in sorted(extractors):
        report = json.loads(path.read_text())
        micro = report.get("micro avg") or {}
        figures[f"{path.stem.removesuffix('_report')} token micro F1"] = micro.get("f1-score")
    return figures


def confidences(results: Path) -> list[float]:
    """The intent confidence of every test message (successes and errors; fallback undone)."""
    rows = []
    for name in ("intent_successes.json", "intent_errors.json"):
        path = results / name
        rows += json.loads(path.read_text()) if path.is_file() else []
    return sorted(float(r["intent_prediction"]["confidence"] or 0.0) for r in rows)


def threshold_figures(ours: list[float], rasa: list[float], config_threshold: float) -> dict[str, Any]:
    thresholds = [round(0.1 * i, 1) for i in range(1, 10)]

    def below(values: list[float], t: float) -> float:
        return sum(v < t for v in values) / len(values) if values else 0.0

    def percentiles(values: list[float]) -> dict[str, float]:
        return {f"p{p}": values[min(len(values) - 1, int(p / 100 * len(values)))] for p in (5, 10, 25, 50)}

    target = below(rasa, config_threshold)
    grid = [round(0.05 * i, 2) for i in range(1, 20)]
    matched = min(grid, key=lambda t: (abs(below(ours, t) - target), -t))
    return {
        "messages": len(ours),
        "percentiles": {"ours": percentiles(ours), "rasa": percentiles(rasa)},
        "below": {f"{t:.1f}": {"ours": below(ours, t), "rasa": below(rasa, t)} for t in thresholds},
        "config_threshold": config_threshold, "rasa_below_config_threshold": target,
        "ours_threshold_for_that_share": matched, "ours_share_there": below(ours, matched),
    }


def compare(ours: Path, rasa: Path) -> dict[str, Any]:
    ours_files = {p.name for p in ours.iterdir()}
    rasa_files = {p.name for p in rasa.iterdir()}
    keys = {}
    for name in sorted(ours_files & rasa_files):
        if name.endswith("_report.json"):
            a, b = json.loads((ours / name).read_text()), json.loads((rasa / name).read_text())
            keys[name] = {"only_ours": sorted(set(a) - set(b)), "only_rasa": sorted(set(b) - set(a))}
    return {"only_ours": sorted(ours_files - rasa_files), "only_rasa": sorted(rasa_files - ours_files),
            "both": sorted(ours_files & rasa_files), "report_keys": keys,
            "figures": {"ours": headline(ours), "rasa": headline(rasa)}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default=str(ROOT / "examples" / "travel_assistant"))
    parser.add_argument("--out", default=str(RESULTS / "compare_rasa_test_nlu.json"))
    args = parser.parse_args()
    project = Path(args.project).resolve()
    cli = [sys.executable, "-m", "nlu_engine"]
    rasa = str(RASA_VENV / "bin" / "rasa")
    with tempfile.TemporaryDirectory(prefix="compare-test-") as tmp:
        work = Path(tmp)
        split = [*cli, "data", "split", "--data", "data", "--out", str(work / "split")]
        run(split, project, work / "split.log")
        train, test = work / "split" / "training_data.yml", work / "split" / "test_data.yml"
        seconds = {
            "ours train": run([*cli, "train", "--config", "config.yml", "--data", str(train), "--domain",
                               "domain.yml", "--out", str(work), "--fixed-model-name", "ours"],
                              project, work / "ours_train.log"),
            "rasa train": run([rasa, "train", "nlu", "-c", str(project / "config.yml"), "--nlu", str(train),
                               "-d", str(project / "domain.yml"), "--out", str(work), "--fixed-model-name",
                               "rasa"], work, work / "rasa_train.log"),
        }
        seconds["ours test"] = run([*cli, "test", "-m", str(work / "ours.tar.gz"), "--data", str(test),
                                    "--out", str(work / "ours_results"), "--successes"],
                                   project, work / "ours_test.log")
        seconds["rasa test"] = run([rasa, "test", "nlu", "-m", str(work / "rasa.tar.gz"), "--nlu", str(test),
                                    "--out", str(work / "rasa_results"), "--successes"],
                                   work, work / "rasa_test.log")
        result = compare(work / "ours_results", work / "rasa_results")
        config = yaml.safe_load((project / "config.yml").read_text(encoding="utf-8"))
        fallback = [s for s in config.get("pipeline") or [] if s.get("name") == "FallbackClassifier"]
        threshold = float(fallback[0].get("threshold", 0.3)) if fallback else 0.3
        result["confidences"] = threshold_figures(confidences(work / "ours_results"),
                                                  confidences(work / "rasa_results"), threshold)
        summary = json.loads((work / "ours_results" / "summary.json").read_text())
        result["ours_fallback_rate"] = summary["intent"].get("fallback_rate")
        result.update({"project": str(project), "seconds": {k: round(v, 1) for k, v in seconds.items()},
                       "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
