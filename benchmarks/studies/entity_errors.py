"""Where a model's entity errors are: every miss of one extractor sorted into a class, per entity
type and in total, F1 by entity length and by whether the value was seen in training, and the
calibration of ``confidence_entity``.

    .venv/bin/python -m benchmarks.studies.entity_errors MODEL.tar.gz TEST.md [--train TRAIN.md]
        [--extractor DIETClassifier] [--examples 5] [--out errors.json]

The test messages are parsed with the model (``Model.parse_batch``) and each message's gold
entities are paired with the extractor's predictions (the ``extractor`` field), one pairing a
message, in this order (the classes of slot-filling error analyses, as MUC's and SemEval 2013's
correct / incorrect / partial / missing / spurious):

- **exact**: same type and character span;
- **type**: same span, another type (the confusions are listed);
- **boundary**: same type, overlapping spans: *too long* (the prediction covers the gold span and
  more), *too short* (inside it), *shifted* (neither), *merged* (a gold entity whose overlapping
  prediction is already paired with another gold: one prediction over several entities), *split*
  (a prediction whose overlapping gold is already paired: several predictions over one entity);
- **boundary+type**: overlapping spans of different types, same subclasses;
- **missed**: a gold entity no prediction overlaps;
- **spurious**: a prediction that overlaps no gold entity.
"if fixed" is the exact-span micro F1 with the class's errors put right (a pair made exact, a
missed entity found, a spurious one dropped): what the class costs.

What would address each class:

- *type*: the words around the span decide the type (from/to city, the time a reminder is set
  against the time of an event): context the tagger reads beyond the token (DIET's transformer,
  a wider window in ``LexicalSyntacticFeaturizer``, a language model's token states), entity
  roles instead of near-identical types, and more examples of the confused pairs.
- *boundary*: mostly the data's convention at the edges (articles, prepositions, "tomorrow at 5"
  as one span or two): consistent annotation, features of the neighbouring tokens (LSF's window,
  the transformer), and sub-word tokenizers aligned to the annotation; BILOU decoding already
  rules out broken sequences.
- *missed*: values never seen in training (see the "seen" table): what generalises past the
  surface form: lookup tables and regexes as features, pre-trained token features (spaCy
  vectors, a language model), character n-grams; or more epochs on the entity loss.
- *spurious*: the precision side: a threshold on ``confidence_entity`` (the calibration table
  here says which one), and examples with no entity where the model finds one.

Then the calibration of ``confidence_entity`` against exact-span correctness
(``nlu_engine.evaluation.entity_confidence``: ECE over 10 bins, the reliability table, and what
thresholds 0.3-0.9 filter). Markdown tables to stdout; ``--out`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Span = tuple[str, int, int]  # (type, start, end), end exclusive

CLASSES = ("type", "boundary", "boundary+type", "missed", "spurious")
SUBCLASSES = ("too long", "too short", "shifted", "merged", "split")
LENGTHS = ("1", "2", "3", "4+")
SEEN = ("seen as this type", "seen as another type only", "unseen")


@dataclass(frozen=True)
class Outcome:
    """One gold entity, one prediction or a pair of both, and its class."""

    kind: str  # "exact" or one of CLASSES
    detail: str = ""  # a boundary's subclass
    gold: Span | None = None
    predicted: Span | None = None

    @property
    def entity_type(self) -> str:
        """The gold type, or the predicted one when there is no gold entity."""
        span = self.gold or self.predicted
        assert span is not None
        return span[0]


def _overlap(a: Span, b: Span) -> int:
    return max(0, min(a[2], b[2]) - max(a[1], b[1]))


def boundary_detail(gold: Span, predicted: Span) -> str:
    """too long, too short or shifted: how ``predicted``'s span differs from ``gold``'s."""
    if predicted[1] <= gold[1] and predicted[2] >= gold[2]:
        return "too long"
    if predicted[1] >= gold[1] and predicted[2] <= gold[2]:
        return "too short"
    return "shifted"


def classify(gold: Sequence[Span], predicted: Sequence[Span]) -> list[Outcome]:
    """The outcomes of one message: every gold entity and every prediction in exactly one."""
    gold_left, pred_left = list(range(len(gold))), list(range(len(predicted)))
    outcomes: list[Outcome] = []

    def pair(kind: str, test: Any, detail: Any = lambda g, p: "") -> None:
        candidates = sorted((-_overlap(gold[i], predicted[j]), gold[i][1:], predicted[j][1:], i, j)
                            for i in gold_left for j in pred_left if test(gold[i], predicted[j]))
        for *_, i, j in candidates:  # greedy, largest overlap first
            if i in gold_left and j in pred_left:
                gold_left.remove(i)
                pred_left.remove(j)
                outcomes.append(Outcome(kind, detail(gold[i], predicted[j]), gold[i], predicted[j]))

    pair("exact", lambda g, p: g == p)
    pair("type", lambda g, p: g[1:] == p[1:])
    pair("boundary", lambda g, p: g[0] == p[0] and _overlap(g, p) > 0, boundary_detail)
    pair("boundary+type", lambda g, p: _overlap(g, p) > 0, boundary_detail)
    for i in gold_left:  # overlapped only by predictions paired with another gold entity
        near = [p for p in predicted if _overlap(gold[i], p) > 0]
        kind = _alone(gold[i], near, "missed")
        outcomes.append(Outcome(kind, "merged" if near else "", gold[i], near[0] if near else None))
    for j in pred_left:  # overlapping only gold entities paired with another prediction
        near = [g for g in gold if _overlap(g, predicted[j]) > 0]
        outcomes.append(Outcome(_alone(predicted[j], near, "spurious"), "split" if near else "",
                                None, predicted[j]))
    return outcomes


def _alone(span: Span, near: Sequence[Span], nothing: str) -> str:
    """The class of an entity left alone: ``nothing`` when no span of the other side overlaps
    it, else a boundary error, +type when none of those has its type."""
    if not near:
        return nothing
    return "boundary" if any(other[0] == span[0] for other in near) else "boundary+type"


# --- tables --------------------------------------------------------------------------------------
def _f1(correct: int, gold: int, predicted: int) -> float:
    return 2 * correct / (gold + predicted) if gold + predicted else 0.0


def predictions_of(outcomes: Iterable[Outcome]) -> list[Span]:
    """Each prediction once (a *merged* outcome names a prediction paired elsewhere)."""
    return [o.predicted for o in outcomes if o.predicted is not None and o.detail != "merged"]


def class_table(outcomes: Iterable[Outcome], predicted: int | None = None) -> dict[str, Any]:
    """Counts and shares of the error classes (and the boundary subclasses) among ``outcomes``
    (all, or those of one entity type: ``predicted`` then counts the predictions of that type),
    with the exact F1, and, over all outcomes, the exact F1 if each class were put right."""
    outcomes = list(outcomes)
    total = predicted is None
    gold = sum(o.gold is not None for o in outcomes)
    predicted = len(predictions_of(outcomes)) if predicted is None else predicted
    exact = sum(o.kind == "exact" for o in outcomes)
    errors = [o for o in outcomes if o.kind != "exact"]
    table: dict[str, Any] = {"gold": gold, "predicted": predicted, "exact": exact,
                             "errors": len(errors), "f1": _f1(exact, gold, predicted), "classes": {}}
    for kind in CLASSES:
        members = [o for o in errors if o.kind == kind]
        row: dict[str, Any] = {
            "count": len(members), "share": len(members) / len(errors) if errors else 0.0,
            "detail": {d: n for d in SUBCLASSES if (n := sum(o.detail == d for o in members))},
        }
        if total:
            row["f1_if_fixed"] = _fixed_f1(members, exact, gold, predicted)
        table["classes"][kind] = row
    return table


def _fixed_f1(members: Sequence[Outcome], exact: int, gold: int, predicted: int) -> float:
    """Exact F1 with ``members`` put right: a pair or a gold entity alone becomes one correct
    prediction (a lone gold one adds it), a prediction alone is dropped."""
    for o in members:
        if o.gold is not None:
            exact += 1
            predicted += o.detail == "merged" or o.kind == "missed"
        else:
            predicted -= 1
    return _f1(exact, gold, predicted)


def confusions(outcomes: Iterable[Outcome], top: int = 10) -> list[tuple[str, str, int]]:
    """The most frequent (gold type, predicted type) of type errors (same span or overlapping)."""
    counts = Counter((o.gold[0], o.predicted[0]) for o in outcomes if o.gold and o.predicted
                     and o.kind in ("type", "boundary+type") and o.detail != "merged")
    return [(g, p, n) for (g, p), n in counts.most_common(top)]


def bucket_f1(rows: Iterable[tuple[str | None, str | None, bool]], buckets: Sequence[str]) -> dict[str, Any]:
    """Per bucket: gold count, predicted count, exact correct, P, R, F1; each row is (the gold
    entity's bucket or None, the prediction's bucket or None, whether it is an exact pair)."""
    gold: Counter[str] = Counter()
    predicted: Counter[str] = Counter()
    correct: Counter[str] = Counter()
    for g, p, right in rows:
        if g is not None:
            gold[g] += 1
            correct[g] += right
        if p is not None:
            predicted[p] += 1
    return {b: {"gold": gold[b], "predicted": predicted[b], "correct": correct[b],
                "precision": correct[b] / predicted[b] if predicted[b] else 0.0,
                "recall": correct[b] / gold[b] if gold[b] else 0.0,
                "f1": _f1(correct[b], gold[b], predicted[b])} for b in buckets}


def length_bucket(span: Span, tokens: Sequence[tuple[int, int]]) -> str:
    """The span's length in the parse's tokens (those it overlaps), as one of ``LENGTHS``."""
    n = max(1, sum(1 for start, end in tokens if start < span[2] and span[1] < end))
    return str(n) if n < 4 else "4+"


def seen_bucket(span: Span, text: str, seen: Mapping[str, set[str]]) -> str:
    """Whether the span's text (lowercased) was an entity of its type in training, of another
    type only, or never."""
    types = seen.get(text[span[1]:span[2]].strip().lower(), set())
    return SEEN[0] if span[0] in types else SEEN[1] if types else SEEN[2]


def seen_values(messages: Iterable[Any]) -> dict[str, set[str]]:
    """Lowercased entity text -> the types it was annotated with (training messages)."""
    values: dict[str, set[str]] = defaultdict(set)
    for message in messages:
        for entity in message.entities:
            values[message.text[entity["start"]:entity["end"]].strip().lower()].add(str(entity["entity"]))
    return values


# --- the analysis ----------------------------------------------------------------------------------
def _spans(entities: Iterable[Mapping[str, Any]]) -> list[Span]:
    return [(str(e["entity"]), int(e["start"]), int(e["end"])) for e in entities]


def _example(text: str, o: Outcome) -> str:
    def shown(span: Span | None) -> str:
        return f"{span[0]} {text[span[1]:span[2]]!r}" if span else "-"

    detail = f" ({o.detail})" if o.detail else ""
    return f"{text} | gold {shown(o.gold)} | predicted {shown(o.predicted)}{detail}"


def analyse(golds: Sequence[Any], results: Sequence[Mapping[str, Any]], extractor: str,
            seen: Mapping[str, set[str]] | None = None, examples: int = 0) -> dict[str, Any]:
    """Every table of the module's docstring for one extractor's predictions (``results``, parse
    results in the order of the gold messages ``golds``); ``seen``: ``seen_values`` of the
    training data (no "seen" table without it)."""
    from nlu_engine.evaluation.entity_confidence import evaluate_entity_confidence, span_correctness
    from nlu_engine.evaluation.metrics import result_tokens

    everything: list[Outcome] = []
    lengths: list[tuple[str | None, str | None, bool]] = []
    seen_rows: list[tuple[str | None, str | None, bool]] = []
    scored: list[tuple[float | None, bool]] = []
    shown: dict[str, list[str]] = defaultdict(list)
    for gold, result in zip(golds, results, strict=True):
        predicted = [e for e in result.get("entities") or [] if e.get("extractor") == extractor]
        gold_spans, outcomes = _spans(gold.entities), classify(_spans(gold.entities), _spans(predicted))
        everything += outcomes
        scored += span_correctness(gold_spans, predicted)
        tokens = result_tokens(result)
        for o in outcomes:
            own = o.predicted if o.detail != "merged" else None  # a merged one's is paired elsewhere
            right = o.kind == "exact"
            lengths.append((o.gold and length_bucket(o.gold, tokens),
                            own and length_bucket(own, tokens), right))
            if seen is not None:
                seen_rows.append((o.gold and seen_bucket(o.gold, gold.text, seen),
                                  own and seen_bucket(own, gold.text, seen), right))
            if not right and examples and len(shown[o.kind]) < examples:
                shown[o.kind].append(_example(gold.text, o))
    predicted_types = Counter(span[0] for span in predictions_of(everything))
    types = sorted({o.entity_type for o in everything})
    calibration = evaluate_entity_confidence(scored, sum(o.gold is not None for o in everything))
    confidence = None if calibration is None else {**calibration.summary(), "reliability": calibration.bins}
    return {
        "extractor": extractor,
        "total": class_table(everything),
        "types": {t: class_table([o for o in everything if o.entity_type == t], predicted_types[t])
                  for t in types},
        "confusions": confusions(everything),
        "by_length": bucket_f1(lengths, LENGTHS),
        "by_seen": bucket_f1(seen_rows, SEEN) if seen is not None else None,
        "confidence": confidence,
        "examples": dict(shown),
    }


# --- Markdown ----------------------------------------------------------------------------------
def _row(cells: Iterable[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    return [_row(header), "|" + "---|" * len(header), *(_row(r) for r in rows)]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def markdown(analysis: Mapping[str, Any]) -> str:
    """The tables of ``analyse`` in Markdown."""
    total = analysis["total"]
    lines = [f"**{analysis['extractor']}**: {total['gold']} gold entities, {total['predicted']} "
             f"predicted, {total['exact']} exact: exact-span F1 {_pct(total['f1'])}, "
             f"{total['errors']} errors.", ""]
    lines += _table(["class", "errors", "share of errors", "how", "exact F1 if put right"], [
        (kind, row["count"], f"{_pct(row['share'])} %",
         ", ".join(f"{d} {n}" for d, n in row["detail"].items()),
         f"{_pct(row['f1_if_fixed'])} (+{_pct(row['f1_if_fixed'] - total['f1'])})")
        for kind, row in total["classes"].items()])
    lines += ["", *_table(["type", "gold", "predicted", "exact F1", *CLASSES], [
        (t, row["gold"], row["predicted"], _pct(row["f1"]), *(row["classes"][k]["count"] for k in CLASSES))
        for t, row in sorted(analysis["types"].items(), key=lambda kv: -kv[1]["gold"])])]
    if analysis["confusions"]:
        lines += ["", *_table(["gold type", "predicted type", "errors"], analysis["confusions"])]
    for key, title in (("by_length", "tokens"), ("by_seen", "value in training")):
        if analysis.get(key):
            lines += ["", *_table([title, "gold", "predicted", "P", "R", "F1"], [
                (b, r["gold"], r["predicted"], _pct(r["precision"]), _pct(r["recall"]), _pct(r["f1"]))
                for b, r in analysis[key].items()])]
    if analysis.get("confidence"):
        lines += ["", *_confidence_markdown(analysis["confidence"])]
    for kind, rows in analysis.get("examples", {}).items():
        lines += ["", f"{kind}:", *(f"- {row}" for row in rows)]
    return "\n".join(lines)


def _confidence_markdown(confidence: Mapping[str, Any]) -> list[str]:
    lines = [f"`confidence_entity` against exact-span correctness: ECE {confidence['ece']:.4f} over "
             f"{confidence['num_scored']} entities ({confidence['bins']} bins; calibrated confidences "
             f"would measure {confidence['ece_floor']:.4f}, p {confidence['ece_p_value']:.2f}), mean "
             f"confidence {confidence['mean_confidence']:.3f}, share right "
             f"{confidence['precision']:.3f}.", ""]
    lines += _table(["confidence", "entities", "mean confidence", "share right"], [
        (f"{b['low']:.1f}-{b['high']:.1f}", b["count"], f"{b['confidence']:.3f}", f"{b['accuracy']:.3f}")
        for b in confidence["reliability"]])
    header = ["threshold", "wrong removed", "right removed", "P kept", "R kept", "F1 kept"]
    return [*lines, "", *_table(header, [
        (f"{r['threshold']:.1f}", f"{_pct(r['wrong_removed'])} %", f"{_pct(r['right_removed'])} %",
         _pct(r["precision"]), _pct(r["recall"]), _pct(r["f1"])) for r in confidence["thresholds"]])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="model archive")
    parser.add_argument("test", help="test data (Rasa Markdown, YAML or JSON)")
    parser.add_argument("--train", help="training data: adds F1 by whether the value was seen there")
    parser.add_argument("--extractor", default="DIETClassifier", help="default: DIETClassifier")
    parser.add_argument("--examples", type=int, default=0, help="errors shown per class (default: 0)")
    parser.add_argument("--out", help="also write the tables as JSON here")
    parser.add_argument("--uncalibrated", action="store_true",
                        help="drop DIET's map of confidence_entity (entity_calibration): the "
                             "CRF's own confidences of the same network")
    args = parser.parse_args(argv)
    from nlu_engine.assembly.model import Model
    from nlu_engine.training_data import load_data

    golds = load_data(args.test).messages
    if not golds:
        print(f"{args.test}: no test messages", file=sys.stderr)
        return 2
    seen = seen_values(load_data(args.train).messages) if args.train else None
    model = Model.load(args.model)
    if args.uncalibrated:
        from nlu_engine.classifiers.entity_calibration import EntityCalibration

        for component in model.pipeline.components:
            if hasattr(component, "entity_calibration_"):
                component.entity_calibration_ = EntityCalibration()
    results = model.parse_batch([m.text for m in golds])
    analysis = analyse(golds, results, args.extractor, seen, args.examples)
    if not analysis["total"]["gold"] and not analysis["total"]["predicted"]:
        print(f"{args.test}: no gold entities and no predictions of {args.extractor}", file=sys.stderr)
        return 2
    print(markdown(analysis))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"model": args.model, "test": args.test, "train": args.train, **analysis},
                      handle, indent=2, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
