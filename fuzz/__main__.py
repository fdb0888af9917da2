"""``python -m fuzz``: the targets; ``python -m fuzz TARGET [SECONDS]``: fuzz one (default 300 s)."""

from __future__ import annotations

import importlib
import sys

TARGETS = {
    "yaml_data": "Rasa 3 YAML training data (load_file of a .yml)",
    "markdown_data": "Rasa 1 Markdown training data (load_file of a .md)",
    "json_data": "Rasa JSON training data (load_file of a .json)",
    "config": "config.yml (load_config)",
    "archive": "model archives (Model.load, then a parse)",
    "parse_request": "the JSON bodies of /model/parse and /model/parse/batch",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in TARGETS:
        if argv:
            print(f"unknown target '{argv[0]}'", file=sys.stderr)
        print("make fuzz TARGET=<name> [SECONDS=300]; targets:")
        for name, what in TARGETS.items():
            print(f"  {name:15} {what}")
        return 0 if not argv else 2
    try:
        import atheris
    except ImportError:
        print("make fuzz needs atheris: pip install 'nlu-engine[fuzz]'", file=sys.stderr)
        return 1
    name, seconds = argv[0], int(argv[1]) if len(argv) > 1 else 300
    with atheris.instrument_imports(include=["nlu_engine", "yaml", "fuzz"]):
        target = importlib.import_module(f"fuzz.{name}")
    from fuzz.harness import MAX_LEN, fuzz

    fuzz(name, target.test_one_input, target.seeds, seconds, getattr(target, "MAX_LEN", MAX_LEN))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
