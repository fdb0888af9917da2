"""A component's hyperparameters: the typed, closed ``Config`` dataclass (``ComponentConfig``),
its fields with bounds (:func:`param`) and the checks that turn a YAML mapping into one, with one
line for each problem (:func:`build_config`). ``contract.component`` builds on it and re-exports them."""

from __future__ import annotations

import copy
import dataclasses
import functools
import types
import typing
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Union

from nlu_engine.contract.errors import ConfigError, closest

Bounds = tuple[float | None, float | None]


def param(default: Any = dataclasses.MISSING, *, low: float | None = None,
          high: float | None = None) -> Any:
    """A config field: its default and inclusive bounds for every number in its value.

    A list or mapping default is copied for each config, so no two configs share it.
    """
    metadata = {"bounds": (low, high)} if low is not None or high is not None else {}
    if isinstance(default, list | dict):
        return dataclasses.field(default_factory=functools.partial(copy.deepcopy, default),
                                 metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class ComponentConfig:
    """The hyperparameters of a component: subclass it as ``@dataclass(frozen=True, kw_only=True)``.

    Building one checks every field against its type hint and bounds, then runs ``validate``;
    each problem is a one-line ConfigError naming the parameter.
    """

    def __post_init__(self) -> None:
        check_fields(self)
        self.validate()

    def validate(self) -> None:
        """Checks between fields: raise ConfigError saying which fields clash and what to do.
        An override calls ``super().validate()``."""

    def notices(self) -> list[str]:
        """One line per setting that is accepted but has no effect, shown when training starts."""
        return []

    #: parameters a fine-tuning config may set differently from the model's (how long and how
    #: visibly training runs, not what it builds); every other difference is refused
    finetune_free: ClassVar[frozenset[str]] = frozenset()

    def as_dict(self) -> dict[str, Any]:
        """Every parameter by name, in declaration order (what a model archive stores)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    # A custom component written before ``load`` took the typed config rebuilds it with
    # ``cls(**config)``: these two keep that working, with a DeprecationWarning.
    def keys(self) -> list[str]:
        """Deprecated: the parameter names, so that ``cls(**config)`` still works in an old
        ``load``; build the component with ``cls(config)`` instead."""
        warnings.warn(
            f"{type(self).__qualname__}: Component.load receives the typed Config now; build "
            "the component with cls(config) rather than cls(**config)",
            DeprecationWarning, stacklevel=2,
        )
        return [f.name for f in dataclasses.fields(self)]

    def __getitem__(self, name: str) -> Any:
        """Deprecated: a parameter by name, for ``cls(**config)`` (see ``keys``)."""
        if name not in field_names(type(self)):
            raise KeyError(name)
        return getattr(self, name)


def config_fields(config_class: type[ComponentConfig]) -> dict[str, dataclasses.Field[Any]]:
    """The parameters of a config class by name, in declaration order."""
    return {f.name: f for f in dataclasses.fields(config_class) if f.init}


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def field_names(config_class: type[ComponentConfig]) -> frozenset[str]:
    names = _FIELD_NAMES.get(config_class)
    if names is None:
        names = _FIELD_NAMES[config_class] = frozenset(config_fields(config_class))
    return names


def build_config(config_class: type[ComponentConfig], params: dict[str, Any]) -> ComponentConfig:
    """``config_class(**params)``; an unknown key (with the closest name), a missing required
    one, a wrong type, a value out of bounds and a failed ``validate`` are ConfigErrors."""
    known = config_fields(config_class)
    for key in params:
        if key not in known:
            allowed = ", ".join(sorted(known)) or "none"
            raise ConfigError(
                f"unknown parameter {str(key)[:80]!r}{closest(str(key), known)}; allowed: {allowed}"
            )
    for key, f in known.items():
        if key not in params and f.default is f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"parameter '{key}' is required")
    return config_class(**params)


def check_fields(config: ComponentConfig) -> None:
    """Raise ConfigError for a field that does not fit its type hint or its bounds."""
    hints = _type_hints(type(config))
    bounds = _bounds(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        hint = hints.get(f.name, Any)
        if not type_matches(value, hint):
            raise ConfigError(f"parameter '{f.name}' must be {describe(hint)}, got {value!r}")
        low, high = bounds.get(f.name, (None, None))
        for number in _numbers(value):
            if (low is not None and number < low) or (high is not None and number > high):
                allowed = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
                raise ConfigError(
                    f"parameter '{f.name}' = {value!r} is out of range; allowed {allowed}"
                )


def _type_hints(config_class: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(config_class)
    except Exception:  # an unresolvable annotation in a custom component: skip type checks
        return {}


def _bounds(config_class: type) -> dict[str, Bounds]:
    """Each field's bounds from its most derived declaration that gives any."""
    bounds: dict[str, Bounds] = {}
    for klass in reversed(config_class.__mro__):
        for f in vars(klass).get("__dataclass_fields__", {}).values():
            if "bounds" in f.metadata:
                bounds[f.name] = f.metadata["bounds"]
    return bounds


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
    if hint is Any:
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
