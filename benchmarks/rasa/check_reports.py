"""Check `nlu-engine test` reports against an independent computation from `nlu-engine parse`.

    .venv/bin/python -m benchmarks.rasa.check_reports \
        --test ../shared/datasets/NLU-Evaluation-Data/KFold_1/test.md \
        (--model models/x.tar.gz | --config pipelines/logreg.yml --train .../train.md [--set K=V ...])

Steps: train a model (unless --model is given); pipe the test texts through `nlu-engine parse`
(JSON lines); run `nlu-engine test` on the same model and test data; recompute every number of
intent_report.json, intent_errors.json, response_selection_report.json, <Extractor>_report.json
(token level, exact and overlap spans) and summary.json from the parse lines with the code below
(scikit-learn for the classification reports, small loops for spans; nothing from
nlu_engine.evaluation), and compare. As `rasa test nlu`, an nlu_fallback prediction is undone
(the ranking's second entry) before intents are scored; the fallback rate is checked too.
Prints the headline figures, the parse and report-writing times, and exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.common import ROOT

CLI = [sys.executable, "-m", "nlu_engine.cli.main"]
TOLERANCE = 1e-9


def run(args: list[str], stdin: str | None = None) -> str:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"command failed ({done.returncode}): {' '.join(args)}\n{done.stderr[-3000:]}")
    return done.stdout


# --- independent metrics ---------------------------------------------------------------------------
def prf(correct: int, gold: int, predicted: int) -> tuple[float, float, float]:
    p = correct / predicted if predicted else 0.0
    r = correct / gold if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def token_label(start: int, end: int, entities: list[dict]) -> str:
    best, best_overlap = None, 0
    for e in entities:
        overlap = len(set(range(start, end)) & set(range(e["start"], e["end"])))
        if overlap > best_overlap:
            best, best_overlap = e, overlap
    if best is None:
        return "no_entity"
    parts = [str(best[k]) for k in ("entity", "group", "role") if best.get(k) not in (None, "")]
    return ".".join(parts)


def greedy_overlap(gold: list[tuple], predicted: list[tuple]) -> int:
    """Matches in text order: each gold entity takes the first unused overlapping prediction."""
    used: set[int] = set()
    matched = 0
    for g in sorted(gold, key=lambda s: (s[1], s[2])):
        for j, p in sorted(enumerate(predicted), key=lambda x: (x[1][1], x[1][2])):
            if j not in used and p[0] == g[0] and p[1] < g[2] and g[1] < p[2]:
                used.add(j)
                matched += 1
                break
    return matched


class Checker:
    def __init__(self) -> None:
        self.checked = 0
        self.failures: list[str] = []

    def same(self, what: str, ours: float, theirs: float) -> None:
        self.checked += 1
        if not isinstance(theirs, int | float) or abs(float(ours) - float(theirs)) > TOLERANCE:
            self.failures.append(f"{what}: recomputed {ours!r}, report has {theirs!r}")


def check(golds: list, parses: list[dict], results: Path, checker: Checker) -> dict[str, float]:
    from sklearn.metrics import classification_report

    figures: dict[str, float] = {}
    # intents, with Rasa's undo_fallback_prediction
    def undone(parse: dict) -> str | None:
        name = (parse["intent"] or {}).get("name")
        ranking = parse.get("intent_ranking") or []
        return ranking[1]["name"] if name == "nlu_fallback" and len(ranking) >= 2 else name

    pairs = [(g.intent, undone(p), g.text) for g, p in zip(golds, parses, strict=True) if g.intent]
    fallbacks = sum((p["intent"] or {}).get("name") == "nlu_fallback"
                    for g, p in zip(golds, parses, strict=True) if g.intent)
    targets = [t for t, _, _ in pairs]
    predictions = [p if p is not None else "" for _, p, _ in pairs]
    report = json.loads((results / "intent_report.json").read_text())
    expected = classification_report(targets, predictions, labels=sorted(set(targets)), output_dict=True,
                                     zero_division=0)
    accuracy = sum(t == p for t, p in zip(targets, predictions, strict=True)) / len(targets)
    checker.same("intent accuracy", accuracy, report["accuracy"])
    for key, row in expected.items():
        if isinstance(row, dict):
            for metric in ("precision", "recall", "f1-score", "support"):
                checker.same(f"intent_report[{key}][{metric}]", row[metric], report[key][metric])
    confusion = Counter(zip(targets, predictions, strict=True))
    for label in sorted(set(targets)):
        for other, count in report[label]["confused_with"].items():
            checker.same(f"confused_with {label}->{other}", confusion[(label, other)], count)
        shown = set(report[label]["confused_with"])
        row = sorted(((c, o) for (t, o), c in confusion.items() if t == label and o != label), reverse=True)
        if row and not shown:
            checker.failures.append(f"confused_with of {label} is empty but it was confused {row}")
        if shown and row and max(c for c, _ in row) != max(report[label]["confused_with"].values()):
            checker.failures.append(f"confused_with of {label} misses its most frequent confusion")
    errors = json.loads((results / "intent_errors.json").read_text())
    ours = sorted((text, t, p) for t, p, text in pairs if t != p)
    theirs = sorted((e["text"], e["intent"], e["intent_prediction"]["name"]) for e in errors)
    checker.checked += 1
    if ours != theirs:
        checker.failures.append(f"intent_errors.json: {len(theirs)} errors, recomputed {len(ours)}")
    macro_f1 = expected["macro avg"]["f1-score"]
    figures.update({"intent accuracy": accuracy, "intent macro F1": macro_f1})

    # entities, per extractor
    summary = json.loads((results / "summary.json").read_text())
    checker.same("summary intent accuracy", accuracy, summary["intent"]["accuracy"])
    checker.same("summary intent macro F1", macro_f1, summary["intent"]["macro_f1"])
    checker.same("summary fallback rate", fallbacks / len(pairs), summary["intent"]["fallback_rate"])
    figures["fallback rate"] = fallbacks / len(pairs)
    figures.update(check_responses(golds, parses, results, summary, checker))
    extractors = sorted({e.get("extractor") for p in parses for e in p["entities"]})
    for extractor in extractors:
        path = results / f"{extractor}_report.json"
        if not path.exists():
            checker.failures.append(f"{path.name} missing")
            continue
        entity_report = json.loads(path.read_text())
        gold_tokens, predicted_tokens = [], []
        exact: dict[str, Counter] = {"gold": Counter(), "predicted": Counter(), "correct": Counter()}
        overlap_correct: Counter = Counter()
        for gold, parse in zip(golds, parses, strict=True):
            predicted = [e for e in parse["entities"] if e.get("extractor") == extractor]
            for start, end in parse["text_tokens"]:
                gold_tokens.append(token_label(start, end, gold.entities))
                predicted_tokens.append(token_label(start, end, predicted))
            g = [(e["entity"], e["start"], e["end"]) for e in gold.entities]
            p = [(e["entity"], e["start"], e["end"]) for e in predicted]
            exact["gold"].update(s[0] for s in g)
            exact["predicted"].update(s[0] for s in p)
            for span, n in (Counter(g) & Counter(p)).items():
                exact["correct"][span[0]] += n
            for label in {s[0] for s in g}:
                overlap_correct[label] += greedy_overlap([s for s in g if s[0] == label],
                                                         [s for s in p if s[0] == label])
        labels = sorted(set(gold_tokens) - {"no_entity"})
        token_expected = classification_report(gold_tokens, predicted_tokens, labels=labels, output_dict=True,
                                               zero_division=0)
        for key, row in token_expected.items():
            for metric in ("precision", "recall", "f1-score", "support"):
                checker.same(f"{extractor} token [{key}][{metric}]", row[metric], entity_report[key][metric])
        for mode, correct in (("span_exact", exact["correct"]), ("span_overlap", overlap_correct)):
            types = set(exact["gold"]) | set(exact["predicted"])
            for label in types:
                p_, r_, f_ = prf(correct[label], exact["gold"][label], exact["predicted"][label])
                row = entity_report[mode][label]
                for metric, value in (("precision", p_), ("recall", r_), ("f1-score", f_)):
                    checker.same(f"{extractor} {mode}[{label}][{metric}]", value, row[metric])
            micro = prf(sum(correct.values()), sum(exact["gold"].values()), sum(exact["predicted"].values()))
            for metric, value in zip(("precision", "recall", "f1-score"), micro, strict=True):
                checker.same(f"{extractor} {mode} micro {metric}", value,
                             entity_report[mode]["micro avg"][metric])
            macro = [prf(correct[t], exact["gold"][t], exact["predicted"][t])[2]
                     for t in sorted(exact["gold"])]
            checker.same(f"{extractor} {mode} macro f1", sum(macro) / len(macro) if macro else 0.0,
                         entity_report[mode]["macro avg"]["f1-score"])
            short = "exact" if mode == "span_exact" else "overlap"
            checker.same(f"summary {extractor} {short}_f1", micro[2],
                         summary["entities"][extractor][f"{short}_f1"])
            figures[f"{extractor} entity {short} F1"] = micro[2]
        figures[f"{extractor} entity token F1 (Rasa)"] = token_expected["micro avg"]["f1-score"]
    return figures


def check_responses(golds: list, parses: list[dict], results: Path, summary: dict,
                    checker: Checker) -> dict[str, float]:
    """response_selection_report.json against scikit-learn, as Rasa's get_eval_data picks keys."""
    from sklearn.metrics import classification_report

    if len({g.intent_response_key for g in golds if g.intent_response_key}) < 2:
        return {}
    targets, predictions = [], []
    for gold, parse in zip(golds, parses, strict=True):
        if not gold.intent_response_key:
            continue
        selector = parse.get("response_selector") or {}
        own = gold.intent in selector.get("all_retrieval_intents", []) and gold.intent in selector
        response = (selector.get(gold.intent if own else "default") or {}).get("response") or {}
        targets.append(gold.intent_response_key)
        predictions.append(response.get("intent_response_key") or "")
    report = json.loads((results / "response_selection_report.json").read_text())
    expected = classification_report(targets, predictions, labels=sorted(set(targets)), output_dict=True,
                                     zero_division=0)
    for key, row in expected.items():
        if isinstance(row, dict):
            for metric in ("precision", "recall", "f1-score", "support"):
                checker.same(f"response_selection[{key}][{metric}]", row[metric], report[key][metric])
    accuracy = sum(t == p for t, p in zip(targets, predictions, strict=True)) / len(targets)
    checker.same("response selection accuracy", accuracy, report["accuracy"])
    checker.same("summary response selection accuracy", accuracy, summary["response_selection"]["accuracy"])
    return {"response selection accuracy": accuracy}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--test", required=True, help="test data file")
    parser.add_argument("--model", help="a trained archive (otherwise --config and --train)")
    parser.add_argument("--config", default="pipelines/logreg.yml")
    parser.add_argument("--train", help="training data (when no --model)")
    parser.add_argument("--set", action="append", default=[], help="training override K=V")
    parser.add_argument("--out", default=None, help="folder for the reports (default: a temp folder)")
    args = parser.parse_args()
    from nlu_engine.training_data import load_data  # the data reader only, not the metrics

    work = Path(args.out or tempfile.mkdtemp(prefix="check-reports-"))
    work.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        if not args.train:
            sys.exit("give --model, or --train (and --config) to train one")
        start = time.perf_counter()
        run([*CLI, "train", "-c", args.config, "--data", args.train, "--out", str(work),
             "--fixed-model-name", "checked", *[x for s in args.set for x in ("--set", s)]])
        model = str(work / "checked.tar.gz")
        print(f"trained {model} in {time.perf_counter() - start:.1f} s")
    golds = load_data(args.test).messages

    start = time.perf_counter()
    lines = run([*CLI, "parse", "-m", model, "--batch-size", "256"],
                stdin="".join(m.text + "\n" for m in golds)).splitlines()
    parse_wall = time.perf_counter() - start
    parses = [json.loads(line) for line in lines]
    if [p["text"] for p in parses] != [m.text for m in golds]:
        sys.exit("nlu-engine parse returned other texts than the test data (empty lines?)")

    start = time.perf_counter()
    out = run([*CLI, "test", "-m", model, "--data", args.test, "--out", str(work / "results")])
    test_wall = time.perf_counter() - start
    summary = json.loads((work / "results" / "summary.json").read_text())

    checker = Checker()
    figures = check(golds, parses, work / "results", checker)
    print(out.strip())
    print(f"\nmodel: {model}\ntest data: {args.test} ({len(golds)} examples)")
    for name, value in figures.items():
        print(f"  {name:<40} {value:.4f}")
    timings = summary["timings"]
    print(f"nlu-engine parse (whole process): {parse_wall:.1f} s")
    print(f"nlu-engine test (whole process): {test_wall:.1f} s, of which parsing "
          f"{timings['parse_seconds']:.1f} s and writing the reports {timings['report_seconds']:.1f} s")
    print(f"{checker.checked} numbers compared, {len(checker.failures)} mismatches")
    for failure in checker.failures[:30]:
        print(f"  MISMATCH {failure}")
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
