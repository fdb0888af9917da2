"""Every shipped pipeline (nlu_engine/pipelines/*.yml), trained tiny, with every array of every
``.npz`` of its archive mutated one at a time: NaN, infinities, another dtype kind, a wider dtype,
zero rows, one more column, a dropped array, a huge dimension and truncated files.

Each mutant is loaded and parsed in a process of its own (forked from a runner that has imported
the engine, so a crash or a signal ends only that mutant): it must give a one-line error naming
the file or the component and what to do, or parse as the original does with finite
confidences. A crash, a signal, a hang or a native library writing to stderr fails the test.
Slow (minutes per pipeline): ``make test-slow``; the count is in BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import TINY_NLU

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = sorted((ROOT / "nlu_engine" / "pipelines").glob("*.yml"))
KINDS = ["nan", "inf", "-inf", "other kind", "wider", "zero rows", "one more column", "dropped",
         "huge dimension", "truncated"]
MUTANT_SECONDS = 120  # a load and parse of a tiny model takes a second or two
EXTRAS = {"crf": ("crf", "pycrfsuite"), "diet_bert": ("lm", "tokenizers"),
          "diet_bert_finetuned": ("lm", "tokenizers"), "diet_spacy": ("spacy", "spacy"),
          "diet_zh": ("zh", "jieba")}


def tiny_config(pipeline: Path) -> dict[str, Any]:
    """The shipped pipeline with its neural networks trained for 2 epochs."""
    config = yaml.safe_load(pipeline.read_text(encoding="utf-8"))
    for step in config["pipeline"]:
        if step["name"] in ("DIETClassifier", "ResponseSelector"):
            step["epochs"] = 2
    return config


def marks(pipeline: Path) -> list[pytest.MarkDecorator]:
    from tests.extras import requires_extra

    found = [pytest.mark.slow]
    if pipeline.stem in EXTRAS:
        found.append(requires_extra(*EXTRAS[pipeline.stem]))
    if pipeline.stem == "diet_spacy":
        from tests.spacy_models import needs_md

        found.append(needs_md)
    return found


@pytest.mark.parametrize("pipeline", [pytest.param(p, id=p.stem, marks=marks(p)) for p in PIPELINES])
def test_every_array_of_every_shipped_pipeline_mutated(pipeline: Path, tmp_path: Path) -> None:
    from nlu_engine.assembly.model import train

    data = tmp_path / "nlu.yml"
    data.write_text(TINY_NLU, encoding="utf-8")
    archive = train(tiny_config(pipeline), data, out=tmp_path, fixed_model_name="tiny", log=None)
    report = tmp_path / "report.jsonl"
    code = ("from tests.assembly.test_hostile_pipelines import run_mutants; "
            f"run_mutants({str(archive)!r}, {str(report)!r})")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            timeout=6 * 3600, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    failures = [f"{r['member']} ({r['what']}): {r['problem']}" for r in rows if r["problem"]]
    print(f"{pipeline.stem}: {len(rows)} mutants, {sum(r['refused'] for r in rows)} refused, "
          f"{sum(not r['refused'] and not r['problem'] for r in rows)} parsed as before, "
          f"{len(failures)} failed")
    assert len(rows) >= 3
    assert not failures, f"{len(failures)} of {len(rows)} mutants:\n" + "\n".join(failures[:50])


# --- the runner (a subprocess of the test) ----------------------------------------------------------
def run_mutants(archive: str, report: str) -> None:
    """Mutate every array of ``archive``; load and parse each mutant in a forked child; one JSON
    line per mutant in ``report``."""
    import numpy  # noqa: F401  (imported before forking, as the children need them)

    from nlu_engine.assembly.model import Model
    from tests.assembly.test_hostile_weights import mutants, read_archive, write_archive
    from tests.conftest import TINY_TEXTS

    original = [r["intent"]["name"] for r in Model.load(archive).parse_batch(TINY_TEXTS)]
    members = read_archive(Path(archive))
    folder = Path(tempfile.mkdtemp(prefix="mutants-"))
    with open(report, "w", encoding="utf-8") as out:
        for kind in KINDS:
            for member, what, replace in mutants(members, kind):
                path = write_archive(members, folder / "mutant.tar.gz", replace)
                row = {"member": member, "what": what, **_in_child(path, member, original)}
                out.write(json.dumps(row) + "\n")
                out.flush()
                path.unlink()


def _in_child(path: Path, member: str, original: list[str]) -> dict[str, Any]:
    """Load and parse ``path`` in a forked child: {"refused": bool, "problem": str | None}."""
    result_file, stderr_file = path.with_suffix(".result"), path.with_suffix(".stderr")
    pid = os.fork()
    if pid == 0:  # the child: its stderr to a file, its verdict to another, then exit at once
        try:
            fd = os.open(stderr_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 2)
            verdict = _verdict(path, member, original)
            result_file.write_text(json.dumps(verdict), encoding="utf-8")
        finally:
            os._exit(0)
    deadline = time.monotonic() + MUTANT_SECONDS
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"refused": False, "problem": f"hung for over {MUTANT_SECONDS} s"}
        time.sleep(0.02)
    stderr = stderr_file.read_text(encoding="utf-8", errors="replace") if stderr_file.exists() else ""
    if os.WIFSIGNALED(status):
        return {"refused": False, "problem": f"killed by signal {os.WTERMSIG(status)}: {stderr[-300:]}"}
    if not result_file.exists():
        return {"refused": False, "problem": f"the child died without a verdict: {stderr[-300:]}"}
    verdict = json.loads(result_file.read_text(encoding="utf-8"))
    result_file.unlink()
    noise = [line for line in stderr.splitlines() if line.strip() and "notice:" not in line]
    if noise and not verdict["problem"]:
        verdict["problem"] = f"wrote to stderr: {noise[0][:300]}"
    return verdict


def _verdict(path: Path, member: str, original: list[str]) -> dict[str, Any]:
    import math

    from nlu_engine.assembly.model import Model
    from nlu_engine.contract.errors import NLUError
    from tests.conftest import TINY_TEXTS

    file, folder = member.rsplit("/", 1)[-1], member.split("/")[-2] if "/" in member else ""
    component = folder.split("_", 1)[-1]
    try:
        model = Model.load(path)
    except NLUError as error:
        message = str(error)
        named = file in message or component in message
        if "\n" in message or len(message) > 600 or not named or "retrain" not in message:
            return {"refused": True, "problem": f"refused, but not in one line naming {file} or "
                                                f"{component} and what to do: {message!r}"}
        return {"refused": True, "problem": None}
    except BaseException as error:  # the point of the test
        return {"refused": False, "problem": f"load raised {type(error).__name__}: {str(error)[:300]}"}
    try:
        results = model.parse_batch(TINY_TEXTS)
    except BaseException as error:
        return {"refused": False, "problem": f"parse raised {type(error).__name__}: {str(error)[:300]}"}
    intents = [r["intent"]["name"] for r in results]
    if intents != original:
        return {"refused": False, "problem": f"parsed {intents}, not {original}"}
    confidences = [r["intent"]["confidence"] for r in results]
    confidences += [c["confidence"] for r in results for c in r.get("intent_ranking", [])]
    if not all(math.isfinite(c) for c in confidences):
        return {"refused": False, "problem": "parsed with a non-finite confidence"}
    return {"refused": False, "problem": None}
