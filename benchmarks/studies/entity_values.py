"""The values users already wrote, put to use (issue 59, item 3): gazetteer features and
swapped-value examples, each against the shipped ``diet.yml``.

    nice -n 10 .venv/bin/python -m benchmarks.studies.entity_values --gazetteer all --swaps 2 \\
        --shots 5 10 --xsid it id --out benchmark_results/entity_values.json

Trains ``diet.yml`` as it was before either (no ``GazetteerFeaturizer``, ``entity_swaps: 0``)
with, as asked, a ``GazetteerFeaturizer`` after its last sparse featurizer (``--gazetteer
listed``: lookup tables and synonyms, as ``diet.yml`` now has it; ``all``: annotated values too)
and DIET's ``entity_swaps`` (``--swaps N`` or ``auto``, as ``diet.yml`` now).
Scored on NLU-Evaluation-Data fold 1 at ``--shots`` examples an intent (the seeded files of
``training_configs/fewshot*.yml``, through ``nlu-engine benchmark``: intent accuracy, exact-span
F1, its training time), and on xSID ``--xsid`` languages (trained on ``valid.md`` with
``language:`` set, scored on ``test.md`` as ``benchmarks.studies.cross_lingual`` does).
``--lookup-from FILE`` adds to the few-shot files one lookup table per entity type, holding every
value of the type annotated in ``FILE`` (fold 1's whole training split: the lists a bot's
author keeps of their cities and products).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import DATASETS, DIET_CONFIG, RESULTS, ROOT

FEWSHOT = DATASETS / "fewshot"
FOLD1_TEST = DATASETS / "NLU-Evaluation-Data" / "KFold_1" / "test.md"
SPARSE = ("CountVectorsFeaturizer", "LexicalSyntacticFeaturizer", "RegexFeaturizer")


def pipeline(gazetteer: str) -> dict[str, Any]:
    """``diet.yml`` without its GazetteerFeaturizer, with one after its last sparse featurizer
    when asked (``listed``: lookup tables and synonyms; ``all``: annotated values too)."""
    import yaml

    config = yaml.safe_load(DIET_CONFIG.read_text(encoding="utf-8"))
    steps = [step for step in config["pipeline"] if step["name"] != "GazetteerFeaturizer"]
    if gazetteer != "off":
        last = max(i for i, step in enumerate(steps) if step["name"] in SPARSE)
        steps.insert(last + 1, {"name": "GazetteerFeaturizer", "entity_values": gazetteer == "all"})
    return {**config, "pipeline": steps}


def lookup_sections(source: Path) -> str:
    """Rasa Markdown lookup tables: every value of each type annotated in ``source``."""
    from nlu_engine.training_data import load_data
    from nlu_engine.training_data.entity_values import collect

    values = collect(load_data(source))
    lines: list[str] = []
    for kind in values.types:
        lines += ["", f"## lookup:{kind}", *(f"- {value}" for value in values.surfaces(kind))]
    return "\n".join(lines) + "\n"


def fewshot(shots: int, config: Path, overrides: list[str], folder: Path, lookup: str) -> dict[str, Any]:
    """``nlu-engine benchmark`` on fold 1 at ``shots`` examples an intent; its row."""
    train = FEWSHOT / f"NLU-Eval-KFold_1-{shots}shot.md"
    if lookup:
        written = folder / f"fewshot{shots}_lookup.md"
        written.write_text(train.read_text(encoding="utf-8").rstrip() + "\n" + lookup, encoding="utf-8")
        train = written
    training = folder / f"fewshot{shots}.yml"
    training.write_text(json.dumps({"name": f"fewshot{shots}", "pipeline": str(config), "train": str(train),
                                    "test": str(FOLD1_TEST), "folds": [1], "set": []}), encoding="utf-8")
    out = folder / f"fewshot{shots}"
    sets = [arg for item in overrides for arg in ("--set", item)]
    subprocess.run([sys.executable, "-m", "nlu_engine", "benchmark", str(training), "--out", str(out), *sets],
                   check=True, cwd=ROOT)
    row = json.loads(next(out.glob("*.json")).read_text(encoding="utf-8"))["rows"][0]
    return {"data": f"fold 1, {shots} an intent", "intent_accuracy": row["intent_accuracy"],
            "entity_exact_f1": row["entity_exact_f1"], "train_s": row["train_wall_s"],
            "peak_mb": row["peak_memory_mb"]}


def xsid(language: str, config: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Trained on xSID ``language``'s ``valid.md``, scored on its ``test.md``."""
    from benchmarks.studies.cross_lingual import load, train_and_score

    trained = train_and_score({**config, "language": language}, load(language, "valid"),
                              {language: load(language, "test")}, overrides)
    score = trained["scores"][0]
    return {"data": f"xSID {language}", "intent_accuracy": score["intent_accuracy_with_fallback"],
            "entity_exact_f1": score["entity_exact_f1"], "train_s": trained["train_seconds"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gazetteer", choices=["off", "listed", "all"], default="off",
                        help="a GazetteerFeaturizer of listed values, or of annotated ones too")
    parser.add_argument("--swaps", default="0", help="DIET's entity_swaps: a number or auto (default 0)")
    parser.add_argument("--shots", type=int, nargs="*", default=[5, 10], choices=[5, 10, 30])
    parser.add_argument("--xsid", nargs="*", default=["it", "id"], metavar="LANGUAGE")
    parser.add_argument("--lookup-from", type=Path, default=None, metavar="FILE")
    parser.add_argument("--out", type=Path, default=RESULTS / "entity_values.json")
    args = parser.parse_args(argv)
    overrides = [f"DIETClassifier.entity_swaps={args.swaps}"]
    config = pipeline(args.gazetteer)
    lookup = lookup_sections(args.lookup_from) if args.lookup_from else ""
    rows = []
    with tempfile.TemporaryDirectory(prefix="entity-values-") as tmp:
        written = Path(tmp) / "pipeline.yml"
        written.write_text(json.dumps(config), encoding="utf-8")
        rows += [fewshot(shots, written, overrides, Path(tmp), lookup) for shots in args.shots]
    rows += [xsid(language, config, overrides) for language in args.xsid]
    print("| data | intent acc | entity exact F1 | train s |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['data']} | {100 * row['intent_accuracy']:.2f} | {100 * row['entity_exact_f1']:.2f} "
              f"| {row['train_s']} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gazetteer": args.gazetteer, "swaps": args.swaps,
                                    "lookup_from": str(args.lookup_from or ""), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
