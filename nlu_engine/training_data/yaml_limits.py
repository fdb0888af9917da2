"""YAML read with a bound on what its aliases expand to.

An anchor used many times, each use holding more anchors (``&a [*b, *b, ...]``, the "billion
laughs"), composes into a small node graph that expands to billions of values: PyYAML builds it
cheaply, but the first ``str()`` of it in a message, a ``json.dumps`` into an archive or a walk
over it never ends. The readers of training data, domains and configs compose the document first
and refuse one whose nodes, counted as often as aliases repeat them, pass
:data:`MAX_EXPANDED_NODES` (more than any hand-written or generated file holds).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError

MAX_EXPANDED_NODES = 1_000_000
Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def expanded_size(root: yaml.Node, limit: int = MAX_EXPANDED_NODES) -> int:
    """How many nodes the document holds once its aliases are expanded (at most ``limit + 1``).
    Each distinct node is visited once, depth first; a node inside itself (a recursive alias)
    expands without end: ``limit + 1``."""
    sizes: dict[int, int] = {}
    started: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(c)] for c in _children(node)))
        elif key not in started:
            started.add(key)
            children = _children(node)
            if any(id(c) in started and id(c) not in sizes for c in children):
                return limit + 1  # started, not finished: an ancestor of this node
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in started)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def check_expansion(root: yaml.Node) -> None:
    """A ``yaml`` error (with the document's line) when its aliases expand past the bound."""
    if expanded_size(root) > MAX_EXPANDED_NODES:
        raise ConstructorError(None, None, f"its aliases expand to more than {MAX_EXPANDED_NODES:,} "
                               "values; write the values out or use fewer aliases", root.start_mark)


def checked_root(loader: Any) -> Any:
    """The loader's single document node (None for an empty document), refused as an alias
    bomb before anything is built from it (a ``yaml.YAMLError``, as for bad syntax)."""
    root = loader.get_single_node()
    if root is not None:
        check_expansion(root)
    return root


def safe_load(content: str) -> Any:
    """``yaml.safe_load`` that refuses an alias bomb (a ``yaml.YAMLError``, as for bad syntax)."""
    loader = Loader(content)
    try:
        root = checked_root(loader)
        return None if root is None else loader.construct_document(root)
    finally:
        loader.dispose()
