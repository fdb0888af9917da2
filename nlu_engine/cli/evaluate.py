"""``nlu-engine test``: evaluate a model, cross-validate a config, or compare configs.

- ``nlu-engine test -m MODEL --data TEST [--out results]``: parse the test data with the model and
  write Rasa's report files, ``summary.json``, plots and ``index.html`` (see
  ``nlu_engine.evaluation``).
- ``nlu-engine test --config C --data D --cross-validation [--folds 5]``: train on each of N
  stratified, seeded folds, parse the held-out fold, write the same reports over all held-out
  predictions and print the mean ± std of each metric over the folds.
- ``nlu-engine test --config C1 C2 ... --data D [--runs 3] [--percentages 0 25 50 75]``: per run,
  a stratified 80/20 split; each config is trained on the training part with each percentage of
  it removed and scored on the test part; F1 against the number of training examples goes to
  ``comparison.json`` / ``comparison.png`` / ``index.html``.

Nothing heavy is imported at module level.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nlu_engine.errors import NLUError

DEFAULT_MODELS = "models"
DEFAULT_RESULTS = "results"
DEFAULT_PERCENTAGES = [0, 25, 50, 75]


def register(commands: Any) -> None:
    """Add the ``test`` subcommand to the CLI's subparsers."""
    test = commands.add_parser(
        "test",
        help="evaluate a model, cross-validate a config or compare configs; write reports",
        description=(
            "Evaluate a trained model on test data (-m, --data), cross-validate one config "
            "(--config C --cross-validation), or compare configs on shrinking training sets "
            "(--config C1 C2 ...). Reports go to --out: intent_report.json, intent_errors.json, "
            "<Extractor>_report.json, summary.json, plots and index.html."
        ),
    )
    test.add_argument("-m", "--model", default=DEFAULT_MODELS,
                      help="model archive, or a folder (its newest archive; default: models)")
    test.add_argument("--data", "--nlu", action="append", required=True, metavar="PATH",
                      help="test data (with --config: all the data); repeat for several")
    test.add_argument("--out", default=DEFAULT_RESULTS, help="folder for the reports (default: results)")
    test.add_argument("--successes", action="store_true", help="also write *_successes.json")
    test.add_argument("--no-errors", action="store_true", help="do not write *_errors.json")
    test.add_argument("--no-plot", action="store_true", help="do not draw the PNG plots")
    test.add_argument("--config", nargs="+", default=None, metavar="CONFIG",
                      help="config file(s): with --cross-validation one config, otherwise the "
                           "configs to compare")
    test.add_argument("--cross-validation", action="store_true",
                      help="cross-validate --config (default pipelines/diet.yml) on --data")
    test.add_argument("--folds", type=int, default=5, help="cross-validation folds (default: 5)")
    test.add_argument("--runs", type=int, default=3, help="comparison runs (default: 3)")
    test.add_argument("--percentages", type=float, nargs="*", default=DEFAULT_PERCENTAGES,
                      metavar="P", help="comparison: percent of the training part to remove "
                                        "(default: 0 25 50 75)")
    test.add_argument("--random-seed", type=int, default=42, help="seed of folds and splits (default: 42)")
    test.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE",
                      help="with --config: override a parameter, e.g. DIETClassifier.epochs=5")
    test.set_defaults(func=cmd_test)


def cmd_test(args: argparse.Namespace) -> int:
    if args.cross_validation:
        return run_cross_validation(args)
    if args.config:
        return run_comparison(args)
    if args.set:
        raise NLUError("--set changes training parameters; use it with --config (cross-validation "
                       "or comparison), not with a trained model (-m)")
    return run_model_test(args)


# --- helpers -----------------------------------------------------------------------------------
def _progress(**kwargs: Any) -> Any:
    from tqdm import tqdm

    return tqdm(file=sys.stderr, disable=None, dynamic_ncols=True, **kwargs)


def _note(line: str) -> None:
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def _fresh(data: Any) -> Any:
    """A copy of the training data whose messages training may annotate freely.

    Folds and splits share Message objects; training adds tokens and features to them in place.
    """
    messages = [
        dataclasses.replace(m, entities=[dict(e) for e in m.entities], tokens={}, features=[],
                            extra={}, intent_ranking=list(m.intent_ranking))
        for m in data.messages
    ]
    return data.with_messages(messages)


