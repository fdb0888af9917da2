"""No runtime import goes from a lower pipeline stage to a higher one.

Every module under ``nlu_engine/`` is parsed with ``ast``; each import statement (at module level
or inside a function, but not under ``if TYPE_CHECKING:``) must name a module of the same stage
or of a stage below. A new module or folder needs a place in :data:`STAGES` first. Imports by
string (the registry's table, ``importlib.import_module``) are not statements and are not seen:
the registry sits above the components it names for that reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nlu_engine"

#: from the bottom up; a module belongs to the stage of the longest entry that prefixes its name.
#: Each top-level folder of the package is one entry (``test_stages_and_folders_agree``); the
#: contract room is ordered inside by its own modules, the assembly room is one stage.
CONTRACT = ("nlu_engine.contract",)
STAGES: list[tuple[str, tuple[str, ...]]] = [
    # the contract the components build on: errors and utilities, messages, training data, the bases
    ("contract: foundation", ("nlu_engine.contract", "nlu_engine.contract.errors", "nlu_engine.contract.npz",
                              "nlu_engine.contract.paths", "nlu_engine.contract.threads",
                              "nlu_engine.contract.allocator")),
    ("contract: message", ("nlu_engine.contract.message", "nlu_engine.contract.training_data")),
    ("contract: component", ("nlu_engine.contract.component",)),
    ("numeric kernels", ("nlu_engine.nn",)),
    ("training data readers", ("nlu_engine.training_data",)),
    ("model loaders", ("nlu_engine.loaders",)),
    ("tokenizers", ("nlu_engine.tokenizers",)),
    ("featurizers", ("nlu_engine.featurizers",)),
    ("classifiers/extractors", ("nlu_engine.classifiers", "nlu_engine.extractors")),
    # the assembly over the components: the registry names every component by string, the config
    # validates against them, then the pipeline, the archive, fine-tuning and the model API
    ("assembly", ("nlu_engine.assembly",)),
    # corpus files parsed with a model: formats, output, in-process and local-process runs
    ("corpus", ("nlu_engine.corpus",)),
    # scores trained models: metrics, experiments, reports and benchmark runs
    ("evaluation", ("nlu_engine.evaluation",)),
    # the faces: HTTP and Ray (whose replicas serve the HTTP app)
    ("server/distributed", ("nlu_engine.server", "nlu_engine.distributed")),
    # the review page over the server's message log: only the command line sits above it
    ("review", ("nlu_engine.review",)),
    # the command line and the package itself (``nlu_engine.train``, ``load``)
    ("cli", ("nlu_engine.cli", "nlu_engine.__main__", "nlu_engine")),
]
#: the top-level entries of the package that are not stages' folders
NOT_FOLDERS = frozenset({"nlu_engine", "nlu_engine.__main__"})
#: names of the package root any module may import: constants, not the API the root holds
ROOT_CONSTANTS = frozenset({"__version__", "MINIMUM_COMPATIBLE_VERSION"})


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stage_of(module: str) -> int | None:
    """The index of the module's stage in :data:`STAGES`, or None when it has no place."""
    matches = [  # (length of the entry, stage index); the root holds itself only, not the package
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(STAGES)
        for prefix in prefixes
        if module == prefix or (prefix != "nlu_engine" and module.startswith(prefix + "."))
    ]
    return max(matches)[1] if matches else None


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


