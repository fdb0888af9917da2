"""Train a pipeline into an archive, and load an archive to parse messages."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from nlu_engine.config import PipelineConfig, load_config
from nlu_engine.pipeline import Pipeline, _stderr
from nlu_engine.training_data.domain import DEFAULT_INTENTS
from nlu_engine.training_data.intent_message import unpack_intent_message
from nlu_engine.training_data.training_data import TrainingData

logger = logging.getLogger(__name__)


def train(
    config: str | Path | dict[str, Any] | PipelineConfig | None,
    data: str | Path | list[str | Path] | TrainingData,
    out: str | Path = "models",
    fixed_model_name: str | None = None,
    overrides: list[str] | None = None,
    log: Callable[[str], None] | None = _stderr,
    domain: str | Path | None = None,
) -> Path:
    """Validate the config, read the data, train and write ``out/<name>.tar.gz``.

    ``data`` may be a Rasa project's data folder: stories and rules are skipped and counted;
    ``domain`` (a Rasa domain file or folder) adds the responses of retrieval intents.
    """
    from nlu_engine.persistence import save_archive

    cfg = config if isinstance(config, PipelineConfig) else load_config(config, overrides)
    if log:
        for notice in cfg.notices:
            log(f"notice: {notice}")
    training_data, domain_labels = _training_data(data, domain, log)
    pipeline = Pipeline.build(cfg)
    start = time.perf_counter()
    pipeline.train(training_data, log=log)
    seconds = time.perf_counter() - start
    name = fixed_model_name or time.strftime("nlu-%Y%m%d-%H%M%S")
    if name.endswith(".tar.gz"):
        name = name[: -len(".tar.gz")]
    config_hash = hashlib.sha256(
        json.dumps(cfg.as_dict(), sort_keys=True, default=str).encode()
    ).hexdigest()[:16]
    extra = {
        "labels": {
            "intents": training_data.intents,
            "entities": training_data.entity_types,
        },
        "fingerprint": {"data": training_data.fingerprint(), "config": config_hash},
        "training_seconds": round(seconds, 2),
        "num_examples": len(training_data.messages),
        **({"domain": domain_labels} if domain_labels else {}),
    }
    path = save_archive(pipeline, Path(out) / f"{name}.tar.gz", extra)
    if log:
        log(f"model written to {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return path


def _training_data(
    data: str | Path | list[str | Path] | TrainingData,
    domain: str | Path | None,
    log: Callable[[str], None] | None,
) -> tuple[TrainingData, dict[str, list[str]] | None]:
    """The training data (a project's NLU, with the domain's responses) and the domain's intents
    and entities (kept in the manifest for ``/intent`` messages)."""
    from nlu_engine.training_data.domain import read_domain
    from nlu_engine.training_data.project import add_domain_responses, read_project

    if isinstance(data, TrainingData):
        found = read_domain(domain) if domain is not None else None
        if found is not None:
            add_domain_responses(data, found)
    else:
        project = read_project(data, domain)
        for entry in project.skipped_files:
            logger.warning(f"skipped {entry}")
        notice = project.notice()
        if log and notice:
            log(f"notice: {notice}")
        data, found = project.data, project.domain
    if found is None:
        return data, None
    return data, {"intents": list(found.intents), "entities": sorted(found.entities)}


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
        """Parse results in order; a message naming its intent (``/greet``, a Rasa button's
        payload) gets that intent, as from Rasa (``training_data.intent_message``)."""
        named = {i: found for i, text in enumerate(texts) if text.lstrip().startswith("/")
                 and (found := unpack_intent_message(text, *self._known_labels())) is not None}
        rest = [text for i, text in enumerate(texts) if i not in named] if named else texts
        parsed: list[dict[str, Any]] = []
        for i in range(0, len(rest), batch_size):
            parsed.extend(self.pipeline.parse_batch(rest[i : i + batch_size]))
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
