"""Intent and entity metrics of ``nlu-engine test``.

Everything here is a pure function over gold ``Message`` objects (``intent`` and ``entities``
hold the annotations) and parse results (Rasa's ``/model/parse`` JSON, one dict per message, in
the same order). ``reports`` writes the results to disk; ``experiments`` trains the models whose
parse results are scored here.

Intents (as Rasa's ``rasa test nlu``):
    Examples without a gold intent are left out. An ``nlu_fallback`` prediction is undone first
    (Rasa's ``undo_fallback_prediction``), and the fallbacks are counted beside the scores
    (``IntentEvaluation.fallback_summary``). A missing prediction (``None``) is the label ``""``.
    ``intent_report.json`` is scikit-learn's ``classification_report`` dict over the gold
    intents (per intent ``precision``, ``recall``, ``f1-score``, ``support``), ``accuracy``,
    ``micro avg`` (scikit-learn's when a predicted label is no gold intent, else the accuracy,
    as Rasa completes it), ``macro avg`` and ``weighted avg`` (over the gold intents), and per
    intent ``confused_with``: the up to three most frequent wrong predictions with their counts
    (Rasa's rule: the three largest cells of the intent's confusion-matrix row, the diagonal
    included, then the diagonal dropped).

Entities, per extractor (the ``extractor`` field of each predicted entity):
    * token level (Rasa): each token of the parse result's ``text_tokens`` gets the label of the
      entity overlapping it most (``type``, or ``type.group.role`` when those are set), else
      ``no_entity``; the report is ``classification_report`` over all tokens with the labels of
      the gold tokens other than ``no_entity`` (its averages leave ``no_entity`` out; its
      ``accuracy`` counts every token, as Rasa's), plus ``confused_with``.
    * ``span_exact`` (conlleval): a predicted entity is correct when an unmatched gold entity has
      the same type and exactly the same character span.
    * ``span_overlap`` (HERMIT, as the DIET paper scores NLU-Evaluation-Data): a predicted entity
      is correct when it is matched to a gold entity of the same type whose character span
      overlaps it; each gold and each predicted entity is matched at most once (a maximum
      matching, per message and type).
    Span reports list every type seen in gold or predictions with ``precision``, ``recall``,
    ``f1-score``, ``support`` (gold count), ``predicted`` and ``correct``; ``micro avg`` pools the
    counts, ``macro avg`` averages over the types that have gold entities.
    * ``confidence`` (``entity_confidence``): the calibration of ``confidence_entity`` against
      exact-span correctness, and what a threshold on it filters.

Zero divided by zero is 0.0 everywhere (scikit-learn's default). F1 is ``2·correct / (gold +
predicted)``, which equals the harmonic mean of precision and recall (``bilou.f1_score``, which
DIET's training reports too). Tag sequences are chunked by ``bilou.conlleval_spans``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nlu_engine.classifiers.calibration import OUT_OF_SCOPE
from nlu_engine.classifiers.fallback import ThresholdAdvice
from nlu_engine.contract.message import Message
from nlu_engine.evaluation.confidence import (
    ConfidenceEvaluation,
    evaluate_confidence,
    predicted_intent,
    undo_fallback,
)
from nlu_engine.evaluation.entity_confidence import (
    EntityConfidenceEvaluation,
    evaluate_entity_confidence,
    span_correctness,
)
from nlu_engine.evaluation.labels import (
    LabelEvaluation,
    add_confused_with,
    classification_report,
    complete_report,
    confusion_matrix,
    mean,
    order_report,
    prf,
    ratio,
)
from nlu_engine.evaluation.responses import ResponseSelectionEvaluation, evaluate_response_selection
from nlu_engine.evaluation.thresholds import evaluate_threshold
from nlu_engine.training_data.bilou import NO_ENTITY_LABEL, OUTSIDE_TAG, conlleval_spans

#: extractors whose entities Rasa leaves out of the evaluation (they are not trained on the data)
PRETRAINED_EXTRACTORS = frozenset({"DucklingEntityExtractor", "SpacyEntityExtractor"})
#: components that change entities but do not find them
ENTITY_PROCESSORS = frozenset({"EntitySynonymMapper", "ResponseSelector"})
UNKNOWN_EXTRACTOR = "unknown_extractor"
SPAN_EXACT = "span_exact"
SPAN_OVERLAP = "span_overlap"
FALLBACK_THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # share of messages below each

#: (type, start, end) with ``end`` exclusive
Span = tuple[str, int, int]


# --- intents -----------------------------------------------------------------------------------
@dataclass
class IntentEvaluation(LabelEvaluation):
    """The intent side of an evaluation (fallback predictions undone, and counted)."""

    #: messages the FallbackClassifier turned into nlu_fallback
    num_fallbacks: int = 0
    #: correct predictions that did not fall back (the accuracy as a bot sees it)
    num_correct_kept: int = 0

    def fallback_summary(self) -> dict[str, Any]:
        """The fallback rate, the accuracy counting fallbacks as errors, and the share of
        messages whose confidence is below each of :data:`FALLBACK_THRESHOLDS`."""
        total = self.num_examples
        confidences = self.correct_confidences + self.wrong_confidences
        return {
            "num_fallbacks": self.num_fallbacks,
            "fallback_rate": ratio(self.num_fallbacks, total),
            "accuracy_with_fallback": ratio(self.num_correct_kept, total),
            "below_threshold": {f"{t:.1f}": ratio(sum(c < t for c in confidences), total)
                                for t in FALLBACK_THRESHOLDS},
        }


def evaluate_intents(
    golds: Sequence[Message], results: Sequence[Mapping[str, Any]]
) -> IntentEvaluation | None:
    """Intent report, confusion matrix, errors and successes; None without gold intents."""
    targets: list[str] = []
    predictions: list[str] = []
    errors: list[dict[str, Any]] = []
    successes: list[dict[str, Any]] = []
    correct_confidences: list[float] = []
    wrong_confidences: list[float] = []
    fallbacks = correct_kept = 0
    for gold, given in zip(golds, results, strict=True):
        if not gold.intent:
            continue
        result, fell_back = undo_fallback(given)
        fallbacks += fell_back
        name, confidence = predicted_intent(result)
        correct_kept += name == gold.intent and not fell_back
        targets.append(gold.intent)
        predictions.append(name if name is not None else "")
        row = {"text": gold.text, "intent": gold.intent,
               "intent_prediction": {"name": name, "confidence": confidence}}
        if name == gold.intent:
            successes.append(row)
            correct_confidences.append(confidence)
        else:
            errors.append(row)
            wrong_confidences.append(confidence)
    if not targets:
        return None
    report = classification_report(targets, predictions, sorted(set(targets)))
    report.setdefault("accuracy", ratio(len(successes), len(targets)))
    labels, matrix = confusion_matrix(targets, predictions)
    add_confused_with(report, labels, matrix)
    return IntentEvaluation(
        report=order_report(complete_report(report)), labels=labels, matrix=matrix, errors=errors,
        successes=successes, correct_confidences=correct_confidences,
        wrong_confidences=wrong_confidences, num_fallbacks=fallbacks, num_correct_kept=correct_kept,
    )


# --- tokens and entity labels ------------------------------------------------------------------
def result_tokens(result: Mapping[str, Any]) -> list[tuple[int, int]]:
    """Token character spans of a parse result (``text_tokens``; whitespace split without it)."""
    spans = result.get("text_tokens")
    if spans is not None:
        return [(int(start), int(end)) for start, end in spans]
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", str(result.get("text", "")))]


def _attribute_label(token: tuple[int, int], entities: Sequence[Mapping[str, Any]], key: str) -> str:
    best: Mapping[str, Any] | None = None
    best_overlap = 0
    for entity in entities:
        overlap = min(token[1], int(entity["end"])) - max(token[0], int(entity["start"]))
        if overlap > best_overlap:
            best, best_overlap = entity, overlap
    if best is None or best.get(key) in (None, ""):
        return OUTSIDE_TAG
    return str(best[key])


def token_labels(
    tokens: Sequence[tuple[int, int]], entities: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Rasa's label per token: the entity overlapping it most (the first on a tie) as
    ``type[.group][.role]`` (Rasa's ``_concat_entity_labels``), or ``no_entity``."""
    labels = []
    for token in tokens:
        parts = [_attribute_label(token, entities, key) for key in ("entity", "group", "role")]
        parts = [part for part in parts if part != OUTSIDE_TAG]
        labels.append(".".join(parts) if parts else NO_ENTITY_LABEL)
    return labels


