"""``nlu-engine benchmark TRAINING_CONFIG``: train, score and time one benchmark row per fold."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "benchmark", help="train and score a training config (training_configs/*.yml)"
    )
    parser.add_argument("training_config", help="e.g. training_configs/snips.yml")
    parser.add_argument("--out", default="benchmark_results", help="folder for JSON and markdown")
    parser.add_argument("--fold", action="append", default=None, help="only these folds")
    parser.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE")
    parser.add_argument("--keep-models", action="store_true", help="copy the archives to OUT/models")
    parser.set_defaults(func=cmd_benchmark)


def cmd_benchmark(args: argparse.Namespace) -> int:
    from nlu_engine.evaluation.benchmarking import run

    run(Path(args.training_config), Path(args.out), args.fold, args.set, args.keep_models)
    return 0
