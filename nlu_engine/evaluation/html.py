"""``results/index.html``: one self-contained page (no network, plots embedded as base64 PNG).

Sections (each a ``<section>`` with a fixed id, so tests and users can link to them):
``summary`` (headline numbers, cross-validation mean ± std, timings), ``confused-pairs`` (the
most frequent gold → predicted intent confusions), ``intents`` (per-intent scores, sortable),
``errors`` (intent errors with a search box; ``?q=words`` in the URL pre-fills it),
``responses`` (response selection: per response key scores and the errors), ``entities`` (per
extractor: per-type token, exact-span and overlap-span scores, the calibration of the entity
confidences with what a threshold on them filters, and the entity errors, searchable) and
``plots``. The summary shows the fallback rate beside the intent scores, which
undo the fallback as Rasa's do. When the page has loaded, ``<body>`` gets ``data-ready="1"``
and ``data-images-loaded`` (the number of images that decoded). The style, the script and the
small builders are ``html_page``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nlu_engine.evaluation.html_page import (
    card,
    esc,
    image_tag,
    label_text,
    num,
    page,
    search_box,
    slug,
    table,
)
from nlu_engine.evaluation.labels import AVERAGES, most_confused_pairs
from nlu_engine.evaluation.metrics import SPAN_EXACT, SPAN_OVERLAP, Evaluation


# --- the test report ---------------------------------------------------------------------------
def _summary_section(summary: Mapping[str, Any]) -> str:
    cards = []
    intent = summary.get("intent")
    if intent:
        cards += [
            card(f"{intent['accuracy']:.4f}", "intent accuracy"),
            card(f"{intent['macro_f1']:.4f}", "intent macro F1"),
            card(f"{intent['weighted_f1']:.4f}", "intent weighted F1"),
            card(f"{intent['num_errors']} / {intent['num_examples']}", "intent errors / examples"),
        ]
        if "fallback_rate" in intent:
            cards += [
                card(f"{intent['fallback_rate']:.2%}", "fallback rate"),
                card(f"{intent['accuracy_with_fallback']:.4f}", "intent accuracy, fallbacks as errors"),
            ]
    selection = summary.get("response_selection")
    if selection:
        cards += [
            card(f"{selection['accuracy']:.4f}", "response selection accuracy"),
            card(f"{selection['weighted_f1']:.4f}", "response selection weighted F1"),
        ]
    for name, scores in (summary.get("entities") or {}).items():
        cards += [
            card(f"{scores['exact_f1']:.4f}", f"{name}: entity exact F1"),
            card(f"{scores['overlap_f1']:.4f}", f"{name}: entity overlap F1"),
            card(f"{scores['token_micro_f1']:.4f}", f"{name}: entity token F1 (Rasa)"),
        ]
    parts = ['<section id="summary"><h2>Summary</h2>', f'<div class="cards">{"".join(cards)}</div>']
    if not cards:
        parts.append("<p>Nothing to evaluate: the data has no intents and no entities.</p>")
    if intent and "below_threshold" in intent:
        parts.append(_fallback_table(intent))
    if summary.get("confidence"):
        parts.append(_confidence_table(summary["confidence"], summary.get("fallback_threshold")))
    folds = summary.get("cross_validation")
    if folds:
        rows = [
            f"<tr><td>{esc(key)}</td>{num(v['mean'])}{num(v['std'], score=False)}"
            f"<td>{esc(', '.join(f'{x:.4f}' for x in v['folds']))}</td></tr>"
            for key, v in folds.get("metrics", {}).items()
        ]
        parts.append(f"<h3>Cross-validation: {esc(folds.get('folds'))} folds (test folds)</h3>")
        parts.append(table(["metric", "mean", "std", "per fold"], rows, table_id="folds"))
    timings = summary.get("timings") or {}
    if timings:
        text = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in timings.items())
        parts.append(f'<p class="meta">Timings: {esc(text)}</p>')
    for notice in summary.get("notices") or []:
        parts.append(f'<p class="notice">{esc(notice)}</p>')
    parts.append("</section>")
    return "".join(parts)


def _fallback_table(intent: Mapping[str, Any]) -> str:
    """The fallback rate, and the share of messages below each confidence threshold."""
    below = intent["below_threshold"]
    text = (f"{intent['num_fallbacks']} of {intent['num_examples']} messages fell back to "
            "nlu_fallback. The intent scores undo the fallback (as rasa test nlu does); the share "
            "of messages whose intent confidence is below a threshold shows what a "
            "FallbackClassifier threshold would catch.")
    row = "<tr><td>below</td>" + "".join(num(float(v), 3, score=False) for v in below.values()) + "</tr>"
    return (f'<h3 id="fallback">Fallback</h3><p class="meta">{esc(text)}</p>'
            + table(["confidence threshold", *below], [row], table_id="fallback-thresholds"))


def _confidence_table(confidence: Mapping[str, Any], threshold: Mapping[str, Any] | None = None) -> str:
    """Calibration, the share the model's fallback threshold sends to nlu_fallback and, with
    out-of-scope test messages, how many the fallback catches."""
    rows = [("expected calibration error (15 bins)", confidence["ece"]),
            ("the same for calibrated confidences, on this many messages (median)",
             confidence.get("ece_floor", 0.0)),
            ("p-value: ECE this high if calibrated", confidence.get("ece_p_value", 1.0)),
            ("largest bin gap", confidence["max_calibration_gap"]),
            ("mean confidence (in scope)", confidence["mean_confidence"]),
            ("accuracy (in scope, fallback undone)", confidence["accuracy"]),
            ("threshold within 1 point of no fallback", confidence["suggested_threshold"])]
    if threshold:
        rows.append((f"share (in scope) below the model's threshold {threshold['threshold']:g}",
                     threshold["share"]))
    for key in ("in_scope_accuracy", "out_of_scope_recall", "out_of_scope_precision", "auroc"):
        if key in confidence:
            rows.append((key.replace("_", " "), confidence[key]))
    calibrated = confidence.get("calibrated")
    note = ("" if calibrated is None else " The model's confidences are calibrated." if calibrated
            else " The model's confidences are not calibrated (trained before calibration "
                 "existed, with calibration off, or on data too small to hold any out).")
    text = (f"{confidence['num_out_of_scope']} test messages are out of scope "
            f"(intent {confidence['out_of_scope_intent']}).{note}")
    body = [f"<tr><td>{esc(k)}</td>{num(float(v), 4, score=False)}</tr>" for k, v in rows]
    return (f'<h3 id="confidence">Confidence</h3><p class="meta">{esc(text)}</p>'
            + table(["measure", "value"], body, table_id="confidence-table"))


def _responses_section(evaluation: Evaluation) -> str:
    selection = evaluation.response_selection
    if selection is None:
        return ""
    report = selection.report
    keys = sorted((k for k in report if k not in AVERAGES), key=lambda k: (report[k]["f1-score"], k))
    rows = []
    for key in keys:
        row = report[key]
        confused = ", ".join(f"{label_text(k)} ({v})" for k, v in row.get("confused_with", {}).items())
        rows.append(f"<tr><td>{esc(key)}</td>{num(row['precision'])}{num(row['recall'])}"
                    f"{num(row['f1-score'])}{num(row['support'])}<td>{esc(confused)}</td></tr>")
    foot = [f"<tr><td>{avg}</td>{num(report[avg]['precision'])}{num(report[avg]['recall'])}"
            f"{num(report[avg]['f1-score'])}{num(report[avg]['support'])}<td></td></tr>"
            for avg in ("micro avg", "macro avg", "weighted avg") if avg in report]
    errors = [
        f"<tr><td>{esc(e['text'])}</td><td>{esc(e['intent_response_key_target'])}</td>"
        f"<td>{esc(label_text(e['intent_response_key_prediction']['name']))}</td>"
        f"{num(float(e['intent_response_key_prediction']['confidence']), 3, score=False)}</tr>"
        for e in sorted(selection.errors, key=lambda e: -e["intent_response_key_prediction"]["confidence"])
    ]
    return ('<section id="responses"><h2>Response selection</h2>'
            f'<p class="meta">Accuracy {report["accuracy"]:.4f} over the {selection.num_examples} '
            "test examples of retrieval intents; weakest response key first.</p>"
            '<div class="scroll">'
            + table(["response key", "precision", "recall", "F1", "support", "confused with"], rows,
                    table_id="response-table", sortable=True, foot=foot, numeric_to=5)
            + f"</div><h3>Response selection errors ({len(errors)})</h3>"
            + search_box("response-errors", "response-search", "Search text or response key")
            + '<div class="scroll">'
            + table(["text", "true response key", "predicted", "confidence"], errors,
                    table_id="response-errors", sortable=True, numeric_from=3)
            + "</div></section>")


def _confused_section(evaluation: Evaluation) -> str:
    intent = evaluation.intent
    if intent is None:
        return ""
    pairs = most_confused_pairs(intent.labels, intent.matrix, limit=25)
    rows = [
        f"<tr><td>{esc(p['gold'])}</td><td>{esc(label_text(p['predicted']))}</td>"
        f"{num(p['count'])}{num(p['share'], 3, score=False)}</tr>"
        for p in pairs
    ]
    body = (table(["true intent", "predicted as", "count", "share of true"], rows,
                  table_id="confused-table", numeric_from=2)
            if rows else "<p>No intent was confused with another.</p>")
    return f'<section id="confused-pairs"><h2>Most confused intents</h2>{body}</section>'


def _intent_section(evaluation: Evaluation) -> str:
    intent = evaluation.intent
    if intent is None:
        return ""
    report = intent.report
    labels = sorted((k for k in report if k not in AVERAGES), key=lambda k: (report[k]["f1-score"], k))
    rows = []
    for label in labels:
        row = report[label]
        confused = ", ".join(f"{label_text(k)} ({v})" for k, v in row.get("confused_with", {}).items())
        rows.append(f"<tr><td>{esc(label)}</td>{num(row['precision'])}{num(row['recall'])}"
                    f"{num(row['f1-score'])}{num(row['support'])}<td>{esc(confused)}</td></tr>")
    foot = [f'<tr><td>accuracy</td><td class="num" colspan="2"></td>{num(report["accuracy"])}'
            f'{num(report["macro avg"]["support"])}<td></td></tr>']
    for key in ("micro avg", "macro avg", "weighted avg"):
        if key in report:
            r = report[key]
            foot.append(f"<tr><td>{key}</td>{num(r['precision'])}{num(r['recall'])}"
                        f"{num(r['f1-score'])}{num(r['support'])}<td></td></tr>")
    headers = ["intent", "precision", "recall", "F1", "support", "confused with"]
    return ('<section id="intents"><h2>Intents</h2><p class="meta">Weakest first; click a column '
            'to sort.</p><div class="scroll">'
            + table(headers, rows, table_id="intent-table", sortable=True, foot=foot, numeric_to=5)
            + "</div></section>")


def _errors_section(evaluation: Evaluation) -> str:
    intent = evaluation.intent
    if intent is None:
        return ""
    errors = sorted(intent.errors, key=lambda e: -e["intent_prediction"]["confidence"])
    rows = [
        f"<tr><td>{esc(e['text'])}</td><td>{esc(e['intent'])}</td>"
        f"<td>{esc(label_text(e['intent_prediction']['name']))}</td>"
        f"{num(float(e['intent_prediction']['confidence']), 3, score=False)}</tr>"
        for e in errors
    ]
    return ('<section id="errors"><h2>Intent errors</h2>'
            f'<p class="meta">{len(errors)} of {intent.num_examples} test examples; most confident '
            "first.</p>"
            + search_box("intent-errors", "error-search", "Search text or intent")
            + '<div class="scroll">'
            + table(["text", "true intent", "predicted", "confidence"], rows,
                    table_id="intent-errors", sortable=True, numeric_from=3)
            + "</div></section>")


def _entity_list(entities: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for e in entities:
        extra = "".join(f" {k}={e[k]}" for k in ("role", "group") if e.get(k) not in (None, ""))
        text = f"{e.get('value', '')} ({e.get('entity')}{extra}) [{e.get('start')}–{e.get('end')}]"
        parts.append(f'<span class="ent">{esc(text)}</span>')
    return " ".join(parts)


def _entity_section(evaluation: Evaluation) -> str:
    if not evaluation.entities:
        return ""
    parts = ['<section id="entities"><h2>Entities</h2><p class="meta">Per extractor and entity '
             "type. Exact: type and character span equal (conlleval). Overlap: type equal, spans "
             "overlap, each entity matched once (HERMIT). Token: Rasa's token-level scores.</p>"]
    for name, entity in evaluation.entities.items():
        report = entity.report
        exact, overlap = report[SPAN_EXACT], report[SPAN_OVERLAP]
        key = slug(name)
        rows = []
        for label in [k for k in exact if k not in ("micro avg", "macro avg")]:
            e, o, t = exact[label], overlap[label], report.get(label)
            token_cells = (num(t["precision"]) + num(t["recall"]) + num(t["f1-score"])
                           if isinstance(t, dict) and "precision" in t else '<td></td>' * 3)
            rows.append(f"<tr><td>{esc(label)}</td>{num(e['support'])}{num(e['predicted'])}"
                        f"{num(e['precision'])}{num(e['recall'])}{num(e['f1-score'])}"
                        f"{num(o['precision'])}{num(o['recall'])}{num(o['f1-score'])}{token_cells}</tr>")
        foot = []
        for avg in ("micro avg", "macro avg"):
            e, o, t = exact[avg], overlap[avg], report.get(avg)
            token_cells = (num(t["precision"]) + num(t["recall"]) + num(t["f1-score"])
                           if isinstance(t, dict) else '<td></td>' * 3)
            counts = (num(e["support"]) + num(e["predicted"])) if avg == "micro avg" else "<td></td>" * 2
            foot.append(f"<tr><td>{avg}</td>{counts}{num(e['precision'])}{num(e['recall'])}"
                        f"{num(e['f1-score'])}{num(o['precision'])}{num(o['recall'])}"
                        f"{num(o['f1-score'])}{token_cells}</tr>")
        headers = ["type", "gold", "predicted", "exact P", "exact R", "exact F1", "overlap P",
                   "overlap R", "overlap F1", "token P", "token R", "token F1"]
        parts.append(f'<h3 id="entities-{esc(key)}">{esc(name)}</h3><div class="scroll">')
        parts.append(table(headers, rows, table_id=f"entity-scores-{key}", sortable=True, foot=foot))
        parts.append("</div>")
        if entity.confidence is not None:
            parts.append(_entity_confidence_table(name, key, entity.confidence.summary()))
        error_rows = [
            f"<tr><td>{esc(err['text'])}</td><td>{_entity_list(err['entities'])}</td>"
            f"<td>{_entity_list(err['predicted_entities'])}</td></tr>"
            for err in entity.errors
        ]
        parts.append(f"<h3>{esc(name)}: messages with entity errors ({len(error_rows)})</h3>")
        parts.append(search_box(f"entity-errors-{key}", f"entity-search-{key}",
                                "Search text or entity"))
        parts.append('<div class="scroll">' + table(
            ["text", "gold entities", "predicted entities"], error_rows,
            table_id=f"entity-errors-{key}", numeric_from=99) + "</div>")
    parts.append("</section>")
    return "".join(parts)


def _entity_confidence_table(name: str, key: str, confidence: Mapping[str, Any]) -> str:
    """The ECE of an extractor's entity confidences against exact-span correctness, and per
    threshold the shares of wrong and right entities below it and the exact scores kept."""
    text = (f"{confidence['num_scored']} predicted entities with a confidence: expected calibration "
            f"error {confidence['ece']:.4f} ({confidence['bins']} bins; calibrated confidences would "
            f"measure {confidence['ece_floor']:.4f} on as many, p {confidence['ece_p_value']:.2f}), "
            f"mean confidence {confidence['mean_confidence']:.4f} for an exact-span precision of "
            f"{confidence['precision']:.4f}. Dropping the entities below a threshold:")
    rows = [f"<tr><td>{row['threshold']:.1f}</td>{num(row['wrong_removed'], 3, score=False)}"
            f"{num(row['right_removed'], 3, score=False)}{num(row['precision'])}{num(row['recall'])}"
            f"{num(row['f1'])}</tr>" for row in confidence["thresholds"]]
    return (f'<h3 id="entity-confidence-{esc(key)}">{esc(name)}: entity confidence</h3>'
            f'<p class="meta">{esc(text)}</p>'
            + table(["threshold", "wrong removed", "right removed", "exact P kept", "exact R kept",
                     "exact F1 kept"], rows, table_id=f"entity-confidence-{key}"))


def _plots_section(images: Sequence[tuple[str, Path]]) -> str:
    if not images:
        return ('<section id="plots"><h2>Plots</h2><p>No plots (--no-plot, or matplotlib '
                "missing).</p></section>")
    figures = "".join(image_tag(title, path) for title, path in images)
    return f'<section id="plots"><h2>Plots</h2>{figures}</section>'


def render_html_report(
    evaluation: Evaluation, summary: Mapping[str, Any], images: Sequence[tuple[str, Path]] = ()
) -> str:
    """The whole page as a string."""
    meta = []
    if summary.get("model"):
        meta.append(f"Model: {esc(summary['model'])}")
    if summary.get("data"):
        meta.append("Data: " + esc(", ".join(map(str, summary["data"]))))
    meta.append(f"{evaluation.num_examples} test examples")
    nav = [("summary", "Summary")]
    if evaluation.intent is not None:
        nav += [("confused-pairs", "Confusions"), ("intents", "Intents"), ("errors", "Errors")]
    if evaluation.response_selection is not None:
        nav.append(("responses", "Responses"))
    if evaluation.entities:
        nav.append(("entities", "Entities"))
    nav.append(("plots", "Plots"))
    body = "\n".join([
        _summary_section(summary), _confused_section(evaluation), _intent_section(evaluation),
        _errors_section(evaluation), _responses_section(evaluation), _entity_section(evaluation),
        _plots_section(images),
    ])
    return page("nlu_engine test report", meta, nav, body)


def write_html_report(
    path: str | Path,
    evaluation: Evaluation,
    summary: Mapping[str, Any],
    images: Sequence[tuple[str, Path]] = (),
) -> Path:
    path = Path(path)
    path.write_text(render_html_report(evaluation, summary, images), encoding="utf-8")
    return path


# --- the comparison page -----------------------------------------------------------------------
def render_comparison_html(comparison: Mapping[str, Any], images: Sequence[tuple[str, Path]] = ()) -> str:
    """A page for ``nlu-engine test --config a.yml b.yml``: a table of mean ± std and the plot."""
    import statistics

    percentages = comparison["percentages"]
    sizes = [round(statistics.fmean(column)) for column in zip(*comparison["num_examples"], strict=True)]
    headers = ["config", "metric", *[f"{p}% removed ({n})" for p, n in zip(percentages, sizes, strict=True)]]
    rows = []

    def cells(values: Sequence[Sequence[float]]) -> str:
        out = []
        for column in zip(*values, strict=True):
            mean = statistics.fmean(column)
            std = statistics.pstdev(column)
            out.append(f'<td class="num" data-value="{mean!r}">{mean:.4f} ± {std:.4f}</td>')
        return "".join(out)

    for name, result in comparison["results"].items():
        for metric in ("intent_macro_f1", "intent_accuracy"):
            if result.get(metric):
                rows.append(f"<tr><td>{esc(name)}</td><td>{esc(metric)}</td>{cells(result[metric])}</tr>")
        for extractor, scores in (result.get("entities") or {}).items():
            for metric, values in scores.items():
                rows.append(f"<tr><td>{esc(name)}</td><td>{esc(extractor)} {esc(metric)}</td>"
                            f"{cells(values)}</tr>")
    body = (
        '<section id="summary"><h2>Pipeline comparison</h2>'
        f"<p class=\"meta\">{esc(comparison['runs'])} runs; each run splits the data 80/20 "
        "(stratified, seeded) and trains every config on the training part with the given "
        "percentage of it removed; scores are on the same 20% test part.</p>"
        + table(headers, rows, table_id="comparison-table", numeric_from=2)
        + "</section>" + _plots_section(images)
    )
    return page("nlu_engine pipeline comparison", [esc(", ".join(comparison["results"]))],
                [("summary", "Summary"), ("plots", "Plots")], body)


def write_comparison_html(
    path: str | Path, comparison: Mapping[str, Any], images: Sequence[tuple[str, Path]] = ()
) -> Path:
    path = Path(path)
    path.write_text(render_comparison_html(comparison, images), encoding="utf-8")
    return path
