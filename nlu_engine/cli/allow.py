"""``--allow-component`` and ``--config`` for the commands that load a model.

A model archive is data: loading it imports registered components only. A custom component
class is imported only when the user allows it, by name (``--allow-component``, repeatable) or
by passing the config the model was trained from (``--config``: its custom components).
"""

from __future__ import annotations

from typing import Any


def add_runtime_argument(parser: Any) -> None:
    """Add ``--runtime NAME``: the parse runtime, overriding the one the model records."""
    parser.add_argument(
        "--runtime", default=None, metavar="NAME",
        help="parse runtime: float32, int8, int8_dynamic or bfloat16 (default: the one the model was "
             "trained for)",
    )


def add_arguments(parser: Any, config: bool = True) -> None:
    """Add ``--allow-component NAME`` (repeatable) and, when ``config``, ``-c/--config C``."""
    parser.add_argument(
        "--allow-component", action="append", default=[], metavar="NAME",
        help="let the model import this custom component class (my_package.module.MyComponent); "
             "repeatable. Without it, a model may only use registered components",
    )
    if config:
        parser.add_argument(
            "-c", "--config", default=None, metavar="CONFIG",
            help="the config.yml the model was trained from: allows the custom components it names",
        )


def allowed(names: list[str] | None, config: str | None = None) -> frozenset[str]:
    """The custom component classes the user allows: ``names`` and those ``config`` names."""
    from nlu_engine.assembly.registry import allowed_components

    names = list(names or [])
    if config is not None:
        from nlu_engine.assembly.model import custom_components

        names.extend(custom_components(config))
    return allowed_components(names)
