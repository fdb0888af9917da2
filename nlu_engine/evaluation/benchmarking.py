"""``nlu-engine benchmark``: train and score a training config, with time, memory and latency.

A training config (``training_configs/*.yml``) names a pipeline (a file, or a shipped pipeline
such as ``pipelines/diet.yml``), train and test data (paths relative to the project root;
``{fold}`` is replaced by each of ``folds``) and parameter overrides. Training runs as a
separate ``nlu-engine train`` process, so its wall time and peak memory are those of the whole
command a user runs.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from nlu_engine.assembly.config import find_config
from nlu_engine.contract.errors import ConfigError, yaml_problem

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TrainingConfig:
    name: str
    pipeline: Path | Traversable
    train: str
    test: str
    folds: list[int | str] = field(default_factory=lambda: [""])
    overrides: list[str] = field(default_factory=list)

    def paths(self, fold: int | str) -> tuple[Path, Path]:
        return (
            _resolve(self.train.replace("{fold}", str(fold))),
            _resolve(self.test.replace("{fold}", str(fold))),
        )


def _resolve(path: str) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() else (PROJECT_ROOT / candidate).resolve()


def read_training_config(path: Path) -> TrainingConfig:
    if not path.is_file():
        raise ConfigError(f"training config '{path}' not found")
    try:
        content = path.read_text(encoding="utf-8")
        raw = yaml.safe_load(content) or {}
    except yaml.YAMLError as error:
        line, problem = yaml_problem(error, content)
        raise ConfigError(f"{path}{line}: invalid YAML ({problem}); fix the syntax") from None
    allowed = {"name", "pipeline", "train", "test", "folds", "set"}
    unknown = set(raw) - allowed
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    for key in ("pipeline", "train", "test"):
        if not isinstance(raw.get(key), str):
            raise ConfigError(f"{path}: '{key}' must name a file")
    overrides = raw.get("set") or []
    if isinstance(overrides, dict):
        overrides = [f"{k}={json.dumps(v)}" for k, v in overrides.items()]
    pipeline = _resolve(raw["pipeline"])
    return TrainingConfig(
        name=str(raw.get("name") or path.stem),
        pipeline=pipeline if pipeline.is_file() else find_config(raw["pipeline"]),
        train=raw["train"],
        test=raw["test"],
        folds=list(raw.get("folds") or [""]),
        overrides=[str(o) for o in overrides],
    )


def cpu_model() -> str:
    """The CPU's model name and its widest vector extensions (figures differ a lot between them)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                 if line.startswith("model name")), platform.machine())
    flags = next((set(line.split(":", 1)[1].split()) for line in info.splitlines()
                  if line.startswith("flags")), set())
    vector = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{name} ({', '.join(vector) or 'no AVX2'})"


