"""Rasa's ``config.yml`` -> validated component configs.

A config is a file, or a pipeline shipped in the package (``nlu_engine/pipelines/``) named
``diet``, ``diet.yml`` or ``pipelines/diet.yml`` (:func:`find_config`).

Every parameter is checked against the component's ``__init__`` signature before anything
trains: unknown keys (with the closest name suggested), wrong types and out-of-range values
are one-line errors naming the file, the component and the key.
"""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass, field
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from nlu_engine.component import DENSE_FEATURES, FEATURES, SPARSE_FEATURES, Component
from nlu_engine.errors import ConfigError, closest
from nlu_engine.registry import component_class

#: the pipelines shipped in the package, as package data (``nlu_engine/pipelines/*.yml``)
PIPELINES = files("nlu_engine") / "pipelines"
DEFAULT_PIPELINE = PIPELINES / "diet.yml"
IGNORED_KEYS = ("recipe", "assistant_id", "policies")
KNOWN_KEYS = ("language", "pipeline", *IGNORED_KEYS)


@dataclass
class ComponentSpec:
    """One pipeline step: its name as written, its class and its full parameter set."""

    name: str
    cls: type[Component]
    params: dict[str, Any]


@dataclass
class PipelineConfig:
    language: str
    steps: list[ComponentSpec]
    source: str = "<config>"
    notices: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The resolved config (every parameter with its value), as stored in a model."""
        return {
            "language": self.language,
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
    language = raw.get("language") or "en"
    if not isinstance(language, str):
        raise ConfigError(f"{where}: 'language' must be a language code such as 'en'")
    pipeline = raw.get("pipeline")
    if not pipeline:
        if Path(where).resolve() == Path(str(DEFAULT_PIPELINE)).resolve():
            raise ConfigError(f"{where}: the default pipeline file is empty")
        notices.append(f"{where}: no pipeline given; using the default {DEFAULT_PIPELINE.name}")
        default = load_config(DEFAULT_PIPELINE, overrides)
        default.language = language
        default.notices = notices + default.notices
        return default
    if not isinstance(pipeline, list):
        raise ConfigError(f"{where}: 'pipeline' must be a list of components (- name: ...)")
    entries = [dict(item) if isinstance(item, dict) else item for item in pipeline]
    _apply_overrides(entries, overrides or [], where)
    steps = [_build_step(item, i, where) for i, item in enumerate(entries)]
    check_order(steps, where)
    return PipelineConfig(language=language, steps=steps, source=where, notices=notices)


def shipped_pipelines() -> list[str]:
    """The names of the pipelines shipped in the package: ``diet``, ``logreg``, ..."""
    return sorted(p.name.removesuffix(".yml") for p in PIPELINES.iterdir() if p.name.endswith(".yml"))


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
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"{path}{line}: invalid YAML ({problem}); fix the syntax") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None


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


def _build_step(item: Any, index: int, where: str) -> ComponentSpec:
    if not isinstance(item, dict) or "name" not in item:
        raise ConfigError(f"{where}: pipeline step {index + 1} needs a 'name' (- name: Component)")
    name = item["name"]
    try:
        cls = component_class(name)
    except ConfigError as error:
        raise ConfigError(f"{where}: pipeline step {index + 1}: {error}") from None
    params = {k: v for k, v in item.items() if k != "name"}
    resolved = validate_params(cls, params, f"{where}: {name} (step {index + 1})")
    return ComponentSpec(name=name, cls=cls, params=resolved)


def parameters(cls: type[Component]) -> dict[str, inspect.Parameter]:
    """The hyperparameters of a component: its ``__init__`` keyword arguments."""
    signature = inspect.signature(cls.__init__)
    return {
        n: p
        for n, p in signature.parameters.items()
        if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def validate_params(cls: type[Component], params: dict[str, Any], where: str) -> dict[str, Any]:
    """All parameters of ``cls`` with defaults filled in; ConfigError on any bad key or value."""
    known = parameters(cls)
    if "name" in known:
        raise ConfigError(
            f"{where}: {cls.__name__} has a parameter called 'name', which config.yml uses for the "
            "component's name; rename that parameter"
        )
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # an unresolvable annotation in a custom component: skip type checks
        hints = {}
    for key in params:
        if key not in known:
            allowed = ", ".join(sorted(known)) or "none"
            raise ConfigError(
                f"{where}: unknown parameter '{key}'{closest(str(key), known)}; allowed: {allowed}"
            )
    resolved: dict[str, Any] = {}
    for key, parameter in known.items():
        if key in params:
            value = params[key]
        elif parameter.default is not inspect.Parameter.empty:
            value = parameter.default
        else:
            raise ConfigError(f"{where}: parameter '{key}' is required")
        if key in params and key in hints and not type_matches(value, hints[key]):
            raise ConfigError(
                f"{where}: parameter '{key}' must be {describe(hints[key])}, got {value!r}"
            )
        low, high = cls.ranges.get(key, (None, None))
        for number in _numbers(value):
            if (low is not None and number < low) or (high is not None and number > high):
                bounds = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
                raise ConfigError(
                    f"{where}: parameter '{key}' = {value!r} is out of range; allowed {bounds}"
                )
        resolved[key] = value
    return resolved


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, list | tuple):
        return [n for v in value for n in _numbers(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    return []


def type_matches(value: Any, hint: Any) -> bool:
    """Whether a YAML value fits a type hint (bool, int, float, str, None, Literal, unions,
    list/tuple/dict of those)."""
    if hint is Any or hint is inspect.Parameter.empty:
        return True
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(type_matches(value, a) for a in args)
    if origin is Literal:
        return value in args
    if hint is type(None) or hint is None:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple, typing.Sequence) or hint in (list, tuple):
        if not isinstance(value, list | tuple):
            return False
        if not args or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
            return not args or all(type_matches(v, args[0]) for v in value)
        if origin is tuple:
            return len(args) == len(value) and all(map(type_matches, value, args))
        return all(type_matches(v, args[0]) for v in value)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            return False
        if not args:
            return True
        return all(type_matches(k, args[0]) and type_matches(v, args[1]) for k, v in value.items())
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def describe(hint: Any) -> str:
    """A type hint in words, for error messages."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in args)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if hint is type(None):
        return "null"
    if origin in (list, tuple):
        return f"a list of {describe(args[0])}" if args else "a list"
    if origin is dict:
        return f"a mapping of {describe(args[0])} to {describe(args[1])}" if args else "a mapping"
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(
        hint, getattr(hint, "__name__", str(hint))
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
