"""Rasa's ``config.yml`` -> validated component configs.

A config is a file, or a pipeline shipped in the package (``nlu_engine/pipelines/``) named
``diet``, ``diet.yml`` or ``pipelines/diet.yml`` (:func:`find_config`).

Every step's parameters build the component's ``Config`` dataclass before anything trains:
unknown keys (with the closest name suggested), wrong types, out-of-range values and clashes
between fields (the config's ``validate``) are one-line errors naming the file, the component
and the key. That ``Config`` is built once: the step carries it to ``Pipeline.build``, which
hands it to the component as it is.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from nlu_engine.assembly.registry import component_class, registered_name
from nlu_engine.contract.component import (
    DENSE_FEATURES,
    FEATURES,
    SPARSE_FEATURES,
    Component,
    ComponentConfig,
    build_config,
    config_fields,
)
from nlu_engine.contract.errors import ConfigError, closest, yaml_problem
from nlu_engine.contract.languages import ANY, base_language, check_language, language_of
from nlu_engine.loaders.weight_packages import package_for_step
from nlu_engine.nn.onnx_runtime import check_runtime
from nlu_engine.training_data.yaml_limits import safe_load

#: the pipelines shipped in the package, as package data (``nlu_engine/pipelines/*.yml``)
PIPELINES = files("nlu_engine") / "pipelines"
DEFAULT_PIPELINE = PIPELINES / "diet.yml"
#: what Rasa 3 trains when a Rasa config.yml (one with ``recipe``, ``assistant_id`` or
#: ``policies``) leaves ``pipeline`` empty
RASA_DEFAULT_PIPELINE = PIPELINES / "rasa_suggested.yml"
IGNORED_KEYS = ("recipe", "assistant_id", "policies")
KNOWN_KEYS = ("language", "pipeline", "runtime", *IGNORED_KEYS)


@dataclass
class ComponentSpec:
    """One pipeline step: its name as written, its class and its validated ``Config``."""

    name: str
    cls: type[Component]
    config: ComponentConfig

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter by name (``config.as_dict()``), as a model archive stores them."""
        return self.config.as_dict()


