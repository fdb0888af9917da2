"""Does a confidence keep its meaning from one training to the next (issue 29)? Trains a pipeline
on NLU-Evaluation-Data KFold_N's training split once per seed (``random_seed`` of every
component that has one), parses the test split, and compares each test message's top-intent
confidence (the fallback undone) between every pair of seeds.

    .venv/bin/python -m benchmarks.studies.seed_stability --config nlu_engine/pipelines/diet.yml \
        --seeds 42 43 44 --out results/seed_stability

Prints, per seed, intent accuracy and ECE, and per pair of seeds the mean absolute difference of
the top-intent confidence, over all test messages and over those whose top intent both runs agree
on; writes the per-message confidences and the summary to ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from benchmarks.common import DIET_CONFIG, NLU_EVAL


def seed_overrides(config: str, seed: int) -> list[str]:
    """``NAME.random_seed=SEED`` for every component of ``config`` whose config has the field."""
    from nlu_engine.assembly.config import load_config

    names = [spec.name for spec in load_config(config).steps
             if "random_seed" in getattr(type(spec.config), "__dataclass_fields__", {})]
    return [f"{name}.random_seed={seed}" for name in dict.fromkeys(names)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(DIET_CONFIG))
    parser.add_argument("--fold", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 43, 44])
    parser.add_argument("--out", default="results/seed_stability")
    args = parser.parse_args()

    from nlu_engine.evaluation.confidence import undo_fallback
    from nlu_engine.evaluation.experiments import train_and_evaluate
    from nlu_engine.training_data import load_data

    train = load_data(NLU_EVAL / f"KFold_{args.fold}" / "train.md")
    test = load_data(NLU_EVAL / f"KFold_{args.fold}" / "test.md")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[int, dict[str, list]] = {}
    for seed in args.seeds:
        run = train_and_evaluate(args.config, train, test.messages,
                                 overrides=seed_overrides(args.config, seed), label=f"seed {seed}")
        names, confidences = [], []
        for result in run.results:
            intent = (undo_fallback(result)[0].get("intent") or {})
            names.append(intent.get("name"))
            confidences.append(float(intent.get("confidence") or 0.0))
        confidence = run.evaluation.confidence
        runs[seed] = {"names": names, "confidences": confidences}
        intent = run.evaluation.intent
        summary = {"seed": seed, "accuracy": intent.report["accuracy"] if intent else None,
                   "ece": confidence.ece if confidence else None,
                   "ece_floor": confidence.ece_floor if confidence else None,
                   "train_seconds": round(run.train_seconds, 1)}
        runs[seed]["summary"] = summary
        print(json.dumps(summary), flush=True)
    pairs = []
    for a, b in itertools.combinations(args.seeds, 2):
        ca, cb = np.array(runs[a]["confidences"]), np.array(runs[b]["confidences"])
        agree = np.array(runs[a]["names"]) == np.array(runs[b]["names"])
        pairs.append({"seeds": [a, b], "mean_abs_diff": float(np.abs(ca - cb).mean()),
                      "mean_abs_diff_same_intent": float(np.abs(ca - cb)[agree].mean()),
                      "same_top_intent": float(agree.mean())})
        print(json.dumps(pairs[-1]), flush=True)
    overall = float(np.mean([p["mean_abs_diff"] for p in pairs]))
    print(f"mean absolute difference of the top-intent confidence over {len(pairs)} pairs: {overall:.4f}")
    (out / "seed_stability.json").write_text(json.dumps(
        {"config": args.config, "fold": args.fold, "pairs": pairs, "mean_abs_diff": overall,
         "runs": {str(seed): run for seed, run in runs.items()}}, indent=1))


if __name__ == "__main__":
    main()
