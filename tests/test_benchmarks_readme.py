"""``benchmarks/README.md`` names every script in ``benchmarks/``, so none is left undocumented."""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_every_benchmark_script_is_named_in_the_readme() -> None:
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w./]+?)(?:\.py|\.sh)?`", readme))
    scripts = [path for path in sorted(BENCHMARKS.glob("*/*")) if path.suffix in (".py", ".sh")
               and path.name != "__init__.py"]
    assert scripts, "no benchmark scripts found"
    missing = [str(path.relative_to(BENCHMARKS)) for path in scripts
               if path.stem not in named and f"benchmarks/{path.relative_to(BENCHMARKS)}" not in named]
    assert not missing, f"name these scripts in benchmarks/README.md: {missing}"
