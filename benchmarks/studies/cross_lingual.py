"""One bot across languages: a model trained in one xSID language, scored in each.

    nice -n 5 .venv/bin/python -m benchmarks.studies.cross_lingual --train en it --mixed it:da \\
        --shots 2 --out benchmark_results/cross_lingual.json

For each ``--train`` language (English included: xSID's English training messages, whose test
set is kept out of the datasets), trains ``--config`` (default: the shipped ``diet.yml``) with
``language:`` set to it on that language's xSID ``valid.md`` (about 20 examples an intent) and
scores the model on every ``--test`` language's ``test.md``. For each ``--mixed A:B``, trains on
A's ``valid.md`` plus ``--shots`` examples an intent drawn (``--seed``) from B's ``valid.md``,
with ``language: A`` (a bot written in A that was shown a few messages in B), and scores it on B's
``test.md``. Scores are those of ``nlu-engine test``: intent accuracy with the fallback undone
(as Rasa's) and counted as an error, the fallback rate, entity exact-span micro F1 (DIET's
entities), and the notice ``nlu-engine test`` gives when the test data's script is not the model's
language's. Prints Markdown tables; writes everything, with the training times, as JSON to
``--out``. Each training of ~300 examples takes 1-3 minutes on two cores.
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

XSID = DATASETS / "xSID"
#: the languages with a test set
LANGUAGES = ("it", "nl", "da", "id", "kk", "sr")
#: the languages a bot can be trained on
TRAIN_LANGUAGES = ("en", *LANGUAGES)
#: the extractor whose entities are reported when the model has several
ENTITY_EXTRACTOR = "DIETClassifier"


def language_config(config: Path, language: str) -> dict[str, Any]:
    """``config`` as a dict with ``language:`` set to ``language``."""
    import yaml

    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    return {**raw, "language": language}


def load(language: str, split: str) -> Any:
    """xSID ``<language>/<split>.md`` as TrainingData."""
    from nlu_engine.training_data import load_data

    return load_data(XSID / language / f"{split}.md")


def shots(data: Any, k: int, seed: int) -> list[Any]:
    """``k`` messages an intent of ``data`` (all of an intent that has fewer), drawn by ``seed``."""
    rng = random.Random(seed)
    drawn = []
    for intent in data.intents:
        examples = [m for m in data.messages if m.intent == intent]
        drawn.extend(rng.sample(examples, min(k, len(examples))))
    return drawn


def score(model: Any, language: str, test: Any) -> dict[str, Any]:
    """``nlu-engine test``'s headline scores of ``model`` on ``test`` (xSID ``language``)."""
    from nlu_engine.evaluation.experiments import evaluate_model
    from nlu_engine.evaluation.languages import compare_scripts

    evaluation, _, seconds = evaluate_model(model, test.messages)
    summary = evaluation.summary()
    intent, entities = summary["intent"], summary["entities"]
    extractor = ENTITY_EXTRACTOR if ENTITY_EXTRACTOR in entities else next(iter(entities), None)
    scripts = compare_scripts(model.pipeline.config.language, (m.text for m in test.messages))
    return {
        "test": language,
        "num_examples": intent["num_examples"],
        "intent_accuracy": intent["accuracy"],
        "intent_accuracy_with_fallback": intent["accuracy_with_fallback"],
        "fallback_rate": intent["fallback_rate"],
        "entity_extractor": extractor,
        "entity_exact_f1": entities[extractor]["exact_f1"] if extractor else None,
        "main_script": scripts["main_script"],
        "notice": scripts["notice"],
        "parse_seconds": round(seconds, 2),
    }


def train_and_score(config: dict[str, Any], train: Any, tests: dict[str, Any],
                    overrides: list[str], keep: Path | None = None, name: str = "model") -> dict[str, Any]:
    """Train ``config`` (with ``overrides``, ``NAME.KEY=VALUE``) on ``train`` in a temporary
    folder (``keep``: in that folder, as ``name``) and score the model on each test set."""
    from nlu_engine.assembly.model import Model
    from nlu_engine.assembly.model import train as train_model

    with tempfile.TemporaryDirectory(prefix="cross-lingual-") as tmp:
        start = time.perf_counter()
        archive = train_model(config, train, out=keep or tmp, fixed_model_name=name,
                              overrides=overrides, log=None)
        seconds = time.perf_counter() - start
        model = Model.load(archive)
        scores = [score(model, language, test) for language, test in tests.items()]
    return {"language": config["language"], "num_train": len(train.messages),
            "train_seconds": round(seconds, 1), "scores": scores}


def percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def table(rows: list[tuple[str, ...]], head: tuple[str, ...]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])


SCORE_HEAD = ("intent acc. (fallback undone)", "intent acc. (fallback counted)", "fallback rate",
              "entity exact F1", "test script (notice)")


def score_cells(s: dict[str, Any]) -> tuple[str, ...]:
    return (percent(s["intent_accuracy"]), percent(s["intent_accuracy_with_fallback"]),
            percent(s["fallback_rate"]), percent(s["entity_exact_f1"]),
            f"{s['main_script']}{' (notice)' if s['notice'] else ''}")


def parse_mixed(pairs: list[str]) -> list[tuple[str, str]]:
    """``it:da`` -> ``("it", "da")``, each checked against the xSID languages."""
    parsed = []
    for pair in pairs:
        first, _, second = pair.partition(":")
        if first not in TRAIN_LANGUAGES or second not in LANGUAGES or first == second:
            raise SystemExit(f"--mixed {pair}: write A:B with two different languages, A among "
                             f"{', '.join(TRAIN_LANGUAGES)} and B among {', '.join(LANGUAGES)}")
        parsed.append((first, second))
    return parsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, default=DIET_CONFIG)
    parser.add_argument("--train", nargs="*", choices=TRAIN_LANGUAGES, default=list(TRAIN_LANGUAGES),
                        help="languages to train on, each scored on every --test language")
    parser.add_argument("--test", nargs="+", choices=LANGUAGES, default=list(LANGUAGES))
    parser.add_argument("--mixed", nargs="*", default=[], metavar="A:B",
                        help="train on A plus --shots examples an intent of B, test on B")
    parser.add_argument("--shots", type=int, default=2, help="examples an intent of B (default 2)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the draw of --shots")
    parser.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE",
                        help="override a parameter, as nlu-engine train --set")
    parser.add_argument("--out", type=Path, default=RESULTS / "cross_lingual.json")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep each model in DIR (train-<language>.tar.gz, mixed-<A>-<B>.tar.gz)")
    args = parser.parse_args(argv)
    mixed = parse_mixed(args.mixed)
    tests = {language: load(language, "test") for language in args.test}
    result: dict[str, Any] = {"config": str(args.config), "overrides": args.set, "shots": args.shots,
                              "seed": args.seed, "trained": [], "mixed": []}
    for language in args.train:
        run = train_and_score(language_config(args.config, language), load(language, "valid"), tests,
                              args.set, args.keep, f"train-{language}")
        result["trained"].append(run)
        print(f"trained on {language} ({run['num_train']} examples) in {run['train_seconds']} s",
              file=sys.stderr, flush=True)
    for first, second in mixed:
        train = load(first, "valid")
        added = shots(load(second, "valid"), args.shots, args.seed)
        train = train.with_messages([*train.messages, *added])
        test = tests.get(second) or load(second, "test")
        run = train_and_score(language_config(args.config, first), train, {second: test}, args.set,
                              args.keep, f"mixed-{first}-{second}")
        result["mixed"].append({**run, "added_language": second, "num_added": len(added)})
    print_tables(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwritten to {args.out}")
    return 0


def print_tables(result: dict[str, Any]) -> None:
    """The Markdown tables of a result: each training by test language, then the mixed runs."""
    rows = [(run["language"], s["test"], *score_cells(s)) for run in result["trained"]
            for s in run["scores"]]
    if rows:
        print(table(rows, ("train", "test", *SCORE_HEAD)))
        print()
        print(table([(run["language"], str(run["num_train"]), f"{run['train_seconds']:.0f}")
                     for run in result["trained"]], ("train", "examples", "train seconds")))
    mixed = []
    for run in result["mixed"]:
        first, second = run["language"], run["added_language"]
        mixed.extend(reference_row(result, first, second))
        mixed.append((f"{first} + {result['shots']} an intent of {second} ({run['num_train']} "
                      f"examples)", second, *score_cells(run["scores"][0])))
        mixed.extend(reference_row(result, second, second))
    if mixed:
        print()
        print(table(list(dict.fromkeys(mixed)), ("train", "test", *SCORE_HEAD)))


def reference_row(result: dict[str, Any], trained: str, tested: str) -> list[tuple[str, ...]]:
    """The row of the model trained on ``trained`` alone scored on ``tested``, when it ran."""
    return [(f"{trained} only ({run['num_train']} examples)", tested, *score_cells(s))
            for run in result["trained"] if run["language"] == trained
            for s in run["scores"] if s["test"] == tested]

if __name__ == "__main__":
    sys.exit(main())
