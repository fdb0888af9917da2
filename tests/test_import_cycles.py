"""No import cycle inside the package.

Every module under ``nlu_engine/`` is parsed with ``ast``; each of its import statements is an
edge of a graph between the package's modules: those that run when it is imported, those under
``if TYPE_CHECKING:`` (a type checker follows them) and those inside functions (an import moved
into a function to dodge a cycle is still the cycle). The graph must have no cycle: two modules
that import each other, directly or round a longer loop, belong in one module or need a third
below both.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_layering import MODULES, ROOT_CONSTANTS, is_module, module_name


class Imports(ast.NodeVisitor):
    """The package's modules a module imports, anywhere in it."""

    def __init__(self, module: str, is_package: bool, exists: Callable[[str], bool]) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.exists = exists
        self.found: set[str] = set()

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:  # relative: from the module's package, up level - 1 packages
            parts = self.package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        if base == "nlu_engine" and {alias.name for alias in node.names} <= ROOT_CONSTANTS:
            return  # the version constants, set before the package root imports anything
        for alias in node.names:  # `from package import submodule` imports the submodule
            full = f"{base}.{alias.name}"
            self.found.add(full if self.exists(full) else base)


def module_imports(
    source: str, module: str, is_package: bool = False, exists: Callable[[str], bool] = is_module
) -> set[str]:
    visitor = Imports(module, is_package, exists)
    visitor.visit(ast.parse(source))
    return {name for name in visitor.found if name.split(".")[0] == "nlu_engine" and name != module}


def import_graph(paths: list[Path]) -> dict[str, set[str]]:
    return {
        module_name(path): module_imports(path.read_text(encoding="utf-8"), module_name(path),
                                          is_package=path.name == "__init__.py")
        for path in paths
    }


@functools.cache
def package_graph() -> dict[str, set[str]]:
    return import_graph(MODULES)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(package_graph())
    described = [" <-> ".join(component) for component in found]
    assert not found, "import cycles (merge the modules or move what both need below them):\n" + \
        "\n".join(described)


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        ({"a": "import nlu_engine.b\n", "b": "from nlu_engine import a\n"},
         [["nlu_engine.a", "nlu_engine.b"]]),
        ({"a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from nlu_engine.b import B\n",
          "b": "from nlu_engine.a import A\n"}, [["nlu_engine.a", "nlu_engine.b"]]),
        ({"a": "from nlu_engine.b import B\n", "b": "from nlu_engine.c import C\n",
          "c": "from nlu_engine.a import A\n"}, [["nlu_engine.a", "nlu_engine.b", "nlu_engine.c"]]),
        ({"a": "from nlu_engine.b import B\n", "b": "def f():\n    from nlu_engine.a import A\n"},
         [["nlu_engine.a", "nlu_engine.b"]]),
        ({"a": "from nlu_engine.b import B\n", "b": "from nlu_engine.c import C\n", "c": ""}, []),
    ],
    ids=["runtime", "type-only", "three-modules", "inside-a-function", "a-chain"],
)
def test_the_check_finds_cycles_of_every_kind_of_import(
    sources: dict[str, str], expected: list[list[str]]
) -> None:
    modules = {f"nlu_engine.{name}" for name in sources}
    graph = {f"nlu_engine.{name}": module_imports(source, f"nlu_engine.{name}", exists=modules.__contains__)
             for name, source in sources.items()}
    assert cycles(graph) == expected


def test_the_graph_covers_the_package() -> None:
    graph = package_graph()
    assert len(graph) == len(MODULES)
    assert "nlu_engine.classifiers.diet.spec" in graph["nlu_engine.classifiers.diet.training"]
