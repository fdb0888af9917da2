"""DIET's seconds per epoch for a pipeline and data set, to compare two versions of the code.

    .venv/bin/python -m benchmarks.perf.epoch_times [--config pipelines/diet.yml]
        [--data ../shared/datasets/SNIPS/train.md] [--epochs 2] [--set COMPONENT.KEY=VALUE ...]

Trains in this process (no archive is written) and prints each epoch's seconds from DIET's
training history, the wall time of the whole pipeline's training and DIET's last loss. With the
default ramp of batch sizes, the first epoch runs the smallest batches and traces the graphs; the
last runs the largest. Run versions one after the other on an otherwise idle machine (A B A B).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from benchmarks.common import DIET_CONFIG, SNIPS
from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.evaluation.benchmarking import training_history
from nlu_engine.training_data import load_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(DIET_CONFIG))
    parser.add_argument("--data", default=str(SNIPS / "train.md"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="COMPONENT.KEY=VALUE")
    args = parser.parse_args()
    config = load_config(args.config, [f"DIETClassifier.epochs={args.epochs}", *args.overrides])
    pipeline = Pipeline.build(config)
    data = load_data(args.data)
    start = time.perf_counter()
    pipeline.train(data, log=None)
    wall = time.perf_counter() - start
    history = training_history(pipeline)
    epochs = history["epochs"] if history else []
    seconds = [e["seconds"] for e in epochs]
    print(json.dumps({
        "epoch_seconds": seconds,
        "median_after_first": statistics.median(seconds[1:]) if len(seconds) > 1 else None,
        "train_wall_s": round(wall, 1),
        "last_t_loss": epochs[-1]["t_loss"] if epochs else None,
    }))


if __name__ == "__main__":
    main()
