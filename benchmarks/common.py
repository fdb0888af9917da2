"""What the benchmark scripts share: where the project, the shared data sets and Rasa's reference
install are, and a median timing of repeated steps."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

#: the project root (scripts run from it: ``python -m benchmarks.<folder>.<name>``)
ROOT = Path(__file__).resolve().parents[1]
#: the data sets shared between projects (SNIPS, NLU-Evaluation-Data, ...), beside the project
DATASETS = ROOT.parent / "shared" / "datasets"
SNIPS = DATASETS / "SNIPS"
NLU_EVAL = DATASETS / "NLU-Evaluation-Data"
#: the default pipeline the scripts train when given none
DIET_CONFIG = ROOT / "nlu_engine" / "pipelines" / "diet.yml"
#: where the scripts write their JSON by default
RESULTS = ROOT / "benchmark_results"
#: Rasa 3.6 in its own venv: ``rasa-reference setup`` makes it, ``train`` and ``parse`` use it
RASA_REFERENCE = ROOT.parent / "shared" / "tools" / "rasa-reference"
#: the venv ``rasa-reference setup`` makes, by its rule: ``$RASA_VENV``, else ``${TMPDIR:-/tmp}/rasa-ref``
RASA_VENV = Path(os.environ.get("RASA_VENV") or Path(os.environ.get("TMPDIR") or "/tmp") / "rasa-ref")


def median_ms(step: Callable[[], object], runs: int) -> float:
    """Median milliseconds of ``runs`` calls of ``step``, after one untimed warm-up call (tracing).
    ``step`` returns only when its work is done (a TensorFlow step calls ``.numpy()``)."""
    step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def emit_json(result: dict, path: str | Path | None) -> None:
    """Print ``result`` as indented JSON, and write it to ``path`` too when one is given."""
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        Path(path).write_text(text + "\n", encoding="utf-8")