def pipeline_extractors(model: Any) -> list[str]:
    """Names of the model's components that extract entities."""
    names = []
    for component in model.pipeline.components:
        if "entities" in getattr(component, "provides", ()) and getattr(
            component, "entity_recognition", True
        ):
            names.append(component.component_name())
    return names


def _parse_all(model: Any, texts: list[str], batch_size: int = 256, desc: str = "parsing") -> list[dict]:
    results: list[dict] = []
    with _progress(total=len(texts), desc=desc, unit="msg", leave=False) as bar:
        for i in range(0, len(texts), batch_size):
            batch = texts[i : i + batch_size]
            results.extend(model.parse_batch(batch, batch_size=batch_size))
            bar.update(len(batch))
    return results


def _evaluate_model(model: Any, messages: list[Any], desc: str = "parsing") -> tuple[Any, list[dict], float]:
    from nlu_engine.evaluation import evaluate, extractors_in

    start = time.perf_counter()
    results = _parse_all(model, [m.text for m in messages], desc=desc)
    seconds = time.perf_counter() - start
    extractors = set(pipeline_extractors(model)) | set(extractors_in(results))
    return evaluate(messages, results, extractors), results, seconds


def _load_data(paths: list[str]) -> Any:
    from nlu_engine.errors import DataError
    from nlu_engine.training_data import load_data

    data = load_data(paths)
    if not data.messages:
        raise DataError(f"{', '.join(paths)}: no examples to evaluate")
    return data


def _write(evaluation: Any, args: argparse.Namespace, info: dict[str, Any]) -> dict[str, Any]:
    from nlu_engine.evaluation import write_reports

    return write_reports(evaluation, args.out, errors=not args.no_errors, successes=args.successes,
                         plot=not args.no_plot, info=info)


def _print_summary(summary: dict[str, Any], out: str) -> None:
    from nlu_engine.evaluation import format_summary

    print(format_summary(summary))
    timings = summary.get("timings", {})
    parse = f"; parsing took {timings['parse_seconds']:.1f} s" if "parse_seconds" in timings else ""
    print(f"Reports written to {out}/ in {timings.get('report_seconds', 0.0):.1f} s{parse} "
          f"(open {Path(out) / 'index.html'})")
    for notice in summary.get("notices") or []:
        print(f"notice: {notice}", file=sys.stderr)


# --- one model ---------------------------------------------------------------------------------
def run_model_test(args: argparse.Namespace) -> int:
    from nlu_engine.model import Model

    data = _load_data(args.data)
    model = Model.load(args.model)
    evaluation, _, parse_seconds = _evaluate_model(model, data.messages)
    info = {
        "mode": "model",
        "model": str(model.path),
        "data": [str(p) for p in args.data],
        "timings": {"parse_seconds": round(parse_seconds, 3)},
    }
    summary = _write(evaluation, args, info)
    _print_summary(summary, args.out)
    return 0


