"""Closing the loop: fine-tune on the reviewed data, then show what the new model fixes and breaks.

:func:`compare` parses the reviewed messages (their decided intents are the truth) and a test set
with the old and the new model: each set's accuracy for both, and the messages the new model
fixes (the old one was wrong) and breaks (the old one was right). ``nlu-engine review compare``
prints it; the page's Train button runs :class:`Trainer`, which is ``nlu-engine train
--finetune`` then ``review compare`` as child processes (the page's server stays light and a
failed training is a line in the page, not a dead server).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: examples of each fixed / broken list kept in a report
SHOWN = 50


def resolve_model(model: str | Path) -> Path:
    """An archive, or a folder's newest archive now (a fine-tune will add a newer one there)."""
    from nlu_engine.assembly.persistence import newest_archive

    path = Path(model)
    return newest_archive(path) if path.is_dir() else path


def intents_of(model: Any, texts: Sequence[str]) -> list[str | None]:
    return [(result.get("intent") or {}).get("name") for result in model.parse_batch(list(texts))]


def compare_sets(old: Any, new: Any, sets: dict[str, list[tuple[str, str]]]) -> dict[str, Any]:
    """For each named set of ``(text, intent)``: both models' accuracy, and what the new model
    fixes and breaks."""
    report: dict[str, Any] = {}
    for name, examples in sets.items():
        texts = [text for text, _ in examples]
        before, after = intents_of(old, texts), intents_of(new, texts)
        fixed, broken = [], []
        for (text, truth), was, now in zip(examples, before, after, strict=True):
            if was != truth and now == truth:
                fixed.append({"text": text, "intent": truth, "old": was, "new": now})
            elif was == truth and now != truth:
                broken.append({"text": text, "intent": truth, "old": was, "new": now})
        count = max(1, len(examples))
        report[name] = {
            "examples": len(examples),
            "old_accuracy": round(sum(p == t for p, (_, t) in zip(before, examples, strict=True)) / count, 4),
            "new_accuracy": round(sum(p == t for p, (_, t) in zip(after, examples, strict=True)) / count, 4),
            "fixed": len(fixed), "broken": len(broken),
            "fixed_examples": fixed[:SHOWN], "broken_examples": broken[:SHOWN],
        }
    return report


def reviewed_examples(db: str) -> list[tuple[str, str]]:
    """The labelled decisions of the review database as ``(text, intent)``."""
    from nlu_engine.review.decisions import open_review

    store = open_review(db)
    try:
        latest = {d["text"]: d["intent"] for d in store.labelled() if d["intent"]}
    finally:
        store.close()
    return list(latest.items())


def labelled_examples(paths: Sequence[str]) -> list[tuple[str, str]]:
    from nlu_engine.training_data import load_data

    data = load_data(list(paths))
    return [(m.text, m.intent_response_key or m.intent) for m in data.messages if m.intent]


def compare(old: str, new: str, db: str | None, test: Sequence[str] = ()) -> dict[str, Any]:
    """The report of ``review compare`` (the models loaded here)."""
    from nlu_engine.assembly.model import Model

    sets: dict[str, list[tuple[str, str]]] = {}
    if db is not None:
        sets["reviewed"] = reviewed_examples(db)
    if test:
        sets["test"] = labelled_examples(test)
    old_model, new_model = Model.load(resolve_model(old)), Model.load(resolve_model(new))
    return {"old": str(old_model.path), "new": str(new_model.path),
            **compare_sets(old_model, new_model, sets)}


def format_report(report: dict[str, Any]) -> str:
    lines = [f"old: {report['old']}", f"new: {report['new']}"]
    for name in ("reviewed", "test"):
        part = report.get(name)
        if part is None:
            continue
        lines.append(f"{name} messages: {part['examples']}: accuracy {part['old_accuracy']:.2%} -> "
                     f"{part['new_accuracy']:.2%}; the new model fixes {part['fixed']} and breaks "
                     f"{part['broken']}")
        for label, key in (("fixes", "fixed_examples"), ("breaks", "broken_examples")):
            for example in part[key][:10]:
                lines.append(f"  {label}: {json.dumps(example['text'], ensure_ascii=True)[:120]} "
                             f"({example['intent']}; old {example['old']}, new {example['new']})")
    return "\n".join(lines)


class Trainer:
    """The page's Train button: fine-tune ``model`` on ``data`` and the reviewed file, then compare,
    in child processes; one run at a time, its state for the page."""

    def __init__(self, model: str, data: Path, reviewed: Path, db: str, test: Sequence[str] = ()) -> None:
        self.model, self.data, self.reviewed, self.db, self.test = model, data, reviewed, db, list(test)
        self.lock = threading.Lock()
        self.state: dict[str, Any] = {"state": "idle"}

    def commands(self, base: Path, name: str, report: str) -> list[list[str]]:
        cli = [sys.executable, "-m", "nlu_engine.cli.main"]
        data = ["--data", str(self.data)]
        if not self.data.is_dir():  # the reviewed file sits beside it: name it too
            data += ["--data", str(self.reviewed)]
        out = base.parent
        train = [*cli, "train", "--finetune", str(base), *data, "--out", str(out), "--fixed-model-name", name]
        tests = [arg for path in self.test for arg in ("--test", path)]
        compare_command = [*cli, "review", "compare", "--old", str(base), "--new",
                           str(out / f"{name}.tar.gz"), "--db", self.db, *tests, "--json", report]
        return [train, compare_command]

    def start(self) -> None:
        with self.lock:
            if self.state["state"] == "running":
                return
            if not self.reviewed.is_file():
                self.state = {"state": "failed", "log": "nothing reviewed yet: label some messages first"}
                return
            self.state = {"state": "running", "started": time.time(), "log": ""}
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        base = resolve_model(self.model)
        name = f"reviewed-{time.strftime('%Y%m%d-%H%M%S')}"
        with tempfile.TemporaryDirectory() as folder:
            report = str(Path(folder) / "report.json")
            for command in self.commands(base, name, report):
                completed = subprocess.run(command, capture_output=True, text=True, check=False,
                                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
                log = (completed.stdout + completed.stderr).strip().splitlines()[-20:]
                with self.lock:
                    self.state["log"] = "\n".join(log)
                if completed.returncode != 0:
                    with self.lock:
                        self.state["state"] = "failed"
                    return
            comparison = json.loads(Path(report).read_text(encoding="utf-8"))
        with self.lock:
            self.state.update(state="done", model=str(base.parent / f"{name}.tar.gz"),
                              comparison=comparison, finished=time.time())

    def status(self) -> dict[str, Any]:
        with self.lock:
            return dict(self.state)
