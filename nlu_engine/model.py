"""Train a pipeline into an archive, and load an archive to parse messages."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from nlu_engine.component import FinetuneOptions
from nlu_engine.config import PipelineConfig, load_config
from nlu_engine.errors import ArchiveError, ConfigError
from nlu_engine.finetune import fingerprints
from nlu_engine.pipeline import Pipeline, _stderr
from nlu_engine.training_data.training_data import TrainingData


def train(
    config: str | Path | dict[str, Any] | PipelineConfig | None,
    data: str | Path | list[str | Path] | TrainingData,
    out: str | Path = "models",
    fixed_model_name: str | None = None,
    overrides: list[str] | None = None,
    log: Callable[[str], None] | None = _stderr,
    finetune: str | Path | bool | None = None,
    finetune_options: FinetuneOptions | None = None,
    allow_components: Iterable[str] | None = None,
) -> Path:
    """Validate the config, read the data, train and write ``out/<name>.tar.gz``.

    ``finetune``: continue a trained model on the data instead of training from scratch (see
    :func:`finetune_model`); an archive, a folder (its newest archive) or True (the newest in
    ``out``). ``allow_components``: custom component classes that model may import, beyond those
    ``config`` names.
    """
    if finetune is not None and finetune is not False:
        base = Path(out) if finetune is True else Path(finetune)
        return finetune_model(base, config, data, out, fixed_model_name, overrides, log,
                              finetune_options, allow_components)
    from nlu_engine.persistence import save_archive
    from nlu_engine.training_data import load_data

    cfg = config if isinstance(config, PipelineConfig) else load_config(config, overrides)
    if log:
        for notice in cfg.notices:
            log(f"notice: {notice}")
    training_data = data if isinstance(data, TrainingData) else load_data(data)
    pipeline = Pipeline.build(cfg)
    start = time.perf_counter()
    pipeline.train(training_data, log=log)
    seconds = time.perf_counter() - start
    extra = _manifest_extra(cfg, training_data, seconds, fingerprints(cfg, pipeline.components,
                                                                      training_data))
    path = save_archive(pipeline, Path(out) / f"{_archive_name(fixed_model_name)}.tar.gz", extra)
    if log:
        log(f"model written to {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return path


def finetune_model(
    base: str | Path,
    config: str | Path | dict[str, Any] | PipelineConfig | None,
    data: str | Path | list[str | Path] | TrainingData,
    out: str | Path = "models",
    fixed_model_name: str | None = None,
    overrides: list[str] | None = None,
    log: Callable[[str], None] | None = _stderr,
    options: FinetuneOptions | None = None,
    allow_components: Iterable[str] | None = None,
) -> Path:
    """Continue the model ``base`` (an archive, or a folder's newest) on ``data`` and write a new
    archive in ``out``; ``base`` is left as it is.

    ``config`` None means the model's own config (with ``overrides``). The model may import the
    custom components ``config`` names and those in ``allow_components``. Everything is checked
    before anything trains: the archive, the config against the model's
    (:func:`nlu_engine.finetune.check_compatible`), the data. Each component is reused, resumed
    or trained from scratch (:func:`nlu_engine.finetune.finetune_pipeline`).
    """
    from nlu_engine.finetune import check_compatible, finetune_pipeline, summary_lines
    from nlu_engine.persistence import load_archive, newest_archive, save_archive
    from nlu_engine.registry import allowed_components
    from nlu_engine.training_data import load_data

    base = Path(base)
    advice = "train one first, or name it: --finetune MODEL"
    if base.is_dir():
        try:
            base = newest_archive(base)
        except ArchiveError:
            raise ArchiveError(
                f"no model to fine-tune: no archive (*.tar.gz) in '{base}'; {advice}"
            ) from None
    elif not base.is_file():
        raise ArchiveError(f"no model to fine-tune: '{base}' does not exist; {advice}")
    allowed = [*(allow_components or []), *(custom_components(config) if config is not None else [])]
    previous, manifest, base = load_archive(base, allowed_components(allowed))
    if config is None:
        config = previous.config.as_dict()
    cfg = config if isinstance(config, PipelineConfig) else load_config(config, overrides)
    check_compatible(previous.config, cfg, str(base))
    path = Path(out) / f"{_archive_name(fixed_model_name, unique_in=Path(out))}.tar.gz"
    if path.resolve() == base.resolve():
        raise ConfigError(f"--fixed-model-name '{fixed_model_name}' would replace the model being "
                          "fine-tuned; pick another name")
    training_data = data if isinstance(data, TrainingData) else load_data(data)
    if log:
        for notice in [*cfg.notices, *_label_changes(manifest, training_data)]:
            log(f"notice: {notice}")
        log(f"fine-tuning {base}")
    stored = manifest.get("fingerprints")
    valid = isinstance(stored, list) and all(isinstance(f, str) for f in stored)
    start = time.perf_counter()
    pipeline, current, outcomes = finetune_pipeline(
        previous, stored if valid else None, cfg, training_data, options or FinetuneOptions(), log
    )
    seconds = time.perf_counter() - start
    if log:
        for line in summary_lines(outcomes):
            log(line)
    extra = _manifest_extra(cfg, training_data, seconds, current)
    extra["finetuned_from"] = base.name
    extra["finetune"] = {**dataclasses.asdict(options or FinetuneOptions()),
                         "components": [o.as_dict() for o in outcomes]}
    path = save_archive(pipeline, path, extra)
    if log:
        log(f"model written to {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return path


def _archive_name(fixed_model_name: str | None, unique_in: Path | None = None) -> str:
    """``fixed_model_name`` without ``.tar.gz``, else ``nlu-<timestamp>``; with ``unique_in``,
    a timestamp already taken there gets a suffix (fine-tuning can finish within a second)."""
    if fixed_model_name:
        return fixed_model_name.removesuffix(".tar.gz")
    name = time.strftime("nlu-%Y%m%d-%H%M%S")
    if unique_in is None:
        return name
    candidate, count = name, 1
    while (unique_in / f"{candidate}.tar.gz").exists():
        count += 1
        candidate = f"{name}-{count}"
    return candidate


def _manifest_extra(
    cfg: PipelineConfig, data: TrainingData, seconds: float, component_fingerprints: list[str]
) -> dict[str, Any]:
    config_hash = hashlib.sha256(
        json.dumps(cfg.as_dict(), sort_keys=True, default=str).encode()
    ).hexdigest()[:16]
    return {
        "labels": {"intents": data.intents, "entities": data.entity_types},
        "fingerprint": {"data": data.fingerprint(), "config": config_hash},
        "fingerprints": component_fingerprints,
        "training_seconds": round(seconds, 2),
        "num_examples": len(data.messages),
    }


def _label_changes(manifest: dict[str, Any], data: TrainingData) -> list[str]:
    """Notices of intents and entity types the data adds to or removes from the model's."""
    labels = manifest.get("labels") if isinstance(manifest.get("labels"), dict) else {}
    notices = []
    for key, now, what in (("intents", data.intents, "intents"),
                           ("entities", data.entity_types, "entity types")):
        before = {str(x) for x in labels.get(key) or []}
        added = [x for x in now if x not in before]
        removed = sorted(before - set(now))
        if added:
            notices.append(f"new {what}: {', '.join(added)}")
        if removed:
            notices.append(f"{what} no longer in the data, no longer predicted: {', '.join(removed)}")
    return notices


def custom_components(config: str | Path | dict[str, Any] | PipelineConfig) -> list[str]:
    """The custom component classes (import paths) a config names, for ``allow_components``.

    The config is the user's own, so it is read and validated as for training (which imports
    its custom components).
    """
    from nlu_engine.registry import registered_name

    cfg = config if isinstance(config, PipelineConfig) else load_config(config)
    return [step.name for step in cfg.steps if registered_name(step.name) is None]


class Model:
    """A trained pipeline ready to parse messages."""

    def __init__(self, pipeline: Pipeline, manifest: dict[str, Any], path: Path) -> None:
        self.pipeline = pipeline
        self.manifest = manifest
        self.path = path

    @classmethod
    def load(cls, path: str | Path, allow_components: Iterable[str] | str | None = None) -> Model:
        """Load an archive, or a folder's newest archive.

        An archive is data: it may name registered components, and custom component classes
        only if they are in ``allow_components`` (import paths such as
        ``my_package.module.MyComponent``); nothing else is imported.
        """
        from nlu_engine.persistence import load_archive
        from nlu_engine.registry import allowed_components

        allowed = allowed_components(allow_components)
        pipeline, manifest, resolved = load_archive(Path(path), allowed)
        return cls(pipeline, manifest, resolved)

    @property
    def model_id(self) -> str:
        name = self.path.name.removesuffix(".tar.gz")
        return str(self.manifest.get("fingerprint", {}).get("data", "")) + "-" + name

    def parse(self, text: str) -> dict[str, Any]:
        return self.parse_batch([text])[0]

    def parse_batch(self, texts: list[str], batch_size: int = 256) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        for i in range(0, len(texts), batch_size):
            results.extend(self.pipeline.parse_batch(texts[i : i + batch_size]))
        return results
