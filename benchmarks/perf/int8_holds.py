"""Does the int8 runtime hold every score within 0.1 of float32? (issue 41: "int8, where shipped")

    .venv/bin/python -m benchmarks.perf.int8_holds [--archive ARCHIVE TEST.md ...]
        [--folds 1 2 ... 10] [--shots 10] [--work /tmp/int8_holds] [--json OUT]

For each archive (with a LanguageModelFeaturizer), parses every message of its test file twice, in
the float32 and in the int8 runtime (``Model.load(runtime=...)``), and compares: the intent
confidences of each message (the FallbackClassifier's ``nlu_fallback`` left out), the intents
predicted, the entities found (type and exact span) and their confidences. ``--folds`` first trains
``diet_bert_finetuned.yml`` on an N-shot draw of each NLU-Evaluation-Data fold's training split
(``benchmarks.peers.make_shots``, seed 42; ``--shots 0``: the whole split, about 15 minutes a fold)
and checks it on the fold's whole test split. A row holds when no confidence moves by more than 0.1.
Also prints each model's single-message p50 in both runtimes (the first 300 messages; only
meaningful on an otherwise idle machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import NLU_EVAL, ROOT, emit_json
from nlu_engine.assembly.model import Model
from nlu_engine.training_data import load_data

LIMIT = 0.1
Parsed = tuple[dict[str, float], list[tuple[int, int, str, float]]]


def parsed(model: Model, texts: list[str]) -> list[Parsed]:
    """Each message's intent confidences and its entities (start, end, type, confidence)."""
    found = []
    for result in model.parse_batch(texts):
        ranking = result["intent_ranking"]
        intents = {r["name"]: r["confidence"] for r in ranking if r["name"] != "nlu_fallback"}
        entities = [(e["start"], e["end"], e["entity"], float(e.get("confidence_entity") or 0.0))
                    for e in result["entities"]]
        found.append((intents, entities))
    return found


def p50_ms(model: Model, texts: list[str]) -> float:
    for text in texts[:20]:
        model.parse(text)
    times = []
    for text in texts[:300]:
        start = time.perf_counter()
        model.parse(text)
        times.append(1000 * (time.perf_counter() - start))
    return round(statistics.median(times), 3)


def compare(archive: Path, test: Path) -> dict[str, Any]:
    """The int8 runtime against float32 on one archive and its test file."""
    texts = [m.text for m in load_data(test).messages]
    reference, quantised = Model.load(archive, runtime="float32"), Model.load(archive, runtime="int8")
    expected, got = parsed(reference, texts), parsed(quantised, texts)
    moved, entity_moved, intents_differ, entities_differ = [], [], 0, 0
    for (want_intents, want_entities), (intents, entities) in zip(expected, got, strict=True):
        moved.append(max((abs(intents.get(k, 0.0) - v) for k, v in want_intents.items()), default=0.0))
        if want_intents and intents:
            intents_differ += max(want_intents, key=want_intents.get) != max(intents, key=intents.get)
        same_spans = [a[:3] for a in want_entities] == [b[:3] for b in entities]
        entities_differ += not same_spans
        entity_moved.append(max((abs(a[3] - b[3]) for a, b in zip(want_entities, entities, strict=False)
                                 if a[:3] == b[:3]), default=0.0))
    worst = max(max(moved, default=0.0), max(entity_moved, default=0.0))
    return {
        "archive": str(archive), "test": str(test), "messages": len(texts),
        "max_intent_confidence_diff": round(max(moved, default=0.0), 4),
        "p99_intent_confidence_diff": round(float(np.percentile(moved, 99)), 4) if moved else 0.0,
        "max_entity_confidence_diff": round(max(entity_moved, default=0.0), 4),
        "messages_over_limit": sum(m > LIMIT for m in moved) + sum(m > LIMIT for m in entity_moved),
        "intents_differ": intents_differ, "entity_spans_differ": entities_differ,
        "holds": worst <= LIMIT,
        "p50_ms_float32": p50_ms(reference, texts), "p50_ms_int8": p50_ms(quantised, texts),
    }


def fold_archive(fold: int, shots: int, work: Path) -> Path:
    """``diet_bert_finetuned.yml`` trained on fold ``fold``'s N-shot draw (kept between runs)."""
    archive = work / f"fold{fold}_{shots}shot.tar.gz"
    if archive.exists():
        return archive
    train = NLU_EVAL / f"KFold_{fold}" / "train.md"
    if shots:
        drawn = work / f"KFold_{fold}-{shots}shot.md"
        subprocess.run([sys.executable, "-m", "benchmarks.peers.make_shots", str(drawn),
                        "--shots", str(shots), "--train", str(train)], check=True, cwd=ROOT)
        train = drawn
    subprocess.run([sys.executable, "-m", "nlu_engine", "train", "-c", "diet_bert_finetuned",
                    "--data", str(train), "--out", str(work),
                    "--fixed-model-name", archive.name.removesuffix(".tar.gz")], check=True, cwd=ROOT)
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", nargs=2, action="append", default=[], metavar=("ARCHIVE", "TEST"),
                        help="an archive and the test file to compare it on (repeatable)")
    parser.add_argument("--folds", nargs="*", type=int, default=[], help="NLU-Evaluation-Data folds to train")
    parser.add_argument("--shots", type=int, default=10, help="examples an intent of each fold (0: all)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/int8_holds"), help="where fold models go")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    pairs = [(Path(a), Path(t)) for a, t in args.archive]
    pairs += [(fold_archive(f, args.shots, args.work), NLU_EVAL / f"KFold_{f}" / "test.md")
              for f in args.folds]
    rows = []
    for archive, test in pairs:
        rows.append(compare(archive, test))
        print(json.dumps(rows[-1]), flush=True)
    emit_json({"limit": LIMIT, "all_hold": all(r["holds"] for r in rows), "rows": rows}, args.json)
    return 0 if rows else 2


if __name__ == "__main__":
    sys.exit(main())