def _train_subprocess(
    config: TrainingConfig, train_path: Path, out: Path, extra: list[str]
) -> tuple[Path, float, float]:
    """Run ``nlu-engine train``; returns the archive, wall seconds and peak RSS in MB."""
    command = [
        sys.executable, "-m", "nlu_engine", "train", "--config", str(config.pipeline),
        "--data", str(train_path), "--out", str(out), "--fixed-model-name", "model",
    ]
    for override in [*config.overrides, *extra]:
        command += ["--set", override]
    start = time.perf_counter()
    process = subprocess.Popen(command, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise ConfigError(f"training failed for {config.name} ({' '.join(command)})")
    return out / "model.tar.gz", seconds, usage.ru_maxrss / 1024


def _latencies(model: Any, texts: list[str]) -> dict[str, float]:
    single = []
    for text in texts[:300]:
        start = time.perf_counter()
        model.parse(text)
        single.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    model.parse_batch(texts)
    batched = (time.perf_counter() - start) * 1000 / max(len(texts), 1)
    ordered = sorted(single)
    return {
        "parse_p50_ms": round(statistics.median(ordered), 2),
        "parse_p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "batched_ms_per_message": round(batched, 3),
    }


def benchmark_fold(
    config: TrainingConfig, fold: int | str, extra: list[str], keep_models: Path | None = None
) -> dict[str, Any]:
    from nlu_engine.assembly.model import Model
    from nlu_engine.evaluation import evaluate
    from nlu_engine.training_data import load_data

    train_path, test_path = config.paths(fold)
    with tempfile.TemporaryDirectory(prefix="nlu-bench-") as tmp:
        archive, wall, peak_mb = _train_subprocess(config, train_path, Path(tmp), extra)
        size_mb = archive.stat().st_size / 1e6
        model = Model.load(archive)
        if keep_models is not None:  # e.g. for the server benchmark
            keep_models.mkdir(parents=True, exist_ok=True)
            shutil.copy(archive, keep_models / f"{config.name}{fold}.tar.gz")
    test = load_data(test_path)
    texts = [m.text for m in test.messages]
    predictions = model.parse_batch(texts)
    scores = headline_scores(evaluate(test.messages, predictions).summary())
    epochs, per_epoch = _epoch_times(model)
    row = {
        "benchmark": config.name,
        "fold": fold,
        "pipeline": config.pipeline.name,
        "overrides": [*config.overrides, *extra],
        "train_examples": int(model.manifest.get("num_examples", 0)),
        "test_examples": len(texts),
        "epochs": epochs,
        "train_wall_s": round(wall, 1),
        "s_per_epoch": per_epoch,
        "peak_memory_mb": round(peak_mb),
        "archive_mb": round(size_mb, 2),
        **{k: round(v, 4) for k, v in scores.items()},
        **_latencies(model, texts),
    }
    return row


def headline_scores(summary: dict[str, Any]) -> dict[str, float]:
    """Intent accuracy and macro F1; entity exact and overlap micro F1 of the first extractor
    (DIETClassifier when present)."""
    scores: dict[str, float] = {}
    if summary.get("intent"):
        scores["intent_accuracy"] = summary["intent"]["accuracy"]
        scores["intent_macro_f1"] = summary["intent"]["macro_f1"]
    if summary.get("confidence"):
        scores["intent_ece"] = summary["confidence"]["ece"]
        scores["intent_ece_floor"] = summary["confidence"].get("ece_floor")
    entities = summary.get("entities") or {}
    name = "DIETClassifier" if "DIETClassifier" in entities else next(iter(sorted(entities)), None)
    if name:
        scores["entity_exact_f1"] = entities[name]["exact_f1"]
        scores["entity_overlap_f1"] = entities[name]["overlap_f1"]
    return scores


def training_history(pipeline: Any) -> dict[str, Any] | None:
    """The per-epoch history of the first trained component that keeps one (DIET's), or None."""
    for component in pipeline.components:
        history = getattr(component, "history_", None)
        if history and history.get("epochs"):
            return history  # type: ignore[no-any-return]
    return None


def _epoch_times(model: Any) -> tuple[int, float | None]:
    history = training_history(model.pipeline)
    if history is None:
        return 0, None
    seconds = [e["seconds"] for e in history["epochs"] if "seconds" in e]
    return len(history["epochs"]), round(statistics.median(seconds), 2) if seconds else None


COLUMNS = [
    ("benchmark", "data set"), ("fold", "fold"), ("pipeline", "pipeline"), ("epochs", "epochs"),
    ("train_wall_s", "train s"), ("s_per_epoch", "s/epoch"), ("peak_memory_mb", "peak MB"),
    ("archive_mb", "archive MB"), ("intent_accuracy", "intent acc"),
    ("intent_macro_f1", "intent macro F1"), ("intent_ece", "intent ECE"),
    ("intent_ece_floor", "ECE if calibrated"),
    ("entity_exact_f1", "entity exact F1"), ("entity_overlap_f1", "entity overlap F1"),
    ("parse_p50_ms", "parse p50 ms"), ("parse_p95_ms", "parse p95 ms"),
    ("batched_ms_per_message", "batched ms/msg"),
]


def markdown_rows(rows: list[dict[str, Any]], header: bool = True) -> str:
    lines = []
    if header:
        lines.append("| " + " | ".join(title for _, title in COLUMNS) + " |")
        lines.append("|" + "---|" * len(COLUMNS))
    for row in rows:
        cells = []
        for key, _ in COLUMNS:
            value = row.get(key, "")
            if key.endswith(("accuracy", "_f1")) and isinstance(value, float):
                value = f"{100 * value:.2f}"
            cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and standard deviation of the scores over folds."""
    summary: dict[str, Any] = {"folds": len(rows)}
    for key in ("intent_accuracy", "intent_macro_f1", "intent_ece", "entity_exact_f1",
                "entity_overlap_f1", "train_wall_s", "s_per_epoch", "peak_memory_mb"):
        values = [r[key] for r in rows if isinstance(r.get(key), int | float)]
        if values:
            summary[key] = {
                "mean": round(statistics.mean(values), 4),
                "std": round(statistics.pstdev(values), 4),
                "median": round(statistics.median(values), 4),
            }
    return summary


def run(
    config_path: Path, out: Path, folds: list[str] | None, extra: list[str], keep_models: bool = False
) -> list[dict[str, Any]]:
    config = read_training_config(config_path)
    selected = [f for f in config.folds if folds is None or str(f) in folds]
    rows = []
    out.mkdir(parents=True, exist_ok=True)
    machine = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d"),
    }
    for fold in selected:
        row = benchmark_fold(config, fold, extra, out / "models" if keep_models else None)
        rows.append(row)
        print(markdown_rows([row], header=len(rows) == 1), flush=True)
    result = {"config": str(config_path), "machine": machine, "rows": rows, "summary": summarize(rows)}
    stem = config.name + ("" if folds is None else "-" + "-".join(folds))
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2))
    (out / f"{stem}.md").write_text(markdown_rows(rows) + "\n")
    if len(rows) > 1:
        print(json.dumps(result["summary"], indent=2))
    return rows
