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

This module parses the flags and prints; the experiments are plain functions in
``nlu_engine.evaluation.experiments`` and the files are written by ``nlu_engine.evaluation.reports``.
Nothing heavy is imported at module level.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nlu_engine.cli import allow
from nlu_engine.contract.errors import DataError, NLUError

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
    test.add_argument("--out-of-scope-intent", default="out_of_scope", metavar="NAME",
                      help="the test data's intent for out-of-scope messages: scored as out of scope "
                           "(caught when they fall back), with recall, precision and AUROC "
                           "(default: out_of_scope)")
    test.add_argument("--hold-out-intents", type=int, default=0, metavar="K",
                      help="with --cross-validation: train each fold without K intents (chosen by "
                           "--random-seed) and score their test messages as out of scope: how often "
                           "the bot falls back on what it was never taught")
    test.add_argument("--runs", type=int, default=3, help="comparison runs (default: 3)")
    test.add_argument("--percentages", type=float, nargs="*", default=DEFAULT_PERCENTAGES,
                      metavar="P", help="comparison: percent of the training part to remove "
                                        "(default: 0 25 50 75)")
    test.add_argument("--random-seed", type=int, default=42, help="seed of folds and splits (default: 42)")
    test.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE",
                      help="with --config: override a parameter, e.g. DIETClassifier.epochs=5")
    test.add_argument("--ray", action="store_true",
                      help="with --cross-validation or --config: run each training as a Ray task "
                           "(pip install 'nlu-engine[distributed]'); a local Ray, or --ray-address")
    test.add_argument("--ray-address", default=None, metavar="ADDR",
                      help="a running Ray cluster (host:6379, ray://host:10001 or auto); implies --ray")
    test.add_argument("--cpus-per-trial", type=int, default=None, metavar="N",
                      help="CPUs (and TensorFlow threads) per training: with --ray the CPUs each task "
                           "reserves (default: 1); without, the threads of the sequential run "
                           "(default: TensorFlow's). Scores match between runs with the same N")
    allow.add_arguments(test, config=False)
    allow.add_runtime_argument(test)
    test.set_defaults(func=cmd_test)


def cmd_test(args: argparse.Namespace) -> int:
    if args.cpus_per_trial is not None and args.cpus_per_trial < 1:
        raise NLUError("--cpus-per-trial must be at least 1")
    if args.hold_out_intents and not args.cross_validation:
        raise NLUError("--hold-out-intents goes with --cross-validation")
    if args.hold_out_intents < 0:
        raise NLUError(f"--hold-out-intents must be a positive number (got {args.hold_out_intents})")
    if args.cross_validation:
        return run_cross_validation(args)
    if args.config:
        return run_comparison(args)
    if args.set:
        raise NLUError("--set changes training parameters; use it with --config (cross-validation "
                       "or comparison), not with a trained model (-m)")
    if args.ray or args.ray_address or args.cpus_per_trial:
        raise NLUError("--ray, --ray-address and --cpus-per-trial run the trainings of "
                       "--cross-validation or a comparison (--config ...), not a model test (-m)")
    return run_model_test(args)


def execution(args: argparse.Namespace) -> dict[str, Any]:
    """How the trainings ran, for summary.json."""
    on_ray = bool(args.ray or args.ray_address)
    return {"ray": on_ray, "ray_address": args.ray_address,
            "cpus_per_trial": args.cpus_per_trial or (1 if on_ray else None)}


@contextlib.contextmanager
def trial_runner(args: argparse.Namespace) -> Iterator[Any]:
    """The runner of an experiment's trainings: None (one after another, here, with
    ``--cpus-per-trial`` threads when given) or, with ``--ray``, Ray tasks."""
    from nlu_engine.evaluation.experiments import trial_threads

    if not (args.ray or args.ray_address):
        if args.cpus_per_trial:  # before TensorFlow and NumPy are imported
            os.environ.update(trial_threads(args.cpus_per_trial))
        yield None
        return
    from nlu_engine.distributed import require_ray

    require_ray()
    from nlu_engine.distributed.cluster import connect
    from nlu_engine.distributed.trials import RayRunner

    runner = RayRunner(args.cpus_per_trial or 1)
    with connect(args.ray_address):
        yield runner


