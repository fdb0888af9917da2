"""Train a pipeline into an archive, and load an archive to parse messages."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from nlu_engine.assembly.config import PipelineConfig, load_config
from nlu_engine.assembly.finetune import fingerprints
from nlu_engine.assembly.pipeline import Pipeline, _stderr
from nlu_engine.contract.component import FinetuneOptions
from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.nn.onnx_runtime import RUNTIMES, check_runtime, require_onnxruntime, runtime_for_cpu
from nlu_engine.training_data.domain import DEFAULT_INTENTS
from nlu_engine.training_data.intent_message import unpack_intent_message

logger = logging.getLogger(__name__)


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
    domain: str | Path | None = None,
) -> Path:
    """Validate the config, read the data, train and write ``out/<name>.tar.gz``.

    ``data`` may be a Rasa project's data folder: stories and rules are skipped and counted;
    ``domain`` (a Rasa domain file or folder) adds the responses of retrieval intents.
    ``finetune``: continue a trained model on the data instead of training from scratch (see
    :func:`finetune_model`); an archive, a folder (its newest archive) or True (the newest in
    ``out``). ``allow_components``: custom component classes that model may import, beyond those
    ``config`` names.
    """
    if finetune is not None and finetune is not False:
        base = Path(out) if finetune is True else Path(finetune)
        return finetune_model(base, config, data, out, fixed_model_name, overrides, log,
                              finetune_options, allow_components, domain)
    cfg = config if isinstance(config, PipelineConfig) else load_config(config, overrides)
    if log:
        for notice in cfg.notices:
            log(f"notice: {notice}")
    training_data, domain_labels = _training_data(data, domain, log)
    pipeline = Pipeline.build(cfg)
    # the features DIET learns from are the ones it will parse with
    pipeline.use_runtime(runtime_for_cpu(check_runtime(pipeline.default_runtime()), explicit=True,
                                         training=True))
    start = time.perf_counter()
    pipeline.train(training_data, log=log)
    seconds = time.perf_counter() - start
    _log_threshold_notice(pipeline, log)
    extra = _manifest_extra(cfg, training_data, seconds, fingerprints(cfg, pipeline.components,
                                                                      training_data), domain_labels)
    extra["runtime"] = pipeline.runtime
    return _save(pipeline, Path(out) / f"{_archive_name(fixed_model_name)}.tar.gz", extra, log)


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
    domain: str | Path | None = None,
) -> Path:
    """Continue the model ``base`` (an archive, or a folder's newest) on ``data`` and write a new
    archive in ``out``; ``base`` is left as it is.

    ``config`` None means the model's own config (with ``overrides``). The model may import the
    custom components ``config`` names and those in ``allow_components``. Everything is checked
    before anything trains: the archive, the config against the model's
    (:func:`nlu_engine.assembly.finetune.check_compatible`), the data. Each component is reused, resumed
    or trained from scratch (:func:`nlu_engine.assembly.finetune.finetune_pipeline`).
    """
    from nlu_engine.assembly.finetune import check_compatible, finetune_pipeline, summary_lines
    from nlu_engine.assembly.persistence import load_archive
    from nlu_engine.assembly.registry import allowed_components

    base = _base_archive(Path(base))
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
    training_data, domain_labels = _training_data(data, domain, log)
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
    _log_threshold_notice(pipeline, log)
    extra = _manifest_extra(cfg, training_data, seconds, current, domain_labels)
    extra["runtime"] = pipeline.runtime
    extra["finetuned_from"] = base.name
    extra["finetune"] = {**dataclasses.asdict(options or FinetuneOptions()),
                         "components": [o.as_dict() for o in outcomes]}
    return _save(pipeline, path, extra, log)


def _save(pipeline: Pipeline, path: Path, extra: dict[str, Any], log: Callable[[str], None] | None) -> Path:
    """Write the archive (``persistence.save_archive``) and say where."""
    from nlu_engine.assembly.persistence import save_archive

    path = save_archive(pipeline, path, extra)
    if log:
        log(f"model written to {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return path


def _base_archive(base: Path) -> Path:
    """The archive fine-tuning continues: ``base``, or the newest in the folder ``base``."""
    from nlu_engine.assembly.persistence import newest_archive

    advice = "train one first, or name it: --finetune MODEL"
    if base.is_dir():
        try:
            return newest_archive(base)
        except ArchiveError:
            raise ArchiveError(
                f"no model to fine-tune: no archive (*.tar.gz) in '{base}'; {advice}"
            ) from None
    if not base.is_file():
        raise ArchiveError(f"no model to fine-tune: '{base}' does not exist; {advice}")
    return base


def _log_threshold_notice(pipeline: Pipeline, log: Callable[[str], None] | None) -> None:
    """The notice of a FallbackClassifier threshold that sends more than a tenth of the held-out
    examples to the fallback (``classifiers.fallback.training_notice``)."""
    from nlu_engine.classifiers.fallback import training_notice

    notice = training_notice(pipeline.components) if log else None
    if log and notice:
        log(f"notice: {notice}")


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
    cfg: PipelineConfig,
    data: TrainingData,
    seconds: float,
    component_fingerprints: list[str],
    domain_labels: dict[str, list[str]] | None = None,
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
        **({"domain": domain_labels} if domain_labels else {}),
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


def _training_data(
    data: str | Path | list[str | Path] | TrainingData,
    domain: str | Path | None,
    log: Callable[[str], None] | None,
) -> tuple[TrainingData, dict[str, list[str]] | None]:
    """The training data (a project's NLU, with the domain's responses) and the domain's intents
    and entities (kept in the manifest for ``/intent`` messages). What trains but cannot work as
    the data means it to (``validation.training_warnings``) is a warning each, never an error."""
    from nlu_engine.training_data.domain import read_domain
    from nlu_engine.training_data.project import add_domain_responses, read_project
    from nlu_engine.training_data.validation import training_warnings

    if isinstance(data, TrainingData):
        found = read_domain(domain) if domain is not None else None
        if found is not None:
            add_domain_responses(data, found)
    else:
        project = read_project(data, domain)
        for entry in project.skipped_files:
            logger.warning(f"skipped {entry}")
        for warning in project.data.load_warnings:
            logger.warning(warning)
        notice = project.notice()
        if log and notice:
            log(f"notice: {notice}")
        data, found = project.data, project.domain
    for warning in training_warnings(data, found):  # it trains, but not as the data means it to
        logger.warning(warning)
    if found is None:
        return data, None
    return data, {"intents": list(found.intents), "entities": sorted(found.entities)}


def custom_components(config: str | Path | dict[str, Any] | PipelineConfig) -> list[str]:
    """The custom component classes (import paths) a config names, for ``allow_components``.

    The config is the user's own, so it is read and validated as for training (which imports
    its custom components).
    """
    from nlu_engine.assembly.registry import registered_name

    cfg = config if isinstance(config, PipelineConfig) else load_config(config)
    return [step.name for step in cfg.steps if registered_name(step.name) is None]


class Model:
    """A trained pipeline ready to parse messages."""

    def __init__(self, pipeline: Pipeline, manifest: dict[str, Any], path: Path) -> None:
        self.pipeline = pipeline
        self.manifest = manifest
        self.path = path

    @property
    def runtime(self) -> str:
        """The runtime the model parses in (``nn.onnx_runtime``): float32, int8, int8_dynamic or bfloat16."""
        return self.pipeline.runtime

    @classmethod
    def load(cls, path: str | Path, allow_components: Iterable[str] | str | None = None,
             runtime: str | None = None) -> Model:
        """Load an archive, or a folder's newest archive.

        An archive is data: it may name registered components, and custom component classes
        only if they are in ``allow_components`` (import paths such as
        ``my_package.module.MyComponent``); nothing else is imported. ``runtime`` (float32,
        int8 or bfloat16) overrides the one the archive records (``nn.onnx_runtime``).
        """
        from nlu_engine.assembly.persistence import load_archive
        from nlu_engine.assembly.registry import allowed_components

        requested = None if runtime is None else check_runtime(runtime, "--runtime")
        require_onnxruntime()
        allowed = allowed_components(allow_components)
        pipeline, manifest, resolved = load_archive(Path(path), allowed)
        recorded = manifest.get("runtime")
        if recorded is not None and recorded not in RUNTIMES:
            raise ArchiveError(f"model archive '{resolved}': the manifest's runtime {recorded!r} is "
                               f"not one of {', '.join(RUNTIMES)}; retrain the model")
        chosen = requested or recorded or pipeline.default_runtime()  # before: as its components say
        pipeline.use_runtime(runtime_for_cpu(check_runtime(chosen), explicit=requested is not None))
        return cls(pipeline, manifest, resolved)

    @property
    def model_id(self) -> str:
        name = self.path.name.removesuffix(".tar.gz")
        return str(self.manifest.get("fingerprint", {}).get("data", "")) + "-" + name

    def parse(self, text: str, time: float | None = None) -> dict[str, Any]:
        """The parse result of ``text``; ``time`` is when it was sent (seconds since the epoch,
        Rasa's ``time``), the reference time of Duckling's dates (default: now)."""
        return self.parse_batch([text], times=None if time is None else [time])[0]

    def parse_batch(
        self, texts: list[str], batch_size: int = 256, times: list[float | None] | None = None
    ) -> list[dict[str, Any]]:
        """Parse results in order; a message naming its intent (``/greet``, a Rasa button's
        payload) gets that intent, as from Rasa (``training_data.intent_message``). ``times``
        are the messages' times as in :meth:`parse` (None: now).

        As Rasa's ``UserMessage`` does, a message is parsed without its leading and trailing
        whitespace (``text`` and the offsets are the stripped text's); a whitespace-only message
        is the empty message."""
        texts = [text.strip() for text in texts]
        named = {i: found for i, text in enumerate(texts) if text.lstrip().startswith("/")
                 and (found := unpack_intent_message(text, *self._known_labels())) is not None}
        rest = [i for i in range(len(texts)) if i not in named]
        parsed: list[dict[str, Any]] = []
        for i in range(0, len(rest), batch_size):
            chunk = rest[i : i + batch_size]
            parsed.extend(self.pipeline.parse_batch(
                [texts[j] for j in chunk], None if times is None else [times[j] for j in chunk]))
        if not named:
            return parsed
        others = iter(parsed)
        return [named[i] if i in named else next(others) for i in range(len(texts))]

    def _known_labels(self) -> tuple[set[str], set[str] | None]:
        """The intents a ``/intent`` message may name (the model's, the domain's and Rasa's
        defaults) and, when the model was trained with a domain, the entity types it may set."""
        labels, domain = self.manifest.get("labels"), self.manifest.get("domain")
        intents = {*_names(labels, "intents"), *_names(domain, "intents"), *DEFAULT_INTENTS}
        if not isinstance(domain, dict):
            return intents, None
        return intents, {*_names(labels, "entities"), *_names(domain, "entities")}


def _names(section: Any, key: str) -> list[str]:
    """The strings listed under ``key`` of a manifest section (an archive is untrusted data)."""
    values = section.get(key) if isinstance(section, dict) else None
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []
