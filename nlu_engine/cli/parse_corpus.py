"""``nlu-engine parse --input IN --output OUT``: parse a corpus file, one output row per input row.

In this process by default (batched), in ``--workers N`` local processes, or on Ray with ``--ray``
(Ray Data reads the file in chunks and an actor pool of ``--workers`` actors, each holding the
model once, parses them). The output is the same in every mode. Nothing heavy is imported here.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from nlu_engine.cli import allow
from nlu_engine.contract.errors import NLUError

DEFAULT_MAX_TEXT_CHARS = 2_000


def add_arguments(parse: argparse.ArgumentParser) -> None:
    """The corpus flags of ``nlu-engine parse``."""
    files = parse.add_argument_group(
        "corpus files", "parse a whole file: --input IN --output OUT (one output row per input row, "
                        "in input order; a row that cannot be parsed carries an 'error' field)")
    files.add_argument("--input", default=None, metavar="IN",
                       help="text (one message a line), .jsonl (a 'text' field; other fields kept), "
                            ".csv (a 'text' column) or .parquet")
    files.add_argument("--output", default=None, metavar="OUT",
                       help=".jsonl (the parse JSON per row) or .parquet; written to a temporary "
                            "file and renamed when complete")
    files.add_argument("--input-format", default=None, choices=["text", "jsonl", "csv", "parquet"],
                       help="instead of the input's extension")
    files.add_argument("--output-format", default=None, choices=["jsonl", "parquet"],
                       help="instead of the output's extension")
    files.add_argument("--text-field", default="text",
                       help="the JSONL field or CSV / Parquet column holding the message (default: text)")
    files.add_argument("--force", action="store_true", help="replace OUT if it exists")
    files.add_argument("--max-text-chars", type=int, default=DEFAULT_MAX_TEXT_CHARS,
                       help="longer messages get an error row (default: 2000)")
    files.add_argument("--workers", type=int, default=None,
                       help="processes parsing in parallel, each with its own copy of the model "
                            "(default: 1; with --ray the cluster's CPU count)")
    files.add_argument("--ray", action="store_true",
                       help="run on Ray (pip install 'nlu-engine[distributed]'): a local Ray, or "
                            "the cluster at --ray-address")
    files.add_argument("--ray-address", default=None, metavar="ADDR",
                       help="a running Ray cluster (host:6379, ray://host:10001 or auto); implies --ray")


def run(args: argparse.Namespace) -> int:
    """Parse ``args.input`` into ``args.output``."""
    from nlu_engine.corpus.formats import FORMATS, format_of, require_pyarrow
    from nlu_engine.corpus.output import OUTPUT_FORMATS, check_output

    _check_flags(args)
    use_ray = args.ray or args.ray_address is not None
    input_format = format_of(args.input, args.input_format, FORMATS, "--input-format")
    output_format = format_of(args.output, args.output_format, OUTPUT_FORMATS, "--output-format")
    out = check_output(args.output, args.force, args.input)
    if output_format == "parquet":
        require_pyarrow("Parquet output")
    if use_ray:
        from nlu_engine.distributed import require_ray

        require_ray()
    from nlu_engine.corpus.parsing import CorpusJob, archive_path

    allowed = allow.allowed(args.allow_component, args.config)
    archive = archive_path(args.model, allowed)
    job = CorpusJob.plan(args.input, input_format, output_format, text_field=args.text_field,
                         batch_size=args.batch_size, max_chars=args.max_text_chars)
    stats = _run_job(args, job, archive, allowed, out, use_ray)
    errors = f" ({stats.errors} with an error)" if stats.errors else ""
    print(f"parsed {stats.rows} rows{errors} in {stats.seconds:.1f} s, {stats.rows_per_second:.0f} rows/s; "
          f"wrote {out}", file=sys.stderr)
    return 0


def _check_flags(args: argparse.Namespace) -> None:
    if args.text is not None:
        raise NLUError("give a TEXT to parse or --input FILE, not both")
    if args.input is None:
        raise NLUError("--output needs --input FILE (the corpus to parse)")
    if args.output is None:
        raise NLUError("--input needs --output FILE (.jsonl or .parquet)")
    if args.batch_size < 1:
        raise NLUError("--batch-size must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise NLUError("--workers must be at least 1")
    if args.max_text_chars < 1:
        raise NLUError("--max-text-chars must be at least 1")
    if args.runtime is not None and (args.ray or args.ray_address is not None or (args.workers or 1) > 1):
        raise NLUError("--runtime applies to a corpus parsed in this process; with --workers or --ray "
                       "each worker parses in the runtime the archive records")


def _run_job(args: argparse.Namespace, job: Any, archive: Any, allowed: frozenset[str], out: Any,
             use_ray: bool) -> Any:
    from nlu_engine.corpus.output import CorpusWriter
    from nlu_engine.corpus.parsing import parse_in_process, parse_with_processes, write_outputs

    bar = _progress_bar(job.rows)
    with contextlib.ExitStack() as stack:
        stack.callback(bar.close)
        if use_ray:
            from nlu_engine.distributed.cluster import connect
            from nlu_engine.distributed.corpus import parse_on_ray

            stack.enter_context(connect(args.ray_address))
            outputs = parse_on_ray(archive, allowed, job, args.workers)
        elif (args.workers or 1) > 1:
            outputs = parse_with_processes(archive, allowed, job, args.workers)
        else:
            from nlu_engine.assembly.model import Model

            outputs = parse_in_process(Model.load(archive, allowed, args.runtime), job)
        stack.callback(outputs.close)  # stop the workers before Ray shuts down
        writer = stack.enter_context(CorpusWriter(out, job.output_format))
        return write_outputs(outputs, writer, lambda rows, errors: bar.update(rows))


def _progress_bar(total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit="row", desc="parsing", file=sys.stderr, disable=None,
                dynamic_ncols=True, smoothing=0.05)