# --- progress on the terminal ------------------------------------------------------------------
class TerminalProgress:
    """tqdm bars on stderr for an experiment (``nlu_engine.evaluation.experiments.Progress``):
    one over its folds or models, and a transient one while test messages are parsed."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.parse_bar: Any = None

    def begin(self, total: int, unit: str, desc: str) -> None:
        self.bar = _progress(total=total, desc=desc, unit=unit)

    def status(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text)

    def parsed(self, done: int, total: int, desc: str) -> None:
        if done == 0:
            self._close_parse_bar()
            self.parse_bar = _progress(total=total, desc=desc, unit="msg", leave=False)
        elif self.parse_bar is not None:
            self.parse_bar.update(done - self.parse_bar.n)
        if done >= total:
            self._close_parse_bar()

    def advance(self, note: str = "") -> None:
        if note:
            from tqdm import tqdm

            tqdm.write(note, file=sys.stderr)
        if self.bar is not None:
            self.bar.update(1)

    def end(self) -> None:
        self._close_parse_bar()
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def _close_parse_bar(self) -> None:
        if self.parse_bar is not None:
            self.parse_bar.close()
            self.parse_bar = None


def _progress(**kwargs: Any) -> Any:
    from tqdm import tqdm

    return tqdm(file=sys.stderr, disable=None, dynamic_ncols=True, **kwargs)


# --- helpers -----------------------------------------------------------------------------------
def _load_data(paths: list[str]) -> Any:
    from nlu_engine.training_data import load_data

    data = load_data(paths)
    if not data.messages:
        raise DataError(f"{', '.join(paths)}: no examples to evaluate")
    return data


def _write(evaluation: Any, args: argparse.Namespace, info: dict[str, Any]) -> dict[str, Any]:
    from nlu_engine.evaluation.reports import write_reports

    return write_reports(evaluation, args.out, errors=not args.no_errors, successes=args.successes,
                         plot=not args.no_plot, info=info)


def _print_summary(summary: dict[str, Any], out: str) -> None:
    from nlu_engine.evaluation.reports import format_summary

    print(format_summary(summary))
    timings = summary.get("timings", {})
    parse = f"; parsing took {timings['parse_seconds']:.1f} s" if "parse_seconds" in timings else ""
    if summary.get("runtime"):
        parse += f" in the {summary['runtime']} runtime"
    print(f"Reports written to {out}/ in {timings.get('report_seconds', 0.0):.1f} s{parse} "
          f"(open {Path(out) / 'index.html'})")
    for notice in summary.get("notices") or []:
        print(f"notice: {notice}", file=sys.stderr)


# --- one model ---------------------------------------------------------------------------------
def run_model_test(args: argparse.Namespace) -> int:
    from nlu_engine.assembly.model import Model
    from nlu_engine.evaluation.experiments import evaluate_model
    from nlu_engine.evaluation.languages import compare_scripts

    data = _load_data(args.data)
    model = Model.load(args.model, allow.allowed(args.allow_component), args.runtime)
    progress = TerminalProgress()
    try:
        evaluation, _, parse_seconds = evaluate_model(model, data.messages, progress=progress,
                                                      out_of_scope_intent=args.out_of_scope_intent)
    finally:
        progress.end()
    info = {
        "mode": "model",
        "model": str(model.path),
        "runtime": model.runtime,
        "data": [str(p) for p in args.data],
        "timings": {"parse_seconds": round(parse_seconds, 3)},
        # the test data's script against the model's language: a notice when they differ
        "test_language": compare_scripts(model.pipeline.config.language,
                                         (m.text for m in data.messages)),
    }
    if info["test_language"]["notice"]:
        info["notices"] = [info["test_language"]["notice"]]
    summary = _write(evaluation, args, info)
    _print_summary(summary, args.out)
    return 0


# --- cross-validation --------------------------------------------------------------------------
def run_cross_validation(args: argparse.Namespace) -> int:
    from nlu_engine.evaluation.experiments import cross_validate
    from nlu_engine.evaluation.reports import format_folds

    if args.config and len(args.config) > 1:
        raise NLUError("--cross-validation takes one --config; to compare configs leave out "
                       "--cross-validation")
    if args.folds < 2:
        raise NLUError(f"--folds must be at least 2 (got {args.folds})")
    config = args.config[0] if args.config else None
    data = _load_data(args.data)
    start = time.perf_counter()
    try:
        with trial_runner(args) as runner:
            result = cross_validate(config, data, folds=args.folds, seed=args.random_seed,
                                    overrides=args.set, progress=TerminalProgress(), runner=runner,
                                    hold_out_intents=args.hold_out_intents,
                                    out_of_scope_intent=args.out_of_scope_intent)
    except DataError as error:
        raise DataError(f"{', '.join(args.data)}: {error}") from None
    info = {
        "mode": "cross_validation",
        "config": str(config) if config else "pipelines/diet.yml (default)",
        "overrides": list(args.set),
        "data": [str(p) for p in args.data],
        "cross_validation": {"folds": args.folds, "random_seed": args.random_seed,
                             "hold_out_intents": args.hold_out_intents,
                             "metrics": result.metrics, "per_fold": result.fold_summaries},
        "execution": execution(args),
        "timings": {"train_seconds": round(result.train_seconds, 3),
                    "parse_seconds": round(result.parse_seconds, 3),
                    "wall_seconds": round(time.perf_counter() - start, 3)},
    }
    summary = _write(result.evaluation, args, info)
    print(f"Cross-validation, {args.folds} folds (held-out predictions of all folds together):")
    _print_summary(summary, args.out)
    print("Mean ± std over the test folds:")
    print(format_folds(result.metrics))
    return 0


# --- pipeline comparison -----------------------------------------------------------------------
def run_comparison(args: argparse.Namespace) -> int:
    from nlu_engine.evaluation.comparison import compare_configs
    from nlu_engine.evaluation.reports import format_comparison, write_comparison

    if args.runs < 1:
        raise NLUError(f"--runs must be at least 1 (got {args.runs})")
    for p in args.percentages:
        if not 0 <= p < 100:
            raise NLUError(f"--percentages must be between 0 and 100 (excluded), got {p:g}")
    data = _load_data(args.data)
    try:
        with trial_runner(args) as runner:
            comparison = compare_configs(args.config, data, runs=args.runs,
                                         percentages=args.percentages, seed=args.random_seed,
                                         overrides=args.set, progress=TerminalProgress(), runner=runner)
    except DataError as error:
        raise DataError(f"{', '.join(args.data)}: {error}") from None
    as_json = {**comparison.to_json([str(p) for p in args.data]), "execution": execution(args)}
    files, notices = write_comparison(as_json, args.out, plot=not args.no_plot)
    for notice in notices:
        print(f"notice: {notice}", file=sys.stderr)
    print(format_comparison(as_json))
    print(f"Comparison written to {Path(args.out)}/ ({', '.join(files)}) in {comparison.seconds:.0f} s")
    return 0