# --- spans -------------------------------------------------------------------------------------
def entity_spans(entities: Iterable[Mapping[str, Any]]) -> list[Span]:
    """``(type, start, end)`` of each entity dict."""
    return [(str(e["entity"]), int(e["start"]), int(e["end"])) for e in entities]


def exact_matches(gold: Sequence[Span], predicted: Sequence[Span]) -> Counter[str]:
    """Correct predictions per type: identical spans, each gold span used once."""
    common = Counter(gold) & Counter(predicted)
    counts: Counter[str] = Counter()
    for (label, _, _), n in common.items():
        counts[label] += n
    return counts


def overlap_matching(gold: Sequence[Span], predicted: Sequence[Span]) -> list[tuple[int, int]]:
    """Pairs ``(gold_index, predicted_index)`` of same-type spans that overlap, each index used at
    most once, as many pairs as possible (augmenting paths; preferring earlier spans)."""
    def overlaps(a: Span, b: Span) -> bool:
        return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]

    by_position = sorted(range(len(predicted)), key=lambda j: predicted[j][1:])
    options = [[j for j in by_position if overlaps(g, predicted[j])] for g in gold]
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in options[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in sorted(range(len(gold)), key=lambda i: gold[i][1:]):
        assign(i, set())
    return sorted((i, j) for j, i in owner.items())


def overlap_matches(gold: Sequence[Span], predicted: Sequence[Span]) -> Counter[str]:
    """Correct predictions per type under overlap matching."""
    return Counter(gold[i][0] for i, _ in overlap_matching(gold, predicted))


def span_report(
    gold: Sequence[Sequence[Span]], predicted: Sequence[Sequence[Span]], mode: str = "exact"
) -> dict[str, Any]:
    """Per-type and averaged scores over messages (``mode`` ``"exact"`` or ``"overlap"``)."""
    if mode not in ("exact", "overlap"):
        raise ValueError(f"mode must be 'exact' or 'overlap', not {mode!r}")
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold messages but {len(predicted)} predicted")
    match = exact_matches if mode == "exact" else overlap_matches
    gold_counts: Counter[str] = Counter()
    predicted_counts: Counter[str] = Counter()
    correct_counts: Counter[str] = Counter()
    for gold_spans, predicted_spans in zip(gold, predicted, strict=True):
        gold_counts.update(s[0] for s in gold_spans)
        predicted_counts.update(s[0] for s in predicted_spans)
        correct_counts.update(match(gold_spans, predicted_spans))
    report: dict[str, Any] = {}
    for label in sorted(set(gold_counts) | set(predicted_counts)):
        report[label] = {
            **prf(correct_counts[label], gold_counts[label], predicted_counts[label]),
            "support": gold_counts[label],
            "predicted": predicted_counts[label],
            "correct": correct_counts[label],
        }
    total_gold, total_predicted = sum(gold_counts.values()), sum(predicted_counts.values())
    total_correct = sum(correct_counts.values())
    report["micro avg"] = {
        **prf(total_correct, total_gold, total_predicted),
        "support": total_gold, "predicted": total_predicted, "correct": total_correct,
    }
    rows = [report[label] for label in sorted(gold_counts)]
    report["macro avg"] = {
        **{key: mean([row[key] for row in rows]) for key in ("precision", "recall", "f1-score")},
        "support": total_gold,
    }
    return report


def chunk_report(
    gold_tags: Sequence[Sequence[str]], predicted_tags: Sequence[Sequence[str]]
) -> dict[str, Any]:
    """conlleval's scores over tag sequences (one per sentence): exact chunks of token indices."""
    def spans(tags: Sequence[str]) -> list[Span]:
        return [(label, first, last + 1) for label, first, last in conlleval_spans(tags)]

    return span_report([spans(t) for t in gold_tags], [spans(t) for t in predicted_tags], "exact")


# --- entities ----------------------------------------------------------------------------------
def entity_extractor(entity: Mapping[str, Any]) -> str:
    return str(entity.get("extractor") or UNKNOWN_EXTRACTOR)


def _entity_key(entity: Mapping[str, Any]) -> tuple[str, int, int, str, str]:
    return (str(entity["entity"]), int(entity["start"]), int(entity["end"]),
            str(entity.get("role") or ""), str(entity.get("group") or ""))


@dataclass(kw_only=True)
class EntityEvaluation(LabelEvaluation):
    """The entity scores of one extractor (token labels; spans in the report; the calibration
    of its entities' confidences, None when they have none)."""

    extractor: str
    confidence: EntityConfidenceEvaluation | None = None


def evaluate_entities(
    golds: Sequence[Message], results: Sequence[Mapping[str, Any]], extractor: str
) -> EntityEvaluation:
    """Token-level, exact-span and overlap-span reports of one extractor over all messages.

    A message is an error when its predicted entities (type, span, role, group) differ from the
    gold ones.
    """
    targets: list[str] = []
    predictions: list[str] = []
    gold_spans: list[list[Span]] = []
    predicted_spans: list[list[Span]] = []
    errors: list[dict[str, Any]] = []
    successes: list[dict[str, Any]] = []
    correct_confidences: list[float] = []
    wrong_confidences: list[float] = []
    span_confidences: list[tuple[float | None, bool]] = []
    for gold, result in zip(golds, results, strict=True):
        predicted = [e for e in result.get("entities") or [] if entity_extractor(e) == extractor]
        tokens = result_tokens(result)
        targets.extend(token_labels(tokens, gold.entities))
        predictions.extend(token_labels(tokens, predicted))
        gold_spans.append(entity_spans(gold.entities))
        predicted_spans.append(entity_spans(predicted))
        span_confidences.extend(span_correctness(gold_spans[-1], predicted))
        gold_keys = Counter(_entity_key(e) for e in gold.entities)
        for entity in predicted:
            confidence = entity.get("confidence_entity")
            if isinstance(confidence, int | float):
                key = _entity_key(entity)
                if gold_keys[key] > 0:
                    gold_keys[key] -= 1
                    correct_confidences.append(float(confidence))
                else:
                    wrong_confidences.append(float(confidence))
        row = {"text": gold.text, "entities": [dict(e) for e in gold.entities],
               "predicted_entities": [dict(e) for e in predicted]}
        same = sorted(map(_entity_key, gold.entities)) == sorted(map(_entity_key, predicted))
        (successes if same else errors).append(row)
    gold_labels = sorted(set(targets) - {NO_ENTITY_LABEL})
    report = classification_report(targets, predictions, gold_labels) if gold_labels else {}
    complete_report(report, ratio(sum(map(str.__eq__, targets, predictions)), len(targets)))
    labels, matrix = confusion_matrix(targets, predictions)
    add_confused_with(report, labels, matrix, exclude=[NO_ENTITY_LABEL])
    report[SPAN_EXACT] = span_report(gold_spans, predicted_spans, "exact")
    report[SPAN_OVERLAP] = span_report(gold_spans, predicted_spans, "overlap")
    return EntityEvaluation(
        extractor=extractor, report=report, labels=labels, matrix=matrix, errors=errors,
        successes=successes, correct_confidences=correct_confidences,
        wrong_confidences=wrong_confidences,
        confidence=evaluate_entity_confidence(span_confidences, sum(map(len, gold_spans))),
    )


# --- whole evaluation --------------------------------------------------------------------------
@dataclass
class Evaluation:
    """Everything ``nlu-engine test`` reports for one set of predictions."""

    num_examples: int
    intent: IntentEvaluation | None
    entities: dict[str, EntityEvaluation]
    response_selection: ResponseSelectionEvaluation | None = None
    confidence: ConfidenceEvaluation | None = None
    #: what the model's FallbackClassifier threshold does to the in-scope test messages
    #: (``thresholds.evaluate_threshold``); None without a threshold or in-scope messages
    fallback_threshold: ThresholdAdvice | None = None

    def summary(self) -> dict[str, Any]:
        """The headline numbers (``summary.json``)."""
        summary: dict[str, Any] = {"num_examples": self.num_examples, "intent": None, "entities": {}}
        if self.intent is not None:
            summary["intent"] = {**_label_summary(self.intent.report, self.intent.num_examples,
                                                  len(self.intent.errors)),
                                 **self.intent.fallback_summary()}
        if self.response_selection is not None:
            selection = self.response_selection
            summary["response_selection"] = _label_summary(selection.report, selection.num_examples,
                                                           len(selection.errors))
        if self.confidence is not None:
            summary["confidence"] = self.confidence.summary()
        if self.fallback_threshold is not None:
            summary["fallback_threshold"] = self.fallback_threshold.as_dict()
        for name, entity in self.entities.items():
            report = entity.report
            token = report.get("micro avg") or report.get("accuracy")
            exact, overlap = report[SPAN_EXACT], report[SPAN_OVERLAP]
            summary["entities"][name] = {
                "num_gold": exact["micro avg"]["support"],
                "num_predicted": exact["micro avg"]["predicted"],
                "num_errors": len(entity.errors),
                "token_micro_f1": token["f1-score"] if isinstance(token, dict) else token or 0.0,
                "token_macro_f1": report["macro avg"]["f1-score"] if "macro avg" in report else 0.0,
                **{f"exact_{k}": exact["micro avg"][m] for k, m in _PRF},
                "exact_macro_f1": exact["macro avg"]["f1-score"],
                **{f"overlap_{k}": overlap["micro avg"][m] for k, m in _PRF},
                "overlap_macro_f1": overlap["macro avg"]["f1-score"],
            }
            if entity.confidence is not None:
                summary["entities"][name]["confidence"] = entity.confidence.summary()
        return summary


_PRF = (("precision", "precision"), ("recall", "recall"), ("f1", "f1-score"))


def _label_summary(report: Mapping[str, Any], examples: int, errors: int) -> dict[str, Any]:
    """The headline numbers of an intent or response-selection report."""
    return {
        "num_examples": examples,
        "num_errors": errors,
        "accuracy": report["accuracy"],
        "macro_precision": report["macro avg"]["precision"],
        "macro_recall": report["macro avg"]["recall"],
        "macro_f1": report["macro avg"]["f1-score"],
        "weighted_f1": report["weighted avg"]["f1-score"],
    }


def extractors_in(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """Extractor names of the predicted entities, sorted."""
    return sorted({entity_extractor(e) for r in results for e in r.get("entities") or []})


def evaluate(
    golds: Sequence[Message],
    results: Sequence[Mapping[str, Any]],
    extractors: Iterable[str] | None = None,
    out_of_scope_intent: str = OUT_OF_SCOPE,
    fallback_threshold: float | None = None,
) -> Evaluation:
    """Score parse results against gold messages (same order).

    ``extractors``: the entity extractors to report (default: those found in the predictions,
    without Rasa's pre-trained ones). Extractors are reported when some message has gold entities
    or the extractor predicted some. Response selection is scored when the gold messages hold two
    or more retrieval intents' response keys (``responses``). ``fallback_threshold``: the model's
    FallbackClassifier threshold, whose share of fallbacks is reported (``thresholds``).
    """
    if len(golds) != len(results):
        raise ValueError(f"{len(golds)} gold messages but {len(results)} parse results")
    names = set(extractors) if extractors is not None else set(extractors_in(results))
    names -= PRETRAINED_EXTRACTORS | ENTITY_PROCESSORS
    has_gold_entities = any(m.entities for m in golds)
    predicted_by = set(extractors_in(results))
    entities = {
        name: evaluate_entities(golds, results, name)
        for name in sorted(names)
        if has_gold_entities or name in predicted_by
    }
    threshold = (None if fallback_threshold is None else
                 evaluate_threshold(golds, results, fallback_threshold, out_of_scope_intent))
    return Evaluation(num_examples=len(golds), intent=evaluate_intents(golds, results),
                      entities=entities, response_selection=evaluate_response_selection(golds, results),
                      confidence=evaluate_confidence(golds, results, out_of_scope_intent),
                      fallback_threshold=threshold)