class RuntimeImports(ast.NodeVisitor):
    """(line, imported module) for every import statement outside ``if TYPE_CHECKING:``."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[tuple[int, str]] = []

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
        if name != "TYPE_CHECKING":
            self.generic_visit(node)
            return
        for child in node.orelse:  # the else branch runs
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.extend((node.lineno, alias.name) for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:  # relative: from the module's package, up level - 1 packages
            parts = self.package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        if base == "nlu_engine" and {alias.name for alias in node.names} <= ROOT_CONSTANTS:
            return
        for alias in node.names:  # `from package import submodule` imports the submodule
            full = f"{base}.{alias.name}"
            self.found.append((node.lineno, full if is_module(full) else base))


def runtime_imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    visitor = RuntimeImports(module, is_package)
    visitor.visit(ast.parse(source))
    return [(line, name) for line, name in visitor.found if name.split(".")[0] == "nlu_engine"]


def violations(source: str, module: str, where: str, is_package: bool = False) -> list[str]:
    own = stage_of(module)
    assert own is not None, f"{module} has no place in STAGES"
    found = []
    for line, imported in runtime_imports(source, module, is_package):
        target = stage_of(imported)
        if target is not None and target > own:
            found.append(f"{where}:{line}: {module} ({STAGES[own][0]}) imports {imported} "
                         f"({STAGES[target][0]})")
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_stage() -> None:
    unplaced = [module_name(p) for p in MODULES if stage_of(module_name(p)) is None]
    assert not unplaced, f"give these modules a stage in tests/test_layering.py: {unplaced}"


def test_stages_and_folders_agree() -> None:
    """The package root holds folders only (and ``__main__``): each top-level folder is named by
    a stage, and each stage's entries are top-level folders or modules inside the contract room."""
    top_level = {f"nlu_engine.{p.stem}" for p in PACKAGE.iterdir()
                 if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    loose = sorted(m for m in top_level - NOT_FOLDERS if not (PACKAGE / m.split(".")[1]).is_dir())
    assert not loose, f"the package root should hold folders only; move these into their stage: {loose}"
    named = {prefix for _, prefixes in STAGES for prefix in prefixes}
    unnamed = sorted(top_level - NOT_FOLDERS - named)
    assert not unnamed, f"folders with no stage: {unnamed}"
    inner = sorted(p for p in named - top_level - NOT_FOLDERS if not p.startswith(CONTRACT[0] + "."))
    assert not inner, f"stages should name whole folders, not modules inside them: {inner}"


def test_every_stage_entry_names_a_module() -> None:
    stale = [prefix for _, prefixes in STAGES for prefix in prefixes if not is_module(prefix)]
    assert not stale, f"STAGES names modules that do not exist: {stale}"


def test_no_runtime_import_goes_up_a_stage() -> None:
    found = []
    for path in MODULES:
        found += violations(path.read_text(encoding="utf-8"), module_name(path),
                            str(path.relative_to(ROOT)), is_package=path.name == "__init__.py")
    assert not found, "imports from a lower stage to a higher one:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from nlu_engine.assembly.model import Model\n", ["nlu_engine.assembly.model"]),
        ("def f():\n    import nlu_engine.cli.main\n", ["nlu_engine.cli.main"]),
        ("from nlu_engine.featurizers.dense import spacy_featurizer\n",
         ["nlu_engine.featurizers.dense.spacy_featurizer"]),
        ("from ..featurizers.sparse import regex\n", ["nlu_engine.featurizers.sparse.regex"]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
         "    from nlu_engine.assembly.model import Model\n", []),
        ("import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n"
         "    import nlu_engine.assembly.pipeline\n",
         ["nlu_engine.assembly.pipeline"]),
        ("from nlu_engine import __version__\nfrom nlu_engine.contract.message import Message\n", []),
        ("from nlu_engine import train\n", ["nlu_engine"]),
    ],
)
def test_the_check_sees_runtime_imports_only(source: str, expected: list[str]) -> None:
    where = "nlu_engine/tokenizers/example.py"
    found = violations(source, "nlu_engine.tokenizers.example", where)
    assert [line.split(" imports ")[1].split(" (")[0] for line in found] == expected


@pytest.mark.parametrize(
    ("module", "source", "allowed"),
    [
        ("nlu_engine.server.app", "from nlu_engine.review.app import create_app\n", False),
        ("nlu_engine.distributed.serving", "from nlu_engine.review.grouping import normalise\n", False),
        ("nlu_engine.review.app", "from nlu_engine.cli.main import main\n", False),
        ("nlu_engine.review.app", "from nlu_engine.server.message_store import open_store\n", True),
        ("nlu_engine.cli.review", "from nlu_engine.review.app import create_app\n", True),
    ],
)
def test_the_review_page_has_only_the_command_line_above_it(module: str, source: str, allowed: bool) -> None:
    where = module.replace(".", "/") + ".py"
    assert (violations(source, module, where) == []) is allowed
