"""Sort a model's entity errors on a test set into type, boundary, spurious and missed ones.

    .venv/bin/python -m benchmarks.studies.entity_boundaries MODEL.tar.gz TEST.md

A boundary error is a gold entity that a prediction overlaps without the same span; it is named
by how the prediction differs (longer or shorter, on which side; split over several; ``+type``
when the type differs too). Also counts how many words at a disputed edge WordPiece splits
into several sub-tokens, against the share among all words, and prints up to 12 examples a kind.
"""

from __future__ import annotations

import collections
import json
import sys

from nlu_engine.assembly.model import Model
from nlu_engine.featurizers.dense.bert import WordPiece
from nlu_engine.featurizers.dense.language_model import resolve_weights
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from nlu_engine.training_data import load_data

Span = tuple[str, int, int]


def kind_of(gold: Span, overlapping: list[Span]) -> tuple[str, Span | None]:
    """The error's kind and the prediction it is judged against."""
    if not overlapping:
        return "missed", None
    if any(q[1:] == gold[1:] for q in overlapping):
        return "type", next(q for q in overlapping if q[1:] == gold[1:])
    same = [q for q in overlapping if q[0] == gold[0]]
    q = (same or overlapping)[0]
    if len(overlapping) > 1:
        kind = "split"
    elif q[1] <= gold[1] and q[2] >= gold[2]:
        kind = "longer" + ("_left" if q[1] < gold[1] else "") + ("_right" if q[2] > gold[2] else "")
    elif q[1] >= gold[1] and q[2] <= gold[2]:
        kind = "shorter" + ("_left" if q[1] > gold[1] else "") + ("_right" if q[2] < gold[2] else "")
    else:
        kind = "shifted"
    return kind + ("" if same else "+type"), q


def main(argv: list[str]) -> int:
    model, test = Model.load(argv[0]), load_data(argv[1])
    messages = test.messages
    results = model.parse_batch([m.text for m in messages])
    WhitespaceTokenizer().process(messages)
    wordpiece = WordPiece(resolve_weights(None))
    kinds: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[str]] = collections.defaultdict(list)
    edges = split_edges = words = split_words = 0
    for message, result in zip(messages, results, strict=True):
        tokens = message.tokens["text"]
        pieces = wordpiece.split_words([[t.text for t in tokens]])[0]
        words, split_words = words + len(pieces), split_words + sum(len(p) > 1 for p in pieces)
        gold = [(e["entity"], e["start"], e["end"]) for e in message.entities]
        predicted = [(e["entity"], e["start"], e["end"]) for e in result["entities"]
                     if e.get("extractor") == "DIETClassifier"]
        for g in gold:
            if g in predicted:
                continue
            kind, q = kind_of(g, [q for q in predicted if q[1] < g[2] and g[1] < q[2]])
            kinds[kind] += 1
            text = message.text
            shown = f"{q[0]} {text[q[1]:q[2]]!r}" if q else "-"
            examples[kind].append(f"{text} | gold {g[0]} {text[g[1]:g[2]]!r} | predicted {shown}")
            if q and kind not in ("type", "missed"):
                for a, b in ((g[1], q[1]), (g[2], q[2])):
                    low, high = min(a, b), max(a, b)
                    inside = [i for i, t in enumerate(tokens) if t.start >= low and t.end <= high]
                    edges += len(inside)
                    split_edges += sum(len(pieces[i]) > 1 for i in inside)
        for q in predicted:
            if not any(q[1] < g[2] and g[1] < q[2] for g in gold):
                kinds["spurious"] += 1
                examples["spurious"].append(f"{message.text} | predicted {q[0]} {message.text[q[1]:q[2]]!r}")
    print(json.dumps({"kinds": dict(kinds.most_common()), "edge_words": edges,
                      "edge_words_split_by_wordpiece": split_edges,
                      "share_of_all_words_split": round(split_words / max(words, 1), 4)}))
    for kind, lines in examples.items():
        print(f"== {kind}")
        for line in lines[:12]:
            print("  ", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