@dataclass
class PipelineConfig:
    language: str
    steps: list[ComponentSpec]
    source: str = "<config>"
    notices: list[str] = field(default_factory=list)
    #: the parse runtime the model records (``nn.onnx_runtime``; None: its components' default)
    runtime: str | None = None
    #: the weights packages its steps name, installed or not (``loaders.weight_packages``)
    weight_packages: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The resolved config (every parameter with its value), as stored in a model."""
        return {
            "language": self.language,
            **({"runtime": self.runtime} if self.runtime is not None else {}),
            "pipeline": [{"name": s.name, **_jsonable(s.params)} for s in self.steps],
        }


def load_config(
    source: str | Path | Traversable | dict[str, Any] | None, overrides: list[str] | None = None
) -> PipelineConfig:
    """Read and validate a config file, a shipped pipeline by name (:func:`find_config`) or an
    already-parsed dict."""
    if source is None:
        source = DEFAULT_PIPELINE
    if isinstance(source, dict):
        raw, where = source, "<config>"
    else:
        path = find_config(source)
        where = str(path)
        raw = _read_yaml(path)
    notices: list[str] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a config must be a mapping with 'language' and 'pipeline'")
    for key in raw:
        if key not in KNOWN_KEYS:
            raise ConfigError(
                f"{where}: unknown top-level key '{key}'{closest(str(key), KNOWN_KEYS)}; "
                f"allowed: {', '.join(KNOWN_KEYS)}"
            )
    for key in IGNORED_KEYS:
        if key in raw:
            notices.append(f"{where}: '{key}' is accepted and ignored (NLU only)")
    language = check_language(raw.get("language") or "en", where)
    runtime = None if raw.get("runtime") is None else check_runtime(raw["runtime"], f"{where}: runtime")
    pipeline = raw.get("pipeline")
    if not pipeline:
        rasa_config = any(key in raw for key in IGNORED_KEYS)
        fallback = RASA_DEFAULT_PIPELINE if rasa_config else DEFAULT_PIPELINE
        if Path(where).resolve() == Path(str(fallback)).resolve():
            raise ConfigError(f"{where}: the default pipeline file is empty")
        why = "Rasa's default for a Rasa config" if rasa_config else "the default"
        notices.append(f"{where}: no pipeline given; using {why}, {fallback.name}")
        default = load_config(fallback, overrides)
        default.language = language
        resolve_tokenizer(default.steps, language, where, notices)
        default.steps = steps_for_language(default.steps, language, where, notices)
        default.runtime = runtime or default.runtime
        check_links(default.steps, where)
        # the shipped file's own `recipe` is not the user's to hear about
        default.notices = notices + [n for n in default.notices if "is accepted and ignored" not in n]
        return default
    if not isinstance(pipeline, list):
        raise ConfigError(f"{where}: 'pipeline' must be a list of components (- name: ...)")
    entries = [dict(item) if isinstance(item, dict) else item for item in pipeline]
    _apply_overrides(entries, overrides or [], where)
    steps = [_build_step(item, i, where, notices) for i, item in enumerate(entries)]
    resolve_tokenizer(steps, language, where, notices)
    steps = steps_for_language(steps, language, where, notices)
    named: list[str] = []
    steps = steps_with_weights(steps, where, notices, named)
    check_order(steps, where)
    check_links(steps, where)
    return PipelineConfig(language=language, steps=steps, source=where, notices=notices,
                          runtime=runtime, weight_packages=named)


def shipped_pipelines() -> list[str]:
    """The names of the pipelines shipped in the package: ``diet``, ``logreg``, ..."""
    return sorted(p.name.removesuffix(".yml") for p in PIPELINES.iterdir() if p.name.endswith(".yml"))


def shipped_weights() -> dict[str, list[str]]:
    """Each weights package (distribution) -> the shipped pipelines whose steps name it."""
    needed: dict[str, list[str]] = {}
    for name in shipped_pipelines():
        for distribution in load_config(name).weight_packages:
            needed.setdefault(distribution, []).append(name)
    return needed


def find_config(source: str | Path | Traversable) -> Path | Traversable:
    """The config file ``source`` names.

    A file that exists is taken as it is, even when it is named like a shipped pipeline. Else a
    relative ``diet``, ``diet.yml`` or ``pipelines/diet.yml`` names the shipped pipeline, so the
    README's ``--config pipelines/diet.yml`` works from any folder after ``pip install``.
    """
    if not isinstance(source, str | Path):
        return source  # already a resource, e.g. DEFAULT_PIPELINE
    path = Path(source)
    if path.is_file():
        return path
    parts = path.parts
    if not path.is_absolute() and (len(parts) == 1 or (len(parts) == 2 and parts[0] == "pipelines")):
        name = parts[-1].removesuffix(".yml")
        if name in shipped_pipelines():
            return PIPELINES / f"{name}.yml"
    raise ConfigError(
        f"config file '{source}' not found; give the path of a config.yml or the name of a "
        f"shipped pipeline ({', '.join(shipped_pipelines())})"
    )


def _read_yaml(path: Path | Traversable) -> Any:
    if not path.is_file():
        raise ConfigError(f"config file '{path}' not found")
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    try:
        return safe_load(content)
    except yaml.YAMLError as error:
        line, problem = yaml_problem(error, content)
        raise ConfigError(f"{path}{line}: invalid YAML ({problem}); fix the syntax") from None


def _apply_overrides(entries: list[Any], overrides: list[str], where: str) -> None:
    """``Name.key=value`` (all steps of that name) or ``3.key=value`` (step 3, counted from 0)."""
    for override in overrides:
        target, sep, value_text = override.partition("=")
        name, dot, key = target.partition(".")
        if not sep or not dot or not key:
            raise ConfigError(
                f"--set '{override}': expected Component.key=value, e.g. DIETClassifier.epochs=5"
            )
        try:
            value = yaml.safe_load(value_text)
        except yaml.YAMLError:
            value = value_text
        hits = [
            e
            for i, e in enumerate(entries)
            if isinstance(e, dict) and (e.get("name") == name or str(i) == name)
        ]
        if not hits:
            names = [e.get("name") for e in entries if isinstance(e, dict)]
            raise ConfigError(
                f"--set '{override}': no component '{name}' in {where}"
                f"{closest(name, [n for n in names if isinstance(n, str)])}"
            )
        for entry in hits:
            entry[key] = value


def _build_step(item: Any, index: int, where: str, notices: list[str]) -> ComponentSpec:
    if not isinstance(item, dict) or "name" not in item:
        raise ConfigError(f"{where}: pipeline step {index + 1} needs a 'name' (- name: Component)")
    name = item["name"]
    try:
        cls = component_class(name)
    except ConfigError as error:
        raise ConfigError(f"{where}: pipeline step {index + 1}: {error}") from None
    params = {k: v for k, v in item.items() if k != "name"}
    place = f"{where}: {name} (step {index + 1})"
    config = make_config(cls, params, place)
    notices.extend(f"{place}: {notice}" for notice in config.notices())
    return ComponentSpec(name=name, cls=cls, config=config)


def steps_for_language(steps: list[ComponentSpec], language: str, where: str,
                       notices: list[str]) -> list[ComponentSpec]:
    """The steps without those whose ``languages`` parameter leaves ``language`` out (an
    English-only encoder in a shipped pipeline, for a German bot), each with one notice. Like
    the tokenizer's choice, this runs at config validation only: the archive's pipeline is the
    one that trained."""
    kept = []
    for i, step in enumerate(steps):
        serves = [base_language(code) for code in getattr(step.config, "languages", None) or []]
        if serves and base_language(language) not in serves and language != ANY:
            notices.append(f"{where}: {step.name} (step {i + 1}) serves {', '.join(serves)} only; "
                           f"left out for language '{language}'")
            continue
        kept.append(step)
    return kept


def steps_with_weights(steps: list[ComponentSpec], where: str, notices: list[str],
                       named: list[str]) -> list[ComponentSpec]:
    """The steps without those whose weights package (``loaders.weight_packages``) is not
    installed and that the pipeline trains without (the default pipeline's all-MiniLM-L6-v2),
    each with one notice naming the command that installs it. Every package a kept or left-out
    step names goes into ``named``. A local folder of weights is not in the table: missing, it
    stays the component's error."""
    kept = []
    for i, step in enumerate(steps):
        package = package_for_step(registered_name(step.name), step.config)
        if package is not None and package.distribution not in named:
            named.append(package.distribution)
        if package is not None and package.optional and not package.installed():
            notices.append(f"{where}: {step.name} (step {i + 1}) left out: its weights, "
                           f"{package.name}, are not installed; `{package.install_hint}` "
                           "installs them")
            continue
        kept.append(step)
    return kept


def resolve_tokenizer(steps: list[ComponentSpec], language: str, where: str, notices: list[str]) -> None:
    """Put the tokenizer ``language`` needs (``contract.languages.LANGUAGES``) in the place of each
    WhitespaceTokenizer step, with the same common tokenizer parameters, and say so in a notice.

    A step with ``language_tokenizer: false`` is kept, and so is any other tokenizer the config
    names. The tokenizer's package missing is a one-line error naming the extra to install. This
    runs at config validation only: a model archive's pipeline is never resolved again.
    """
    row = language_of(language)
    for i, step in enumerate(steps):
        if registered_name(step.name) != "WhitespaceTokenizer":
            continue
        if not getattr(step.config, "language_tokenizer", True):
            continue
        place = f"{where}: {step.name} (step {i + 1})"
        keep = "set language_tokenizer: false on WhitespaceTokenizer to keep it"
        if row.tokenizer is None:
            if row.unspaced:
                notices.append(
                    f"{place}: {row.name} does not separate words by spaces and no tokenizer for "
                    "it is built in; words are split at spaces only, so an entity must be a whole "
                    "space-separated run of text"
                )
            continue
        cls = component_class(row.tokenizer)
        try:
            getattr(cls, "check_packages", lambda: None)()
        except ConfigError as error:
            raise ConfigError(
                f"{place}: language '{language}' ({row.name}) is split into words by "
                f"{row.tokenizer}; {error} (or {keep})"
            ) from None
        common = {k: v for k, v in step.params.items() if k in config_fields(cls.Config)}
        steps[i] = ComponentSpec(name=row.tokenizer, cls=cls, config=make_config(cls, common, place))
        notices.append(f"{place}: language '{language}' ({row.name}): {row.tokenizer} splits the "
                       f"words in place of WhitespaceTokenizer ({keep})")


def make_config(cls: type[Component], params: dict[str, Any], where: str) -> ComponentConfig:
    """The component's checked ``Config`` for ``params``; ConfigErrors start with ``where``."""
    _check_config_class(cls, where)
    try:
        return build_config(cls.Config, params)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None


def _check_config_class(cls: type[Component], where: str) -> None:
    """Refuse a component whose hyperparameters are not the fields of its ``Config`` dataclass,
    such as one written for the ``__init__``-argument style."""
    name = cls.__name__
    config = cls.Config
    if not (isinstance(config, type) and issubclass(config, ComponentConfig)):
        raise ConfigError(
            f"{where}: {name}.Config must subclass nlu_engine.contract.component.Component.Config"
        )
    if "__dataclass_fields__" not in vars(config):
        raise ConfigError(f"{where}: {name}.Config needs the decorator @dataclass(frozen=True, kw_only=True)")
    init = list(inspect.signature(cls.__init__).parameters.values())[1:]
    old = [p.name for p in init if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if old:
        raise ConfigError(
            f"{where}: {name} takes its hyperparameters ({', '.join(old)}) as __init__ arguments; "
            "declare them as fields of a nested `@dataclass(frozen=True, kw_only=True) class "
            "Config(Component.Config)`, remove __init__ and read them as self.config.<name> "
            "(README: 'Writing a custom component')"
        )
    try:  # the pipeline hands the built Config over: cls(config)
        inspect.signature(cls.__init__).bind(None, config)
    except TypeError:
        raise ConfigError(
            f"{where}: {name}.__init__ does not take its Config; remove __init__ (the base class "
            "stores the config) or pass the config on to it (README: 'Writing a custom component')"
        ) from None
    if "ranges" in vars(cls):
        raise ConfigError(
            f"{where}: {name}.ranges is not read: give each bound in its Config field, "
            "e.g. `window: int = param(1, low=0, high=5)` (README: 'Writing a custom component')"
        )
    fields = config_fields(config)
    if "name" in fields:
        raise ConfigError(
            f"{where}: {name} has a parameter called 'name', which config.yml uses for the "
            "component's name; rename that parameter"
        )
    taken = sorted({"config", "index", "language"} & set(fields))
    if taken:
        raise ConfigError(
            f"{where}: {name} has a parameter called '{taken[0]}', an attribute every component "
            "has; rename that parameter"
        )


def check_order(steps: list[ComponentSpec], where: str) -> None:
    """Reject a pipeline whose components need something no earlier component provides."""
    provided: set[str] = set()
    for i, step in enumerate(steps):
        for need in step.cls.requires:
            ok = (
                bool(provided & {SPARSE_FEATURES, DENSE_FEATURES})
                if need == FEATURES
                else need in provided
            )
            if not ok:
                raise ConfigError(
                    f"{where}: {step.name} (step {i + 1}) needs {need.replace('_', ' ')}, but no "
                    f"earlier component provides it; {_ADVICE.get(need, 'reorder the pipeline')}"
                )
        provided.update(step.cls.provides)


def check_links(steps: list[ComponentSpec], where: str) -> None:
    """Reject a pipeline where a component's declared links (``Component.links``: the combiner's
    intent classifier, the entity chooser's extractors) find no component before it; the one line
    names both components and what to do."""
    for i, step in enumerate(steps):
        place = f"{where}: {step.name} (step {i + 1})"
        for link in step.cls.links(step.config):
            if any(link.accepts(earlier.cls) for earlier in steps[:i]):
                continue
            found = [(j, s) for j, s in enumerate(steps) if j != i and link.accepts(s.cls)]
            if found:
                j, later = found[0]
                raise ConfigError(f"{place} needs {later.name} (step {j + 1}) before it: move "
                                  f"{later.name} above {step.name}")
            if not link.named_in:
                raise ConfigError(f"{place} needs {link.what} before it: {link.advice}")
            named = [(j, s) for j, s in enumerate(steps)
                     if j != i and s.cls.component_name() in link.names]
            if named:
                j, other = named[0]
                raise ConfigError(f"{place} names {other.name} (step {j + 1}) in `{link.named_in}`, "
                                  f"which is not {link.what}: {link.advice}")
            raise ConfigError(f"{place} names {', '.join(link.names)} in `{link.named_in}`, which "
                              f"is not in the pipeline: {link.advice}")


def step_names(names: list[str]) -> list[str]:
    """Each step's name in the pipeline, which its features and intent scores are known by
    (``Component.pipeline_name``): its ``name`` as the config writes it, and when the config
    writes that name more than once, with ``-1``, ``-2``, ... in order (the two
    CountVectorsFeaturizers: ``CountVectorsFeaturizer-1``, ``CountVectorsFeaturizer-2``). Moving
    a step leaves every name as it was, unless it passes another step of the same name."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    seen: dict[str, int] = {}
    named = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        named.append(f"{name}-{seen[name]}" if counts[name] > 1 else name)
    return named


_ADVICE = {
    "tokens": "put a tokenizer such as WhitespaceTokenizer first",
    FEATURES: "add a featurizer such as CountVectorsFeaturizer before it",
    SPARSE_FEATURES: "add a sparse featurizer such as CountVectorsFeaturizer before it",
    DENSE_FEATURES: "add a dense featurizer such as SpacyFeaturizer before it",
    "intent": "add an intent classifier such as DIETClassifier before it",
    "entities": "put it after an entity extractor such as DIETClassifier",
    "spacy_doc": "put SpacyNLP first",
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
