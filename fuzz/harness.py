"""What the targets share: the seed corpus folder, the one-line check and the libFuzzer run."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
RESULTS = ROOT / "results" / "fuzz"
#: the largest input the fuzzer makes (bytes): the readers' costs grow with it, not their paths
MAX_LEN = 4096


def assert_one_line(message: str, source: str) -> None:
    """An ``NLUError`` as the user sees it: one line naming what was read."""
    if "\n" in message or "\r" in message or source not in message:
        raise AssertionError(f"not a one-line error naming {source!r}: {message!r}")


def slices(text: str, lines: int = 40, count: int = 6) -> list[str]:
    """``count`` pieces of ``lines`` lines from across ``text`` (seeds stay small)."""
    all_lines = text.splitlines(keepends=True)
    step = max(1, len(all_lines) // count)
    return ["".join(all_lines[i:i + lines]) for i in range(0, len(all_lines), step)][:count]


def dataset_files(pattern: str) -> list[Path]:
    return sorted(DATASETS.glob(pattern)) if DATASETS.is_dir() else []


def write_seeds(folder: Path, seeds: Iterable[bytes], max_len: int) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for count, seed in enumerate(seeds, start=1):
        (folder / f"seed-{count:04d}").write_bytes(seed[:max_len])
    return count


def fuzz(name: str, test_one_input: Callable[[bytes], None], seeds: Callable[[], Iterable[bytes]],
         seconds: int, max_len: int = MAX_LEN) -> None:
    """Run ``test_one_input`` under libFuzzer for ``seconds`` from the seeds (kept between runs)."""
    import atheris

    logging.disable(logging.WARNING)  # the readers' warnings, one a run, would be all the output
    corpus = RESULTS / name / "corpus"
    print(f"fuzz {name}: {write_seeds(corpus, seeds(), max_len)} seeds in {corpus}", flush=True)
    argv = [sys.argv[0], str(corpus), f"-max_total_time={seconds}", f"-max_len={max_len}",
            "-timeout=20", "-rss_limit_mb=3072", "-print_final_stats=1",
            f"-artifact_prefix={RESULTS / name}/"]
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