# --- cross-validation --------------------------------------------------------------------------
def run_cross_validation(args: argparse.Namespace) -> int:
    from nlu_engine.config import load_config
    from nlu_engine.evaluation import aggregate_folds, evaluate, extractors_in, format_folds
    from nlu_engine.model import Model, train
    from nlu_engine.training_data.split import stratified_folds

    if args.config and len(args.config) > 1:
        raise NLUError("--cross-validation takes one --config; to compare configs leave out "
                       "--cross-validation")
    if args.folds < 2:
        raise NLUError(f"--folds must be at least 2 (got {args.folds})")
    config = args.config[0] if args.config else None
    load_config(config, args.set)  # a bad config fails before anything trains
    data = _load_data(args.data)
    try:
        folds = stratified_folds(data, args.folds, args.random_seed)
    except ValueError as error:
        raise NLUError(f"{', '.join(args.data)}: {error}") from None

    golds: list[Any] = []
    results: list[dict] = []
    fold_summaries = []
    extractors: set[str] = set()
    train_seconds = parse_seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="nlu-cv-") as tmp, _progress(
        total=len(folds), desc="cross-validation", unit="fold"
    ) as bar:
        for k, (train_part, test_part) in enumerate(folds, start=1):
            bar.set_postfix_str(f"fold {k}: training on {len(train_part.messages)}")
            start = time.perf_counter()
            archive = train(config, _fresh(train_part), out=tmp, fixed_model_name=f"fold_{k}",
                            overrides=args.set, log=None)
            train_seconds += time.perf_counter() - start
            bar.set_postfix_str(f"fold {k}: parsing {len(test_part.messages)}")
            model = Model.load(archive)
            fold_eval, fold_results, seconds = _evaluate_model(model, test_part.messages,
                                                               desc=f"fold {k} parsing")
            parse_seconds += seconds
            extractors |= set(pipeline_extractors(model)) | set(extractors_in(fold_results))
            fold_summaries.append(fold_eval.summary())
            golds.extend(test_part.messages)
            results.extend(fold_results)
            archive.unlink(missing_ok=True)
            intent = fold_summaries[-1].get("intent")
            score = f": intent accuracy {intent['accuracy']:.4f}" if intent else ""
            _note(f"fold {k}/{len(folds)}{score}")
            bar.update(1)

    stats = aggregate_folds(fold_summaries)
    evaluation = evaluate(golds, results, extractors)
    info = {
        "mode": "cross_validation",
        "config": str(config) if config else "pipelines/diet.yml (default)",
        "overrides": list(args.set),
        "data": [str(p) for p in args.data],
        "cross_validation": {"folds": args.folds, "random_seed": args.random_seed, "metrics": stats,
                             "per_fold": fold_summaries},
        "timings": {"train_seconds": round(train_seconds, 3), "parse_seconds": round(parse_seconds, 3)},
    }
    summary = _write(evaluation, args, info)
    print(f"Cross-validation, {args.folds} folds (held-out predictions of all folds together):")
    _print_summary(summary, args.out)
    print("Mean ± std over the test folds:")
    print(format_folds(stats))
    return 0


# --- pipeline comparison -----------------------------------------------------------------------
def _config_names(paths: list[str]) -> list[str]:
    """Short unique names: the file stem, the path when stems clash, a counter for repeats."""
    stems = [Path(p).name.removesuffix(".yml").removesuffix(".yaml") for p in paths]
    names = [stem if stems.count(stem) == 1 else str(p) for stem, p in zip(stems, paths, strict=True)]
    unique: list[str] = []
    for name in names:
        candidate, k = name, 1
        while candidate in unique:
            k += 1
            candidate = f"{name} #{k}"
        unique.append(candidate)
    return unique


