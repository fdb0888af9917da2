"""Milliseconds of DIET's CRF decode (``crf_decode.CRFDecoder.decode``) of 1, 4, 32 and 256
messages, with and without the marginals, on a SNIPS-sized BILOU tag set.

    .venv/bin/python -m benchmarks.perf.crf_decode_speed [--types 39] [--length 12]
        [--rows 1,4,32,256] [--logits trained|random] [--repeats 7] [--against FILE]

The tag set is BILOU over ``--types`` entity types (39, SNIPS's: K = 157 tags; 20 gives
K = 81), with its constraints, as DIET parses. ``--logits trained``: as a trained model's, each
message's tags a valid BILOU path (O, or with a third's chance an entity of one to three
tokens) scoring 8 over N(0, 1) noise, transitions N(0, 0.5); ``random``: logits N(0, 4),
transitions N(0, 2), where the pruning of the Viterbi's block leaves many rows. One message
has ``--length`` tokens; a batch's lengths are drawn from half to one and a half times it and
padded to its longest.

Each repeat decodes 256 messages' worth of batches (fresh logits each batch), inside
``single_blas_thread`` as a parse does; the table gives the median milliseconds of a decode
over all repeats (a median, not a mean: a shared machine's bursts of load then count less).
``--against`` names another version's ``crf_decode.py`` (e.g. ``git show
main:nlu_engine/classifiers/diet/crf_decode.py > /tmp/old.py``), loaded beside this
checkout's: each batch is decoded by both in turn (A B, then B A in the next repeat), so that
both meet the same load on a shared machine; the two must give the same tags, and
confidences within 1e-6.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path
from types import ModuleType

import numpy as np

from nlu_engine.classifiers.diet import crf_decode
from nlu_engine.contract.threads import single_blas_thread
from nlu_engine.evaluation.benchmarking import cpu_model
from nlu_engine.training_data.bilou import bilou_constraints

#: messages decoded by each version in each repeat, whatever the batch size
_MESSAGES = 256


def load_version(path: str) -> ModuleType:
    """Another version's ``crf_decode.py`` as a module of its own (it imports only NumPy)."""
    spec = importlib.util.spec_from_file_location("crf_decode_against", path)
    if spec is None or spec.loader is None or not Path(path).is_file():
        raise SystemExit(f"--against {path}: not a Python file; give a crf_decode.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gold_path(types: int, length: int, rng: np.random.Generator) -> list[int]:
    """A valid BILOU path of ``length`` tags (vocabulary: O, then B, I, L, U of each type)."""
    tags: list[int] = []
    while len(tags) < length:
        span = int(rng.integers(1, 4))
        if rng.random() < 2 / 3 or not types or len(tags) + span > length:
            tags.append(0)
            continue
        first = 1 + 4 * int(rng.integers(types))  # its B-x
        tags += [first + 3] if span == 1 else [first] + [first + 1] * (span - 2) + [first + 2]
    return tags


def batches(args: argparse.Namespace, rows: int, rng: np.random.Generator) -> list[tuple]:
    """(logits [rows, T, K] float32, lengths [rows]) for ``_MESSAGES`` messages in all."""
    k = 1 + 4 * args.types
    out = []
    for _ in range(max(1, _MESSAGES // rows)):
        low, high = max(1, args.length // 2), args.length * 3 // 2
        lengths = np.full(rows, args.length) if rows == 1 else rng.integers(low, high + 1, rows)
        if args.logits == "random":
            logits = rng.normal(scale=4.0, size=(rows, lengths.max(), k))
        else:
            logits = rng.normal(size=(rows, lengths.max(), k))
            for row, n in enumerate(lengths):
                logits[row, np.arange(n), gold_path(args.types, n, rng)] += 8.0
        out.append((logits.astype(np.float32), lengths))
    return out


def time_decodes(decoders: dict[str, object], work: list[tuple], marginals: bool,
                 turn: int, times: dict[str, list[float]]) -> None:
    """Each batch of ``work`` decoded by every decoder in turn (the first one changes with
    ``turn``), each decode's milliseconds appended to ``times[name]``."""
    names = list(decoders)
    names = names[turn % len(names):] + names[:turn % len(names)]
    for logits, lengths in work:
        for name in names:
            start = time.perf_counter()
            decoders[name].decode(logits, lengths, marginals)  # type: ignore[attr-defined]
            times[name].append((time.perf_counter() - start) * 1000)


def measure(args: argparse.Namespace, versions: dict[str, ModuleType]) -> dict[tuple, dict]:
    """Median ms of a decode, per (rows, marginals) and version."""
    k = 1 + 4 * args.types
    rng = np.random.default_rng(0)
    scale = 2.0 if args.logits == "random" else 0.5
    transitions = rng.normal(scale=scale, size=(k, k)).astype(np.float32)
    constraints = bilou_constraints(["O"] + [f"{p}-e{i}" for i in range(args.types) for p in "BILU"])
    decoders = {name: module.CRFDecoder(transitions, constraints) for name, module in versions.items()}
    results: dict[tuple, dict] = {}
    for rows in args.rows:
        work = batches(args, rows, rng)
        for logits, lengths in work[:4]:  # the versions agree
            (tags, confidences), *others = [d.decode(logits, lengths) for d in decoders.values()]
            if any(not np.array_equal(tags, t) or np.abs(confidences - c).max() > 1e-6 for t, c in others):
                raise SystemExit(f"the versions decode {rows} rows differently")
        for marginals in (False, True):
            times: dict[str, list[float]] = {name: [] for name in decoders}
            time_decodes(decoders, work[:2], marginals, 0, {name: [] for name in decoders})  # warm
            for turn in range(args.repeats):
                time_decodes(decoders, work, marginals, turn, times)
            results[rows, marginals] = {name: statistics.median(t) for name, t in times.items()}
    return results


def _rows(text: str) -> list[int]:
    """``--rows``: comma-separated batch sizes, each at least 1."""
    try:
        rows = [int(r) for r in text.split(",")]
    except ValueError:
        rows = []
    if not rows or min(rows) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give batch sizes like 1,4,32,256")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", type=int, default=39, help="entity types (K = 1 + 4 x types)")
    parser.add_argument("--length", type=int, default=12, help="tokens of a message")
    parser.add_argument("--rows", type=_rows, default=[1, 4, 32, 256], help="batch sizes, comma-separated")
    parser.add_argument("--logits", choices=("trained", "random"), default="trained")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--against", default=None, metavar="FILE",
                        help="another version's crf_decode.py, timed alternately with this one")
    args = parser.parse_args()
    if args.types < 1 or args.length < 1 or args.repeats < 1:
        parser.error("--types, --length and --repeats must be at least 1")
    versions = {"this checkout": crf_decode}
    if args.against:
        versions = {Path(args.against).name: load_version(args.against), **versions}
    with single_blas_thread():
        results = measure(args, versions)
    print(f"CPU: {cpu_model()}; K = {1 + 4 * args.types} tags (BILOU), {args.logits} logits, "
          f"length {args.length}; the median decode of {args.repeats} repeats of {_MESSAGES} messages")
    names = list(versions)
    ratio = " | ratio" if len(names) == 2 else ""
    print(f"| rows | marginals | {' | '.join(f'{n} (ms)' for n in names)}{ratio} |")
    print("|---" * (2 + len(names) + bool(ratio)) + "|")
    for (rows, marginals), ms in results.items():
        cells = " | ".join(f"{ms[n]:.3f}" for n in names)
        extra = f" | {ms[names[1]] / ms[names[0]]:.2f}" if ratio else ""
        print(f"| {rows} | {'yes' if marginals else 'no'} | {cells}{extra} |")


if __name__ == "__main__":
    main()
