"""Issue 21's experiment: fine-tune a model with intents it has never seen, against a full retrain.

    .venv/bin/python -m benchmarks.studies.finetune_benchmark snips      [--out finetune_results]
    .venv/bin/python -m benchmarks.studies.finetune_benchmark nlu_eval   [--out finetune_results]
    .venv/bin/python -m benchmarks.studies.finetune_benchmark custom --train data/nlu.yml \\
        --test data/nlu.yml --held-out order_pizza [--set DIETClassifier.epochs=20]

For the data set's training data without the held-out intents (and so without the entity types
only they have; the script checks and prints which), in one run and in this order:

1. ``base``: ``nlu-engine train`` on the reduced training data;
2. ``finetuned``: ``nlu-engine train --finetune base --data FULL``;
3. ``full``: ``nlu-engine train`` on the full training data, from scratch;
4. ``no change``: ``nlu-engine train --finetune finetuned --data FULL`` (nothing to learn),
   and the time ``Model.load`` takes for that model in this process.

Every training is its own ``python -m nlu_engine train`` process, so a wall time is the whole
command a user runs (start, imports, data, training, archive). The fine-tuned and the full model
are scored on the test set: intent accuracy and macro F1, entity exact-span and overlap F1, and
each held-out intent's recall. The targets (issue 21) are printed next to the figures: fine-tune
wall time at most 20 % of the full training's, scores within 0.5 points of the full retrain,
held-out recall at least 95 %, and a no-change fine-tune under 10 s plus the model's load time.

Presets: ``snips`` holds out RateBook of SNIPS; ``nlu_eval`` holds out three intents of
NLU-Evaluation-Data's KFold_1 from three scenarios (alarm_set, qa_currency, transport_taxi).
Run it on an otherwise idle machine: it trains three models (SNIPS: several minutes each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import NLU_EVAL, SNIPS
from nlu_engine.assembly.model import Model
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.evaluation import evaluate, undo_fallback
from nlu_engine.evaluation.benchmarking import cpu_model, headline_scores
from nlu_engine.training_data import load_data, write_data

PRESETS: dict[str, dict[str, Any]] = {
    "snips": {"train": SNIPS / "train.md", "test": SNIPS / "test.md",
              "held_out": ["RateBook"]},
    "nlu_eval": {"train": NLU_EVAL / "KFold_1" / "train.md", "test": NLU_EVAL / "KFold_1" / "test.md",
                 "held_out": ["alarm_set", "qa_currency", "transport_taxi"]},
}
TARGETS = {"time_ratio": 0.20, "score_gap": 0.5, "held_out_recall": 0.95, "no_change_s": 10.0}


def run_train(args: list[str], log: Path) -> dict[str, float]:
    """``python -m nlu_engine train ARGS``: wall seconds and peak RSS (MB); its stderr to ``log``."""
    command = [sys.executable, "-m", "nlu_engine", "train", *args]
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as stderr:
        process = subprocess.Popen(command, stderr=stderr,
                                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"training failed ({' '.join(command)}); see {log}")
    return {"wall_s": round(seconds, 1), "peak_mb": round(usage.ru_maxrss / 1024)}


def reduced_data(full: TrainingData, held_out: list[str]) -> tuple[TrainingData, list[str]]:
    """The training data without the held-out intents, and the entity types that left with them."""
    missing = [name for name in held_out if name not in full.intents]
    if missing:
        raise SystemExit(f"intents not in the training data: {', '.join(missing)}")
    kept = full.with_messages([m for m in full.messages if m.intent not in held_out])
    return kept, sorted(set(full.entity_types) - set(kept.entity_types))


def scores(archive: Path, test: TrainingData, held_out: list[str]) -> dict[str, float]:
    """Headline scores on the test set, each held-out intent's recall and the intent accuracy on
    the test examples of the other intents, which measures forgetting, and the share of those
    predicted as a held-out intent (fractions)."""
    model = Model.load(archive)
    predictions = model.parse_batch([m.text for m in test.messages])
    evaluation = evaluate(test.messages, predictions)
    result = dict(headline_scores(evaluation.summary()))
    report = evaluation.intent.report if evaluation.intent else {}
    for name in held_out:
        result[f"recall_{name}"] = float((report.get(name) or {}).get("recall", 0.0))
    # fallback undone, as the headline intent scores do
    known = [(m.intent, undo_fallback(p)[0]["intent"]["name"])
             for m, p in zip(test.messages, predictions, strict=True) if m.intent not in held_out]
    result["known_intent_accuracy"] = sum(g == p for g, p in known) / max(len(known), 1)
    result["known_as_new"] = sum(p in held_out for _, p in known) / max(len(known), 1)
    return result


def finetune_outcomes(archive: Path) -> dict[str, str]:
    components = Model.load(archive).manifest.get("finetune", {}).get("components", [])
    return {f"{i}_{c['name']}": c["decision"] for i, c in enumerate(components)}


def experiment(train: Path, test: Path, held_out: list[str], overrides: list[str], out: Path,
               fractions: list[str]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    full_data = load_data(train)
    reduced, gone = reduced_data(full_data, held_out)
    write_data(reduced, out / "base_train.yml", "yaml")
    print(f"held out {', '.join(held_out)}: {len(full_data.messages) - len(reduced.messages)} of "
          f"{len(full_data.messages)} examples; entity types only they have: {', '.join(gone) or 'none'}",
          flush=True)
    sets = [arg for o in overrides for arg in ("--set", o)]
    models = out / "models"
    runs = {}
    runs["base"] = run_train(["--data", str(out / "base_train.yml"), "--out", str(models),
                              "--fixed-model-name", "base", *sets], out / "base.log")
    runs["finetuned"] = run_train(["--finetune", str(models / "base.tar.gz"), "--data", str(train),
                                   "--out", str(models), "--fixed-model-name", "finetuned",
                                   *sets, *fractions], out / "finetuned.log")
    runs["full"] = run_train(["--data", str(train), "--out", str(models), "--fixed-model-name",
                              "full", *sets], out / "full.log")
    runs["no_change"] = run_train(["--finetune", str(models / "finetuned.tar.gz"), "--data",
                                   str(train), "--out", str(models), "--fixed-model-name",
                                   "no_change", *sets, *fractions], out / "no_change.log")
    start = time.perf_counter()
    Model.load(models / "finetuned.tar.gz")
    load_s = time.perf_counter() - start
    for name, run in runs.items():
        print(f"{name}: {run['wall_s']} s, peak {run['peak_mb']} MB", flush=True)
    test_data = load_data(test)
    return {
        "train": str(train), "test": str(test), "held_out": held_out, "entity_types_held_out": gone,
        "overrides": overrides, "fractions": fractions, "runs": runs,
        "model_load_s": round(load_s, 2),
        "scores": {name: scores(models / f"{name}.tar.gz", test_data, held_out)
                   for name in ("base", "finetuned", "full")},
        "decisions": {name: finetune_outcomes(models / f"{name}.tar.gz")
                      for name in ("finetuned", "no_change")},
    }


def verdicts(result: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """(what, figure, target, met) per target of the issue (met None: a figure without one)."""
    runs, tuned, full = result["runs"], result["scores"]["finetuned"], result["scores"]["full"]
    ratio = runs["finetuned"]["wall_s"] / runs["full"]["wall_s"]
    rows = [("fine-tune wall time / full training's",
             f"{runs['finetuned']['wall_s']} s / {runs['full']['wall_s']} s = {100 * ratio:.1f} %",
             f"<= {100 * TARGETS['time_ratio']:.0f} %", ratio <= TARGETS["time_ratio"])]
    for key in ("intent_accuracy", "intent_macro_f1", "entity_exact_f1", "entity_overlap_f1"):
        if key in tuned and key in full:
            gap = 100 * (full[key] - tuned[key])
            rows.append((key.replace("_", " "), f"{100 * tuned[key]:.2f} (full {100 * full[key]:.2f})",
                         f"within {TARGETS['score_gap']}", gap <= TARGETS["score_gap"]))
    for name in result["held_out"]:
        recall = tuned[f"recall_{name}"]
        rows.append((f"recall of {name}", f"{100 * recall:.2f} (full {100 * full[f'recall_{name}']:.2f})",
                     f">= {100 * TARGETS['held_out_recall']:.0f}", recall >= TARGETS["held_out_recall"]))
    known = {name: 100 * result["scores"][name]["known_intent_accuracy"]
             for name in ("base", "finetuned", "full")}
    rows.append(("intent accuracy on the other intents' test examples (forgetting)",
                 f"{known['finetuned']:.2f} (before {known['base']:.2f}, full {known['full']:.2f})",
                 "(reported)", None))
    as_new = {name: 100 * result["scores"][name].get("known_as_new", 0.0) for name in ("finetuned", "full")}
    rows.append(("the other intents' test examples predicted as a new intent",
                 f"{as_new['finetuned']:.2f} % (full {as_new['full']:.2f} %)", "(reported)", None))
    retrained = [n for n, d in result["decisions"]["no_change"].items() if d != "reused"]
    rest = runs["no_change"]["wall_s"] - result["model_load_s"]
    rows.append(("no-change fine-tune", f"{runs['no_change']['wall_s']} s (model load "
                 f"{result['model_load_s']} s); retrained: {', '.join(retrained) or 'nothing'}",
                 f"< {TARGETS['no_change_s']:.0f} s + load, nothing retrained",
                 rest < TARGETS["no_change_s"] and not retrained))
    return rows


def markdown(result: dict[str, Any]) -> str:
    lines = ["| | measured | target | met |", "|---|---|---|---|"]
    lines += [f"| {what} | {figure} | {target} | {'' if met is None else 'yes' if met else 'no'} |"
              for what, figure, target, met in verdicts(result)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", choices=[*PRESETS, "custom"])
    parser.add_argument("--train", type=Path, help="custom: the full training data")
    parser.add_argument("--test", type=Path, help="custom: the test data")
    parser.add_argument("--held-out", nargs="+", default=None, metavar="INTENT")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="COMPONENT.KEY=VALUE", help="passed to every training")
    parser.add_argument("--epoch-fraction", default=None, help="passed to the fine-tunes")
    parser.add_argument("--rehearsal-fraction", default=None, help="passed to the fine-tunes")
    parser.add_argument("--out", type=Path, default=Path("finetune_results"))
    args = parser.parse_args()
    preset = PRESETS.get(args.preset, {})
    train, test = args.train or preset.get("train"), args.test or preset.get("test")
    held_out = args.held_out or preset.get("held_out")
    if not (train and test and held_out):
        parser.error("custom needs --train, --test and --held-out")
    fractions = [arg for flag, value in (("--epoch-fraction", args.epoch_fraction),
                                         ("--rehearsal-fraction", args.rehearsal_fraction))
                 if value is not None for arg in (flag, value)]
    out = args.out / args.preset
    result = experiment(Path(train), Path(test), list(held_out), args.overrides, out, fractions)
    result["machine"] = {"cpu": cpu_model(), "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
                         "load_average_at_end": os.getloadavg()}
    (out / "result.json").write_text(json.dumps(result, indent=2))
    table = markdown(result)
    (out / "result.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
