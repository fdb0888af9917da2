"""How nlu_engine's intent confidences compare with Rasa 3.6's, and which FallbackClassifier
threshold gives the same fallback rate.

    .venv/bin/python -m benchmarks.studies.fallback_thresholds \
        --train ../shared/datasets/NLU-Evaluation-Data/KFold_1/test.md \
        --train ../shared/datasets/NLU-Evaluation-Data/KFold_2/test.md \
        --test ../shared/datasets/NLU-Evaluation-Data/KFold_3/test.md

Both engines train the same config.yml (default: Rasa's suggested pipeline with DIET and
ResponseSelector at 100 epochs and `FallbackClassifier` at threshold 0.7, ambiguity 0.1) on the
same data, and parse the same test messages (Rasa through ../shared/tools/rasa-reference). Per
engine: intent accuracy with the fallback undone (as `rasa test nlu` scores it), the share of
messages that fell back, percentiles of the top intent's confidence, and the fallback rate the
FallbackClassifier rule (confidence below t, or the top two closer than the ambiguity threshold)
would give at each threshold t. Then, for Rasa's rate at the config's threshold, the threshold
at which nlu_engine's rate is closest. Writes a JSON file; one run per engine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import RASA_REFERENCE, RESULTS, ROOT

CLI = [sys.executable, "-m", "nlu_engine"]
THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 20)]
DEFAULT_CONFIG = {
    "recipe": "default.v1", "assistant_id": "fallback_thresholds", "language": "en",
    "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "RegexFeaturizer"},
        {"name": "LexicalSyntacticFeaturizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "CountVectorsFeaturizer", "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 4},
        {"name": "DIETClassifier", "epochs": 100}, {"name": "EntitySynonymMapper"},
        {"name": "ResponseSelector", "epochs": 100},
        {"name": "FallbackClassifier", "threshold": 0.7, "ambiguity_threshold": 0.1},
    ],
}


def run(command: list[str], stdin: str | None = None, cwd: Path = ROOT) -> str:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{done.stderr[-3000:]}")
    return done.stdout


def undone(result: dict[str, Any]) -> tuple[str | None, float, float, bool]:
    """(intent, confidence, margin to the second, fell back) with the fallback undone."""
    ranking = result.get("intent_ranking") or []
    fell_back = (result.get("intent") or {}).get("name") == "nlu_fallback"
    if fell_back and len(ranking) >= 2:
        ranking = ranking[1:]
    if not ranking:
        return None, 0.0, 0.0, fell_back
    top = float(ranking[0]["confidence"])
    second = float(ranking[1]["confidence"]) if len(ranking) > 1 else 0.0
    return ranking[0]["name"], top, top - second, fell_back


def engine_figures(results: list[dict[str, Any]], golds: list[str], ambiguity: float) -> dict[str, Any]:
    rows = [undone(r) for r in results]
    confidences = sorted(c for _, c, _, _ in rows)
    n = len(rows)

    def rate(threshold: float) -> float:
        return sum(c < threshold or m < ambiguity for _, c, m, _ in rows) / n

    return {
        "accuracy_fallback_undone": sum(row[0] == gold for row, gold in zip(rows, golds, strict=True)) / n,
        "fell_back": sum(f for _, _, _, f in rows) / n,
        "confidence_percentiles": {p: confidences[min(n - 1, int(p / 100 * n))] for p in (5, 10, 25, 50)},
        "confidence_median": statistics.median(confidences),
        "fallback_rate_by_threshold": {f"{t:.2f}": rate(t) for t in THRESHOLDS},
    }


def train_and_parse(config: Path, train: Path, test_texts: list[str], work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    start = time.perf_counter()
    run([*CLI, "train", "--config", str(config), "--data", str(train), "--out", str(work / "ours"),
         "--fixed-model-name", "ours"])
    out["ours_train_s"] = round(time.perf_counter() - start, 1)
    lines = run([*CLI, "parse", "-m", str(work / "ours" / "ours.tar.gz")], stdin="\n".join(test_texts) + "\n")
    out["ours"] = [json.loads(line) for line in lines.splitlines()]
    start = time.perf_counter()
    rasa_work = work / "rasa"
    rasa_work.mkdir()
    run([str(RASA_REFERENCE), "train", str(config), str(train), str(rasa_work)], cwd=rasa_work)
    out["rasa_train_s"] = round(time.perf_counter() - start, 1)
    model = sorted((rasa_work / "models").glob("*.tar.gz"))[-1]
    lines = run([str(RASA_REFERENCE), "parse", str(model)], stdin="\n".join(test_texts) + "\n", cwd=rasa_work)
    out["rasa"] = [json.loads(line) for line in lines.splitlines() if line.startswith("{")]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", action="append", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--config", default=None, help="a config.yml (default: see the module doc)")
    parser.add_argument("--out", default=str(RESULTS / "fallback_thresholds.json"))
    args = parser.parse_args()
    from nlu_engine.training_data import load_data

    with tempfile.TemporaryDirectory(prefix="fallback-") as tmp:
        work = Path(tmp)
        config = Path(args.config) if args.config else work / "config.yml"
        if not args.config:
            config.write_text(yaml.safe_dump(DEFAULT_CONFIG, sort_keys=False), encoding="utf-8")
        fallback = next(s for s in yaml.safe_load(config.read_text())["pipeline"]
                        if s["name"] == "FallbackClassifier")
        train = work / "train.yml"  # one YAML file: Rasa 3.6 reads no Markdown
        run([*CLI, "data", "convert", *[x for t in args.train for x in ("--data", t)], "--out", str(train),
             "-f", "yaml"])
        golds = load_data(args.test).messages
        texts = [m.text for m in golds]
        parsed = train_and_parse(config, train, texts, work)
    intents = [m.intent or "" for m in golds]
    ambiguity = float(fallback.get("ambiguity_threshold", 0.1))
    figures = {engine: engine_figures(parsed[engine], intents, ambiguity) for engine in ("ours", "rasa")}
    threshold = f"{float(fallback.get('threshold', 0.3)):.2f}"
    target = figures["rasa"]["fallback_rate_by_threshold"][threshold]
    ours = figures["ours"]["fallback_rate_by_threshold"]
    matched = min(ours, key=lambda t: (abs(ours[t] - target), -float(t)))
    result = {"train": args.train, "test": args.test, "num_test": len(texts), "config_threshold": threshold,
              "rasa_rate_at_config_threshold": target, "ours_threshold_for_that_rate": matched,
              "ours_rate_there": ours[matched], "train_seconds": {"ours": parsed["ours_train_s"],
                                                                  "rasa": parsed["rasa_train_s"]},
              "engines": figures, "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "engines"}, indent=2))
    for engine, values in figures.items():
        print(engine, {k: v for k, v in values.items() if k != "fallback_rate_by_threshold"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
