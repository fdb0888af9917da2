"""Whole `nlu-engine train` of the shipped pipeline: wall time, CPU time and peak memory, by case.

    .venv/bin/python -m benchmarks.perf.train_time [--cases first_bot,fewshot10,snips] [--runs 3]
        [--config pipelines/diet.yml] [--set COMPONENT.KEY=VALUE ...] [--json FILE]

Each run is a fresh ``nlu-engine train`` process, as a user runs it (the imports, TensorFlow's
start and the archive's writing included), into a temporary folder. The cases:

- ``first_bot``: a first bot written by hand, 5 intents and 32 examples in Japanese
  (``benchmarks/data/first_bot_ja/nlu.yml``), ``language: ja``;
- ``fewshot10``: NLU-Evaluation-Data fold 1, 10 examples an intent (640 examples);
- ``snips``: SNIPS's training set (13,084 examples).

Prints each run (wall s, the process's user + system CPU s, its peak resident memory in MB from
``wait4``, and each component's "trained in" seconds from the command's own log) and the median
of the runs; the load average before each run beside it. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import DATASETS, DIET_CONFIG, ROOT, SNIPS

CASES: dict[str, tuple[Path, str]] = {
    "first_bot": (ROOT / "benchmarks" / "data" / "first_bot_ja" / "nlu.yml", "ja"),
    "fewshot10": (DATASETS / "fewshot" / "NLU-Eval-KFold_1-10shot.md", "en"),
    "snips": (SNIPS / "train.md", "en"),
}
TRAINED_IN = re.compile(r"\[\d+/\d+\] (\S+) trained in ([\d.]+) s")


def config_for(config: Path, language: str, folder: Path) -> Path:
    """``config`` with its ``language:`` line set to ``language``."""
    text = config.read_text(encoding="utf-8")
    text, count = re.subn(r"(?m)^language:.*$", f"language: {language}", text)
    if not count:
        text = f"language: {language}\n{text}"
    path = folder / "config.yml"
    path.write_text(text, encoding="utf-8")
    return path


def one_run(data: Path, config: Path, overrides: list[str]) -> dict[str, object]:
    """One ``nlu-engine train`` process: its wall and CPU seconds, peak RSS and components."""
    with tempfile.TemporaryDirectory(prefix="train_time_") as folder:
        command = [sys.executable, "-m", "nlu_engine", "train", "--config", str(config),
                   "--data", str(data), "--out", folder, "--fixed-model-name", "model"]
        for override in overrides:
            command += ["--set", override]
        load = os.getloadavg()[0]
        log = Path(folder) / "train.log"
        start = time.perf_counter()
        with log.open("w", encoding="utf-8") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        text = log.read_text(encoding="utf-8", errors="replace")
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"train_time: nlu-engine train failed:\n{text[-2000:]}")
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "load": round(load, 2),
        "components": {name: float(seconds) for name, seconds in TRAINED_IN.findall(text)},
    }


def median_of(runs: list[dict[str, object]]) -> dict[str, float]:
    return {key: statistics.median(float(run[key]) for run in runs)  # type: ignore[arg-type]
            for key in ("wall_s", "cpu_s", "peak_rss_mb", "load")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="first_bot,fewshot10",
                        help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--config", default=str(DIET_CONFIG))
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)
    results: dict[str, object] = {}
    for case in args.cases.split(","):
        if case not in CASES:
            parser.error(f"--cases: unknown case {case!r}; choose from {', '.join(CASES)}")
        data, language = CASES[case]
        with tempfile.TemporaryDirectory() as folder:
            config = config_for(Path(args.config), language, Path(folder))
            runs = []
            for number in range(args.runs):
                runs.append(one_run(data, config, args.overrides))
                print(f"{case} run {number + 1}: {json.dumps(runs[-1])}", flush=True)
        results[case] = {"runs": runs, "median": median_of(runs)}
        print(f"{case} median: {json.dumps(results[case]['median'])}", flush=True)  # type: ignore[index]
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