def run_comparison(args: argparse.Namespace) -> int:
    from nlu_engine.config import load_config
    from nlu_engine.model import Model, train
    from nlu_engine.training_data.split import train_test_split

    if args.runs < 1:
        raise NLUError(f"--runs must be at least 1 (got {args.runs})")
    percentages = list(args.percentages) or [0.0]
    for p in percentages:
        if not 0 <= p < 100:
            raise NLUError(f"--percentages must be between 0 and 100 (excluded), got {p:g}")
    percentages = [int(p) if float(p).is_integer() else p for p in percentages]
    for path in args.config:
        load_config(path, args.set)  # all configs are checked before anything trains
    names = _config_names(args.config)
    data = _load_data(args.data)

    results: dict[str, dict[str, Any]] = {
        name: {"config": path, "intent_macro_f1": [], "intent_accuracy": [], "intent_weighted_f1": [],
               "entities": {}}
        for name, path in zip(names, args.config, strict=True)
    }
    num_examples: list[list[int]] = []
    num_test: list[int] = []
    total = args.runs * len(percentages) * len(names)
    has_intents = False
    start_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nlu-compare-") as tmp, _progress(
        total=total, desc="comparison", unit="model"
    ) as bar:
        for run in range(args.runs):
            seed = args.random_seed + run
            try:
                train_all, test_part = train_test_split(data, 0.8, seed)
            except ValueError as error:
                raise NLUError(f"{', '.join(args.data)}: {error}") from None
            if not test_part.messages:
                raise NLUError(f"{', '.join(args.data)}: too few examples for an 80/20 split")
            num_test.append(len(test_part.messages))
            sizes: list[int] = []
            for name in names:
                for key in ("intent_macro_f1", "intent_accuracy", "intent_weighted_f1"):
                    results[name][key].append([])
                for scores in results[name]["entities"].values():
                    for values in scores.values():
                        values.append([0.0] * len(percentages))
            for pi, percent in enumerate(percentages):
                part = (train_all if percent == 0
                        else train_test_split(train_all, 1 - percent / 100, seed)[0])
                sizes.append(len(part.messages))
                for name, path in zip(names, args.config, strict=True):
                    bar.set_postfix_str(f"run {run + 1}, {percent}% removed, {name}")
                    archive = train(path, _fresh(part), out=tmp, fixed_model_name=f"{run}_{pi}",
                                    overrides=args.set, log=None)
                    model = Model.load(archive)
                    evaluation, _, _ = _evaluate_model(model, test_part.messages)
                    archive.unlink(missing_ok=True)
                    summary = evaluation.summary()
                    intent = summary.get("intent") or {}
                    has_intents = has_intents or bool(intent)
                    result = results[name]
                    result["intent_macro_f1"][run].append(intent.get("macro_f1", 0.0))
                    result["intent_accuracy"][run].append(intent.get("accuracy", 0.0))
                    result["intent_weighted_f1"][run].append(intent.get("weighted_f1", 0.0))
                    for extractor, scores in summary["entities"].items():
                        slot = result["entities"].setdefault(extractor, {
                            "exact_f1": [[0.0] * len(percentages) for _ in range(run + 1)],
                            "overlap_f1": [[0.0] * len(percentages) for _ in range(run + 1)],
                        })
                        slot["exact_f1"][run][pi] = scores["exact_f1"]
                        slot["overlap_f1"][run][pi] = scores["overlap_f1"]
                    bar.update(1)
            num_examples.append(sizes)
    if not has_intents:  # data without intents: no intent curves
        for result in results.values():
            for key in ("intent_macro_f1", "intent_accuracy", "intent_weighted_f1"):
                result[key] = []
    comparison = {
        "configs": names,
        "overrides": list(args.set),
        "data": [str(p) for p in args.data],
        "runs": args.runs,
        "random_seed": args.random_seed,
        "percentages": percentages,
        "num_examples": num_examples,
        "num_test_examples": num_test,
        "results": results,
        "seconds": round(time.perf_counter() - start_all, 1),
    }
    _write_comparison(comparison, args)
    return 0


def _write_comparison(comparison: dict[str, Any], args: argparse.Namespace) -> None:
    import statistics

    from nlu_engine.evaluation import plots
    from nlu_engine.evaluation.html import write_comparison_html

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "comparison.json").write_text(json.dumps(comparison, indent=2) + "\n", encoding="utf-8")
    images = []
    if not args.no_plot:
        if plots.available():
            images.append(("F1 against training examples",
                           plots.plot_comparison(comparison, out / "comparison.png")))
        else:
            print("notice: plots skipped: matplotlib is not installed", file=sys.stderr)
    write_comparison_html(out / "index.html", comparison, images)

    sizes = [round(statistics.fmean(c)) for c in zip(*comparison["num_examples"], strict=True)]
    header = ["config", "metric"] + [
        f"{p}% off ({n})" for p, n in zip(comparison["percentages"], sizes, strict=True)]
    rows = []
    for name, result in comparison["results"].items():
        lines = [("intent macro F1", result["intent_macro_f1"])] if result["intent_macro_f1"] else []
        lines += [(f"{ex} exact F1", s["exact_f1"]) for ex, s in result["entities"].items()]
        for metric, values in lines:
            rows.append([name, metric] + [
                f"{statistics.fmean(c):.4f} ± {statistics.pstdev(c):.4f}"
                for c in zip(*values, strict=True)])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    print(f"Comparison written to {out}/ (comparison.json, index.html"
          f"{', comparison.png' if images else ''}) in {comparison['seconds']:.0f} s")
