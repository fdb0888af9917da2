"""An imbalanced bot: SNIPS with one intent whole and the other six cut to a few examples each.

    nice -n 5 .venv/bin/python -m benchmarks.studies.imbalanced --whole PlayMusic --keep-per-intent 10 \\
        [--set DIETClassifier.head_transformer_layers=0] --out benchmark_results/imbalanced.json

Real bots look like this: a few big intents and a long tail. The median intent then has few
examples, so DIET's sentence head ranks the intents (``sentence_head_below``), while the entities
have thousands of annotations to learn from. The training set is drawn from SNIPS's ``train.md``
(``--whole``: the intent kept whole; every other intent cut to ``--keep-per-intent`` examples, a
seeded draw), written to a temporary file (the data stays in ``../shared/datasets``), trained with
``--config`` (the shipped ``diet.yml`` by default, ``--set`` overrides as ``nlu-engine train
--set``) and scored on SNIPS's whole ``test.md`` (700 messages, every intent): intent accuracy
(fallback undone and counted), exact-span entity F1 and the entity counts, with the training's
seconds. Compare with SNIPS trained on all of its data (``training_configs/snips.yml``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import DATASETS, DIET_CONFIG, RESULTS

SNIPS = DATASETS / "SNIPS"


def imbalanced(whole: str, keep: int, seed: int) -> Any:
    """SNIPS's training data with ``whole`` kept whole and ``keep`` examples of every other intent."""
    from nlu_engine.training_data import load_data

    data = load_data(SNIPS / "train.md")
    if whole not in data.intents:
        raise SystemExit(f"--whole {whole}: SNIPS's intents are {', '.join(sorted(data.intents))}")
    rng = random.Random(seed)
    kept = []
    for intent in sorted(data.intents):
        examples = [m for m in data.messages if m.intent == intent]
        kept.extend(examples if intent == whole else rng.sample(examples, min(keep, len(examples))))
    return data.with_messages(kept)


def train_and_score(config: Path, train: Any, overrides: list[str]) -> dict[str, Any]:
    """Train ``config`` on ``train`` in a temporary folder and score it on SNIPS's test."""
    from nlu_engine.assembly.model import Model
    from nlu_engine.assembly.model import train as train_model
    from nlu_engine.evaluation.experiments import evaluate_model
    from nlu_engine.training_data import load_data

    test = load_data(SNIPS / "test.md")
    with tempfile.TemporaryDirectory(prefix="imbalanced-") as tmp:
        start = time.perf_counter()
        archive = train_model(str(config), train, out=tmp, fixed_model_name="model",
                              overrides=overrides, log=None)
        seconds = time.perf_counter() - start
        evaluation, _, _ = evaluate_model(Model.load(archive), test.messages)
    summary = evaluation.summary()
    intent, entities = summary["intent"], summary["entities"]
    diet = entities.get("DIETClassifier") or next(iter(entities.values()), {})
    return {"intent_accuracy": intent["accuracy"],
            "intent_accuracy_with_fallback": intent["accuracy_with_fallback"],
            "intent_ece": (summary.get("confidence") or {}).get("ece"),
            "entity_exact_f1": diet.get("exact_f1"),
            "train_seconds": round(seconds, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=DIET_CONFIG)
    parser.add_argument("--whole", default="PlayMusic", help="the intent kept whole")
    parser.add_argument("--keep-per-intent", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42, help="seed of the draw")
    parser.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE")
    parser.add_argument("--out", type=Path, default=RESULTS / "imbalanced.json")
    args = parser.parse_args(argv)
    train = imbalanced(args.whole, args.keep_per_intent, args.seed)
    entities = sum(len(m.entities) for m in train.messages)
    print(f"training on {len(train.messages)} examples ({args.whole} whole, the others "
          f"{args.keep_per_intent} each), {entities} annotated entities", file=sys.stderr, flush=True)
    scores = train_and_score(args.config, train, args.set)
    result = {"config": str(args.config), "overrides": args.set, "whole": args.whole,
              "keep_per_intent": args.keep_per_intent, "seed": args.seed,
              "num_train": len(train.messages), "num_entities": entities, **scores}
    percent = {k: "-" if v is None else f"{100 * v:.2f}" for k, v in scores.items() if k != "train_seconds"}
    print("| examples | intent acc. (fallback undone / counted) | entity exact F1 | intent ECE | train s |")
    print("|---|---|---|---|---|")
    print(f"| {len(train.messages)} | {percent['intent_accuracy']} / "
          f"{percent['intent_accuracy_with_fallback']} | {percent['entity_exact_f1']} | "
          f"{'-' if scores['intent_ece'] is None else round(scores['intent_ece'], 3)} | "
          f"{scores['train_seconds']:.0f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
