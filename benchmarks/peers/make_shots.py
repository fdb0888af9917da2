"""Draw an N-shot training file from a Rasa 1.x Markdown NLU file, as the shared few-shot files are made.

    python3 -m benchmarks.peers.make_shots [OUT] [--shots 30] [--seed 42] [--train TRAIN.md]

Like ``../shared/datasets/fewshot/NLU-Eval-KFold_1-{5,10}shot.md``: N distinct examples of each
intent of ``NLU-Evaluation-Data/KFold_1/train.md`` (default), a seeded draw (one
``random.Random(seed)`` drawing ``sample(distinct, N)`` for each intent in file order; an intent
with fewer distinct examples keeps them all, with a warning), the examples in draw order with
their entity annotations as written, then every other section (``## regex:``, ``## synonym:``,
``## lookup:``) kept verbatim, one blank line between sections. The exact seed and draw of the
shared 5/10-shot files are not recorded, so a 5-shot draw here is a different sample of the same
kind. OUT defaults to ``/tmp/fewshot/NLU-Eval-KFold_1-30shot.md``; the data sets' README asks
that they not be copied into the project, so an OUT inside the project is refused. Pure stdlib.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TRAIN = ROOT.parent / "shared" / "datasets" / "NLU-Evaluation-Data" / "KFold_1" / "train.md"
DEFAULT_OUT = Path("/tmp/fewshot/NLU-Eval-KFold_1-30shot.md")


def read_sections(path: Path) -> list[tuple[str, list[str]]]:
    """The file's ``## `` sections in order: (heading line, its lines without trailing blanks)."""
    sections: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            sections.append((line.rstrip(), []))
        elif sections:
            sections[-1][1].append(line.rstrip())
    for _, lines in sections:
        while lines and not lines[-1].strip():
            lines.pop()
    return sections


def examples(lines: list[str]) -> list[str]:
    """The distinct ``- example`` lines of an intent section, in file order."""
    items = [line.strip()[2:].strip() for line in lines if line.strip().startswith(("- ", "* ", "+ "))]
    return list(dict.fromkeys(item for item in items if item))


def draw(sections: list[tuple[str, list[str]]], shots: int, seed: int) -> str:
    """The N-shot file's text: intent sections with their drawn examples, then the others as is."""
    rng = random.Random(seed)
    intents, others = [], []
    for heading, lines in sections:
        if heading.startswith("## intent:"):
            distinct = examples(lines)
            if len(distinct) < shots:
                print(f"warning: {heading[3:]} has {len(distinct)} distinct examples, fewer than "
                      f"{shots}; keeping them all", file=sys.stderr)
            chosen = rng.sample(distinct, min(shots, len(distinct)))
            intents.append("\n".join([heading, *(f"- {text}" for text in chosen)]))
        else:
            others.append("\n".join([heading, *lines]))
    return "\n\n".join(intents + others) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    parser.add_argument("--shots", type=int, default=30, help="examples per intent (default 30)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--train", type=Path, default=DEFAULT_TRAIN, help="a Rasa 1.x Markdown file")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if out.is_relative_to(ROOT):
        parser.error(f"{args.out} is inside the project: write the data outside it (e.g. /tmp)")
    text = draw(read_sections(args.train), args.shots, args.seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    count = sum(line.startswith("## intent:") for line in text.splitlines())
    print(f"wrote {out}: {count} intents, up to {args.shots} examples each (seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
