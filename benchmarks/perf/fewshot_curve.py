"""The few-shot learning curve: intent accuracy, ECE, entity F1 and training time against examples
an intent, for each pipeline and peer, as a table and a plot (BENCHMARKS.md, "Few examples an
intent").

    .venv/bin/python -m benchmarks.perf.fewshot_curve [--results benchmark_results/fewshot]
        [--run] [--pipelines diet diet_bert_finetuned crf] [--shots 5 10 30]

``--run`` first trains and scores every row with ``nlu-engine benchmark`` (one process a row,
``training_configs/fewshot{N}[_PIPELINE].yml``, and the full fold 1 as the last point), writing
``RESULTS/<config>.json``; the 30-shot file is drawn first when missing
(``python -m benchmarks.peers.make_shots --shots 30``). Without ``--run`` it reads what is there.
SetFit's lines (``benchmarks.peers.setfit_fewshot --jsonl RESULTS/setfit.jsonl``, in its own venv)
join the table and the plot when the file exists. Writes ``RESULTS/curve.md`` and
``RESULTS/curve.png``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import NLU_EVAL, RESULTS, ROOT

FULL = "full"
#: the training config of each pipeline's full-data point (fold 1 of NLU-Evaluation-Data)
FULL_CONFIGS = {"diet": "nlu_eval_kfold1", "diet_bert_finetuned": "nlu_eval_kfold1_bert_finetuned"}
THIRTY_SHOT = Path("/tmp/fewshot/NLU-Eval-KFold_1-30shot.md")


def config_name(pipeline: str, shots: int | str) -> str | None:
    if shots == FULL:
        return FULL_CONFIGS.get(pipeline)
    return f"fewshot{shots}" + ("" if pipeline == "diet" else f"_{pipeline.removeprefix('diet_')}")


def run(results: Path, pipelines: list[str], shots: list[int]) -> None:
    if 30 in shots and not THIRTY_SHOT.is_file():
        make = [sys.executable, "-m", "benchmarks.peers.make_shots", "--shots", "30"]
        subprocess.run(make, check=True, cwd=ROOT)
    for pipeline in pipelines:
        for n in [*shots, FULL]:
            name = config_name(pipeline, n)
            if name is None:
                continue
            subprocess.run([str(ROOT / ".venv" / "bin" / "nlu-engine"), "benchmark",
                            f"training_configs/{name}.yml", "--out", str(results)], check=True, cwd=ROOT)


def rows(results: Path, pipelines: list[str], shots: list[int]) -> list[dict[str, Any]]:
    """One row per system and point: ours from ``nlu-engine benchmark``'s JSON, SetFit's lines."""
    out = []
    for pipeline in pipelines:
        for n in [*shots, FULL]:
            name = config_name(pipeline, n)
            path = results / f"{name}.json"
            if name is None or not path.is_file():
                continue
            row = json.loads(path.read_text())["rows"][0]
            out.append({"system": f"{pipeline}.yml", "shots": n, "accuracy": row["intent_accuracy"],
                        "ece": row["intent_ece"], "entity_f1": row["entity_exact_f1"],
                        "train_s": row["train_wall_s"], "parse_p50_ms": row["parse_p50_ms"],
                        "cpu": json.loads(path.read_text())["machine"]["cpu"]})
    setfit = results / "setfit.jsonl"
    if setfit.is_file():
        for line in setfit.read_text().splitlines():
            r = json.loads(line)
            train = Path(r["train"]).name
            n = FULL if train == "train.md" else int(train.split("-")[-1].removesuffix("shot.md"))
            out.append({"system": "SetFit (MiniLM)", "shots": n, "accuracy": r["intent_accuracy"],
                        "ece": r["intent_ece"], "entity_f1": None, "train_s": r["train_s"],
                        "parse_p50_ms": r["parse_p50_ms"], "cpu": r["cpu"]})
    return out


def table(found: list[dict[str, Any]]) -> str:
    lines = ["| system | examples an intent | intent acc | ECE | exact-span F1 | train s | parse p50 ms |",
             "|---|---|---|---|---|---|---|"]
    for r in found:
        f1 = "" if r["entity_f1"] is None else f"{100 * r['entity_f1']:.2f}"
        lines.append(f"| {r['system']} | {r['shots']} | {100 * r['accuracy']:.2f} | {r['ece']:.3f} | {f1} "
                     f"| {r['train_s']:.0f} | {r['parse_p50_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def plot(found: list[dict[str, Any]], path: Path, full_examples: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (acc, ece) = plt.subplots(1, 2, figsize=(10, 4))
    for system in dict.fromkeys(r["system"] for r in found):
        points = sorted(((full_examples if r["shots"] == FULL else r["shots"]), r) for r in found
                        if r["system"] == system)
        x = [p[0] for p in points]
        acc.plot(x, [100 * p[1]["accuracy"] for p in points], marker="o", label=system)
        ece.plot(x, [p[1]["ece"] for p in points], marker="o", label=system)
    ticks = sorted({full_examples if r["shots"] == FULL else r["shots"] for r in found})
    for axis, title in ((acc, "intent accuracy (%)"), (ece, "ECE of the top intent")):
        axis.set_xscale("log")
        axis.set_xticks(ticks, [f"{t:.0f}" for t in ticks])
        axis.minorticks_off()
        axis.set_xlabel("training examples an intent (log; the last point: all of fold 1)")
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
    ece.axhline(0.03, color="grey", linestyle="--", linewidth=1)
    acc.legend(fontsize=8)
    fig.suptitle("NLU-Evaluation-Data fold 1, 64 intents, scored on its 1,076 test messages")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS / "fewshot")
    parser.add_argument("--run", action="store_true", help="train and score every row first")
    parser.add_argument("--pipelines", nargs="+", default=["diet", "diet_bert_finetuned", "crf"])
    parser.add_argument("--shots", nargs="+", type=int, default=[5, 10, 30])
    args = parser.parse_args(argv)
    args.results.mkdir(parents=True, exist_ok=True)
    if args.run:
        run(args.results, args.pipelines, args.shots)
    found = rows(args.results, args.pipelines, args.shots)
    if not found:
        print(f"no results in {args.results}; run with --run", file=sys.stderr)
        return 1
    text = table(found)
    (args.results / "curve.md").write_text(text)
    train = NLU_EVAL / "KFold_1" / "train.md"
    examples = sum(1 for line in train.read_text().splitlines() if line.lstrip().startswith("- "))
    plot(found, args.results / "curve.png", examples / 64)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
