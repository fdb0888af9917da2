"""Issue 32's loader check: Rasa's own test fixtures read by Rasa 3.6's loader and by ours.

    .venv/bin/python -m benchmarks.rasa.rasa_loader_parity FIXTURES [--out parity.json]

FIXTURES is a folder of Rasa's NLU test data (``data/test`` of Rasa's repository, which its
PyPI package does not ship; fetch it yourself). Every file in it, and every folder of several
data files (``multiple_files_json``, ``duplicate_intents_yaml``, ...), is read by
``rasa.shared.nlu.training_data.loading.load_data`` in the reference's venv
(``../shared/tools/rasa-reference setup``; ``RASA_VENV`` to point elsewhere) and by our
``load_data``. Both sides report the same counts: examples, intents, entity annotations,
synonyms, regex patterns, lookup tables and responses. A path one side refuses or reads as empty
is reported as such. It prints one row per path and a summary: how many paths agree, differ, are
refused by us while Rasa reads them, and the other way round. An entity annotation whose
offsets do not fit its text is kept by Rasa's loader (its training ignores it) and dropped by
ours with a warning: a path that differs only by those is its own verdict.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import RASA_VENV
from nlu_engine.contract.errors import NLUError
from nlu_engine.training_data import load_data

COUNTS = ("examples", "intents", "entities", "synonyms", "regex", "lookups", "responses")
DATA_SUFFIXES = {".md", ".json", ".yml", ".yaml"}
RASA_COUNTS = r"""
import json, logging, sys, warnings
logging.disable(logging.CRITICAL)
warnings.filterwarnings("ignore")
from rasa.shared.nlu.training_data.loading import load_data
for path in sys.argv[1:]:
    try:
        td = load_data(path)
        row = {
            "examples": len(td.training_examples),
            "intents": len(td.intents),
            "entities": sum(len(m.get("entities") or []) for m in td.training_examples),
            "synonyms": len(td.entity_synonyms),
            "regex": len(td.regex_features),
            "lookups": len(td.lookup_tables),
            "responses": len(td.responses),
        }
    except BaseException as error:  # noqa: BLE001 - the reference's failure is the measurement
        row = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"}
    print(json.dumps({"path": path, **row}), flush=True)
"""


def targets(fixtures: Path) -> list[Path]:
    """Every data file, and every folder holding two or more of them, under ``fixtures``."""
    files = sorted(p for p in fixtures.rglob("*") if p.is_file() and p.suffix in DATA_SUFFIXES)
    folders = sorted({p.parent for p in files if p.parent != fixtures
                      and sum(q.parent == p.parent for q in files) >= 2})
    return [*files, *folders]


def ours(path: Path) -> dict[str, Any]:
    try:
        data = load_data(path)
    except (NLUError, OSError, ValueError) as error:
        return {"error": str(error).splitlines()[0][:160]}
    return {
        "examples": len(data.messages),
        "intents": len({m.intent for m in data.messages if m.intent}),
        "entities": sum(len(m.entities) for m in data.messages),
        "synonyms": len(data.synonyms),
        "regex": len(data.regex_features),
        "lookups": len(data.lookup_tables),
        "responses": len(data.responses),
        "warnings": len(data.load_warnings),
    }


def rasa(paths: list[Path]) -> dict[str, dict[str, Any]]:
    python = RASA_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no Rasa venv at {RASA_VENV}: run ../shared/tools/rasa-reference setup")
    done = subprocess.run([str(python), "-c", RASA_COUNTS, *map(str, paths)], capture_output=True,
                          text=True, env={**os.environ, "RASA_TELEMETRY_ENABLED": "false"})
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(rows) != len(paths):
        raise SystemExit(f"the reference answered for {len(rows)} of {len(paths)} paths:\n"
                         f"{done.stderr[-2000:]}")
    return {row.pop("path"): row for row in rows}


def verdict(theirs: dict[str, Any], mine: dict[str, Any]) -> str:
    rasa_empty = "error" in theirs or not any(theirs.get(k) for k in COUNTS)
    if rasa_empty:
        return "Rasa reads nothing" if "error" not in mine and any(mine.get(k) for k in COUNTS) else "neither"
    if "error" in mine:
        return "refused by us"
    if all(theirs[k] == mine[k] for k in COUNTS):
        return "same"
    others_equal = all(theirs[k] == mine[k] for k in COUNTS if k != "entities")
    if others_equal and 0 < theirs["entities"] - mine["entities"] <= mine["warnings"]:
        return "same but bad annotations dropped, with a warning each"  # issue 32's rule
    return "differ"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fixtures", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    paths = targets(args.fixtures)
    reference = rasa(paths)
    rows = []
    for path in paths:
        theirs, mine = reference[str(path)], ours(path)
        rows.append({"path": str(path.relative_to(args.fixtures)) + ("/" if path.is_dir() else ""),
                     "rasa": theirs, "ours": mine, "verdict": verdict(theirs, mine)})
    print("| path | Rasa 3.6 (" + " / ".join(COUNTS) + ") | ours | verdict |")
    print("|---|---|---|---|")
    for row in rows:
        cells = [row["rasa"].get("error") or " / ".join(str(row["rasa"][k]) for k in COUNTS),
                 row["ours"].get("error") or " / ".join(str(row["ours"][k]) for k in COUNTS)]
        print(f"| {row['path']} | {cells[0]} | {cells[1]} | {row['verdict']} |")
    summary = {v: sum(r["verdict"] == v for r in rows) for v in sorted({r["verdict"] for r in rows})}
    print("summary:", ", ".join(f"{k}: {n}" for k, n in summary.items()), f"(of {len(rows)} paths)")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1), encoding="utf-8")
    sys.exit(0)


if __name__ == "__main__":
    main()
