"""Issue 32's retrieval benchmark: ResponseSelector against Rasa 3.6, same split, same config.

    .venv/bin/python -m benchmarks.studies.retrieval_benchmark [--engines ours rasa] [--seeds 42 43]
        [--config benchmarks/data/retrieval/config.yml] [--set ResponseSelector.epochs=40]

The data (``benchmarks/data/retrieval/``, written for this benchmark) is a help assistant with
46 responses under three retrieval intents (``chitchat`` 16, ``faq`` 18, ``out_of_scope`` 12),
ten questions each, many of them near neighbours of another response's ("how were you built"
against "how are you", "stop sharing an album" against "share an album"), and three ordinary
intents. Per seed it is split 80/20, stratified by response key (``nlu-engine data split``'s
rule), and the responses go into the training file, so both engines read the same file.

Each engine trains with its own command in its own process (ours: ``python -m nlu_engine train``;
Rasa: ``../shared/tools/rasa-reference train``) and parses the test messages; a retrieval
message is right when the selector's ``intent_response_key`` is its gold key. Printed per run
and as medians: response accuracy, median confidence of the chosen response (right ones and
wrong ones), intent accuracy over all test messages, and the whole training command's wall time.
``--set`` overrides apply to our engine only (to try a change against Rasa's unchanged run).
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

from benchmarks.common import RASA_REFERENCE, RASA_VENV, RESULTS, ROOT

DATA = ROOT / "benchmarks" / "data" / "retrieval"
RASA_PARSE = """
import asyncio, json, sys
from rasa.core.agent import Agent
agent = Agent.load(sys.argv[1])
for line in sys.stdin:
    if line.strip():
        print(json.dumps(asyncio.run(agent.parse_message(line.strip()))), flush=True)
"""


def split(seed: int, folder: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The training file (examples and responses) and the test messages for ``seed``."""
    from nlu_engine.training_data import load_data, write_data
    from nlu_engine.training_data.split import train_test_split

    data = load_data(DATA / "nlu.yml")
    data.responses = yaml.safe_load((DATA / "domain.yml").read_text(encoding="utf-8"))["responses"]
    train, test = train_test_split(data, 0.8, seed)
    path = write_data(train, folder / "train.yml", "yaml")
    gold = [{"text": m.text, "intent": m.intent, "key": m.intent_response_key} for m in test.messages]
    return path, gold


def run(command: list[str], cwd: Path) -> float:
    """Wall seconds of ``command``; its output goes to ``cwd/log.txt``."""
    start = time.perf_counter()
    with (cwd / "log.txt").open("w") as log:
        done = subprocess.run(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, check=False,
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    if done.returncode:
        raise SystemExit(f"{command[:4]} failed; see {cwd / 'log.txt'}")
    return time.perf_counter() - start


def ours(config: Path, train: Path, texts: list[str], out: Path, overrides: list[str]) -> tuple[float, list]:
    sets = [arg for item in overrides for arg in ("--set", item)]
    wall = run([sys.executable, "-m", "nlu_engine", "train", "--config", str(config), "--data",
                str(train), "--out", str(out), "--fixed-model-name", "ours", *sets], out)
    from nlu_engine.assembly.model import Model

    return wall, Model.load(out / "ours.tar.gz").parse_batch(texts)


def rasa(config: Path, train: Path, texts: list[str], out: Path) -> tuple[float, list]:
    rasa_config = out / "config.yml"
    raw = yaml.safe_load(config.read_text())
    raw.setdefault("assistant_id", "retrieval-benchmark")
    rasa_config.write_text(yaml.safe_dump(raw, sort_keys=False))
    workdir = out / "cwd"  # an empty working folder: no cached components, no domain.yml
    workdir.mkdir(parents=True)
    wall = run([str(RASA_REFERENCE), "train", str(rasa_config), str(train), str(out / "rasa")], workdir)
    model = sorted((out / "rasa" / "models").glob("*.tar.gz"))[-1]
    # ``rasa-reference parse`` feeds its script to Python on stdin, so messages piped to it never
    # reach the script: run the same lines with the reference's own Python, the messages on stdin
    parsed = subprocess.run([str(RASA_VENV / "bin" / "python"), "-c", RASA_PARSE, str(model)],
                            input="\n".join(texts) + "\n", capture_output=True, text=True, check=True,
                            cwd=workdir, env={**os.environ, "RASA_TELEMETRY_ENABLED": "false",
                                              "TF_CPP_MIN_LOG_LEVEL": "2"})
    results = [json.loads(line) for line in parsed.stdout.splitlines() if line.startswith("{")]
    if len(results) != len(texts):
        raise SystemExit(f"rasa-reference parse gave {len(results)} results for {len(texts)} texts")
    return wall, results


def score(results: list[dict[str, Any]], gold: list[dict[str, Any]]) -> dict[str, Any]:
    right, wrong, errors = [], [], []
    intents = sum(r["intent"]["name"] == g["intent"] for r, g in zip(results, gold, strict=True))
    for result, expected in zip(results, gold, strict=True):
        if not expected["key"]:
            continue
        chosen = ((result.get("response_selector") or {}).get("default") or {}).get("response", {})
        confidence = float(chosen.get("confidence") or 0.0)
        if chosen.get("intent_response_key") == expected["key"]:
            right.append(confidence)
        else:
            wrong.append(confidence)
            errors.append(f"{expected['text']!r}: {expected['key']} -> "
                          f"{chosen.get('intent_response_key')} ({confidence:.2f})")
    total = len(right) + len(wrong)
    return {
        "response_accuracy": round(100 * len(right) / total, 2),
        "retrieval_messages": total,
        "median_confidence_right": round(statistics.median(right), 3) if right else None,
        "median_confidence_wrong": round(statistics.median(wrong), 3) if wrong else None,
        "intent_accuracy": round(100 * intents / len(gold), 2),
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["ours", "rasa"], choices=["ours", "rasa"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[42])
    parser.add_argument("--config", type=Path, default=DATA / "config.yml")
    parser.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE")
    parser.add_argument("--out", type=Path, default=RESULTS / "retrieval.json")
    args = parser.parse_args()
    from nlu_engine.evaluation.benchmarking import cpu_model

    rows = []
    with tempfile.TemporaryDirectory(prefix="retrieval-") as tmp:
        for seed in args.seeds:
            folder = Path(tmp) / f"seed{seed}"
            folder.mkdir()
            train, gold = split(seed, folder)
            texts = [g["text"] for g in gold]
            for engine in args.engines:  # A B per seed: machine noise hits both
                out = folder / engine
                out.mkdir()
                if engine == "ours":
                    wall, results = ours(args.config, train, texts, out, args.set)
                else:
                    wall, results = rasa(args.config, train, texts, out)
                row = {"seed": seed, "engine": engine, "train_wall_s": round(wall, 1),
                       **score(results, gold)}
                print(json.dumps({k: v for k, v in row.items() if k != "errors"}), flush=True)
                rows.append(row)
    medians = {
        engine: {key: statistics.median(r[key] for r in rows if r["engine"] == engine)
                 for key in ("response_accuracy", "intent_accuracy", "train_wall_s")}
        for engine in args.engines
    }
    result = {"config": str(args.config), "set": args.set, "seeds": args.seeds, "rows": rows,
              "median": medians, "cpu": cpu_model(), "date": time.strftime("%Y-%m-%d %H:%M")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(medians, indent=2))


if __name__ == "__main__":
    main()
