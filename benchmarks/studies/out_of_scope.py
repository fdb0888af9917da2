"""Out of scope without out-of-scope examples (issue 29): train a shipped pipeline on
NLU-Evaluation-Data KFold_N's training split without K intents (chosen by seed), test on its test
split, where the left-out intents' messages are out of scope. Writes `nlu-engine test`'s reports
(summary.json, the reliability diagram, the fallback sweep) to --out and prints the summary.

    .venv/bin/python -m benchmarks.studies.out_of_scope --config nlu_engine/pipelines/diet.yml \
        --out results/oos_diet [--train ../shared/datasets/fewshot/NLU-Eval-KFold_1-10shot.md]

``--train`` trains on another file of the fold's intents (a few-shot draw) instead of its split.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.common import DIET_CONFIG, NLU_EVAL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(DIET_CONFIG))
    parser.add_argument("--fold", type=int, default=1)
    parser.add_argument("--hold-out-intents", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE")
    parser.add_argument("--out", default="results/out_of_scope")
    parser.add_argument("--train", default=None, help="training file (default: the fold's train.md)")
    args = parser.parse_args()

    from nlu_engine.evaluation.experiments import held_out_intents, train_and_evaluate, without_intents
    from nlu_engine.evaluation.reports import format_summary, write_reports
    from nlu_engine.training_data import load_data

    train = load_data(args.train or NLU_EVAL / f"KFold_{args.fold}" / "train.md")
    test = load_data(NLU_EVAL / f"KFold_{args.fold}" / "test.md")
    unknown = held_out_intents(train, args.hold_out_intents, args.seed)
    train, messages = without_intents(train, test.messages, unknown, "out_of_scope")
    start = time.perf_counter()
    run = train_and_evaluate(args.config, train, messages, overrides=args.set)
    info = {"config": args.config, "fold": args.fold, "held_out_intents": unknown, "seed": args.seed,
            "overrides": args.set, "timings": {"train_seconds": round(run.train_seconds, 1),
                                               "parse_seconds": round(run.parse_seconds, 1),
                                               "wall_seconds": round(time.perf_counter() - start, 1)}}
    summary = write_reports(run.evaluation, args.out, plot=True, info=info)
    print(format_summary(summary))
    print(json.dumps({"held_out_intents": unknown, "confidence": summary.get("confidence"),
                      "timings": info["timings"]}, indent=1))


if __name__ == "__main__":
    main()
