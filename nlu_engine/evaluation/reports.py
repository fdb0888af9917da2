"""The files and terminal lines of ``nlu-engine test``.

``write_reports`` writes Rasa's result files of one evaluation (``intent_report.json``,
``intent_errors.json``, ``response_selection_report.json``, ``<Extractor>_report.json``, ...),
``summary.json``, the PNG plots
(``plots``; only when matplotlib is installed) and ``index.html`` (``html``).
``write_comparison`` writes a pipeline comparison (``comparison.json``, ``comparison.png``,
``index.html``). The ``format_*`` functions give the lines the CLI prints.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nlu_engine.evaluation import plots
from nlu_engine.evaluation.entity_confidence import confidence_line
from nlu_engine.evaluation.html import write_comparison_html, write_html_report
from nlu_engine.evaluation.metrics import Evaluation
from nlu_engine.evaluation.thresholds import threshold_line

MATPLOTLIB_MISSING = "plots skipped: matplotlib is not installed"


# --- terminal text -----------------------------------------------------------------------------
def format_summary(summary: Mapping[str, Any]) -> str:
    """A few lines for the terminal."""
    lines = []
    intent = summary.get("intent")
    if intent:
        lines.append(
            f"Intents: accuracy {intent['accuracy']:.4f}, macro F1 {intent['macro_f1']:.4f}, "
            f"weighted F1 {intent['weighted_f1']:.4f} ({intent['num_examples']} examples, "
            f"{intent['num_errors']} errors)"
        )
        if intent.get("num_fallbacks"):
            lines.append(
                f"Fallback: {intent['num_fallbacks']} of {intent['num_examples']} messages "
                f"({intent['fallback_rate']:.2%}) fell back to nlu_fallback; the intent scores undo "
                f"it, as Rasa's; counting them as errors, accuracy is {intent['accuracy_with_fallback']:.4f}"
            )
        if summary.get("fallback_threshold"):  # the model's threshold, as training reports it
            lines.append(threshold_line(summary["fallback_threshold"]))
    selection = summary.get("response_selection")
    if selection:
        lines.append(
            f"Response selection: accuracy {selection['accuracy']:.4f}, macro F1 "
            f"{selection['macro_f1']:.4f}, weighted F1 {selection['weighted_f1']:.4f} "
            f"({selection['num_examples']} examples, {selection['num_errors']} errors)"
        )
    for name, scores in (summary.get("entities") or {}).items():
        lines.append(
            f"Entities ({name}): exact F1 {scores['exact_f1']:.4f} "
            f"(P {scores['exact_precision']:.4f}, R {scores['exact_recall']:.4f}), "
            f"overlap F1 {scores['overlap_f1']:.4f}, token F1 {scores['token_micro_f1']:.4f} "
            f"({scores['num_gold']} gold, {scores['num_predicted']} predicted)"
        )
        if scores.get("confidence"):
            lines.append(confidence_line(name, scores["confidence"]))
    if summary.get("confidence"):
        lines.extend(_confidence_lines(summary["confidence"]))
    if not lines:
        lines.append("Nothing to evaluate: the data has no intents and no entities.")
    return "\n".join(lines)


def format_folds(stats: Mapping[str, Mapping[str, Any]]) -> str:
    """``metric: mean ± std`` lines."""
    width = max((len(k) for k in stats), default=0)
    return "\n".join(
        f"  {key:<{width}}  {value['mean']:.4f} ± {value['std']:.4f}" for key, value in stats.items()
    )


# --- files -------------------------------------------------------------------------------------
def _dump(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_reports(
    evaluation: Evaluation,
    out: str | Path,
    *,
    errors: bool = True,
    successes: bool = False,
    plot: bool = True,
    html: bool = True,
    info: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the report files into ``out`` and return the summary written to ``summary.json``.

    Files: ``intent_report.json``, ``intent_errors.json`` (unless ``errors`` is False),
    ``intent_successes.json`` (with ``successes``), the same three for ``response_selection``
    (when scored) and for each ``<Extractor>``, ``intent_confidence.json`` and
    ``<Extractor>_confidence.json`` (reliability bins; the fallback sweep, the entity threshold
    table), ``summary.json``; with ``plot`` (needs matplotlib) ``intent_confusion_matrix.png``,
    ``intent_histogram.png``, and the same two for ``response_selection`` and each
    ``<Extractor>``, ``intent_reliability.png``, ``fallback_sweep.png`` and
    ``<Extractor>_reliability.png``; with ``html`` ``index.html``. ``info`` (model, data,
    timings, cross-validation...) is merged into the summary; its ``notices`` lead the summary's.
    """
    start = time.perf_counter()
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written = _write_json(evaluation, folder, errors, successes)

    images: list[tuple[str, Path]] = []
    notices: list[str] = list((info or {}).get("notices") or [])  # the caller's come first
    if plot:
        if not plots.available():
            notices.append(f"{MATPLOTLIB_MISSING} (pip install 'nlu-engine[plot]')")
        else:
            images = _plot_all(evaluation, folder)
            written.extend(path.name for _, path in images)
    notices.extend(_out_of_scope_notice(evaluation))

    summary = {**evaluation.summary(), **dict(info or {})}
    summary["files"] = [*written, "summary.json", *(["index.html"] if html else [])]
    if notices:
        summary["notices"] = notices
    if html:
        write_html_report(folder / "index.html", evaluation, summary, images)
    summary.setdefault("timings", {})["report_seconds"] = round(time.perf_counter() - start, 3)
    _dump(folder / "summary.json", summary)
    return summary


def _write_json(evaluation: Evaluation, folder: Path, errors: bool, successes: bool) -> list[str]:
    """The JSON reports of each scored part (intents, responses, each extractor's entities) and
    their confidence tables; the names of the files written, in order."""
    written: list[str] = []
    intent = evaluation.intent
    if intent is not None:
        written.extend(_write_labelled(folder, "intent", intent.report, intent.errors if errors else None,
                                       intent.successes if successes else None))
    if evaluation.confidence is not None:  # the reliability bins and the fallback sweep
        _dump(folder / "intent_confidence.json", {"bins": evaluation.confidence.bins,
                                                  "sweep": evaluation.confidence.sweep})
        written.append("intent_confidence.json")
    selection = evaluation.response_selection
    if selection is not None:
        written.extend(_write_labelled(folder, "response_selection", selection.report,
                                       selection.errors if errors else None,
                                       selection.successes if successes else None))
    for name, entity in evaluation.entities.items():
        written.extend(_write_labelled(folder, name, entity.report, entity.errors if errors else None,
                                       entity.successes if successes else None))
        if entity.confidence is not None:  # the reliability bins and the threshold table
            _dump(folder / f"{name}_confidence.json", {"bins": entity.confidence.bins,
                                                       "thresholds": entity.confidence.thresholds})
            written.append(f"{name}_confidence.json")
    return written


def _out_of_scope_notice(evaluation: Evaluation) -> list[str]:
    """The notice of test data without the out-of-scope intent (calibration is all it scores)."""
    confidence = evaluation.confidence
    if confidence is None or confidence.num_out_of_scope:
        return []
    return [f"the test data has no examples of the out-of-scope intent "
            f"'{confidence.out_of_scope_intent}': calibration only (mark out-of-scope test "
            "messages with that intent, or name yours with --out-of-scope-intent)"]


def _write_labelled(
    folder: Path, prefix: str, report: Any, errors: Any | None, successes: Any | None
) -> list[str]:
    """``<prefix>_report.json`` and, when given, ``_errors.json`` / ``_successes.json``."""
    names = [f"{prefix}_report.json"]
    _dump(folder / names[0], report)
    for kind, rows in (("errors", errors), ("successes", successes)):
        if rows is not None:
            names.append(f"{prefix}_{kind}.json")
            _dump(folder / names[-1], rows)
    return names


def _confidence_lines(confidence: Mapping[str, Any]) -> list[str]:
    floor = ""
    if "ece_floor" in confidence:
        verdict = ("miscalibrated beyond chance" if confidence["ece_p_value"] < 0.05
                   else "within what calibrated confidences show on this many messages")
        floor = (f"; calibrated confidences would measure {confidence['ece_floor']:.4f} here "
                 f"(p {confidence['ece_p_value']:.2f}: {verdict})")
    lines = [f"Confidence: expected calibration error {confidence['ece']:.4f} (largest bin gap "
             f"{confidence['max_calibration_gap']:.3f}{floor}), mean {confidence['mean_confidence']:.4f} for "
             f"an accuracy of {confidence['accuracy']:.4f}; a fallback threshold up to "
             f"{confidence['suggested_threshold']:.2f} keeps in-scope accuracy within 1 point"]
    if confidence.get("calibrated") is False:
        lines.append("Confidence: the model's confidences are not calibrated (trained before "
                     "calibration existed, with calibration off, or on data too small to hold any out)")
    if "out_of_scope_recall" in confidence:
        lines.append(
            f"Out of scope ({confidence['num_out_of_scope']} messages of "
            f"'{confidence['out_of_scope_intent']}'): recall {confidence['out_of_scope_recall']:.4f}, "
            f"precision {confidence['out_of_scope_precision']:.4f}, AUROC {confidence['auroc']:.4f}; "
            f"in-scope accuracy {confidence['in_scope_accuracy']:.4f} counting fallbacks as errors "
            f"({confidence['in_scope_accuracy_without_fallback']:.4f} without the fallback)")
    return lines


def _plot_all(evaluation: Evaluation, folder: Path) -> list[tuple[str, Path]]:
    images: list[tuple[str, Path]] = []
    intent = evaluation.intent
    confidence = evaluation.confidence
    if confidence is not None and confidence.bins:
        images.append(("Intent confidence: reliability", plots.plot_reliability(
            confidence.bins, confidence.ece, folder / "intent_reliability.png",
            ece_floor=confidence.ece_floor)))
        images.append(("Fallback threshold sweep", plots.plot_threshold_sweep(
            confidence.sweep, confidence.suggested_threshold, folder / "fallback_sweep.png",
            with_out_of_scope=bool(confidence.num_out_of_scope))))
    if intent is not None:
        images.append(("Intent confusion matrix", plots.plot_confusion_matrix(
            intent.labels, intent.matrix, folder / "intent_confusion_matrix.png",
            title="Intent confusion matrix", axis_name="intent")))
        images.append(("Intent prediction confidence", plots.plot_confidence_histogram(
            intent.correct_confidences, intent.wrong_confidences, folder / "intent_histogram.png",
            title="Intent prediction confidence")))
    selection = evaluation.response_selection
    if selection is not None:
        images.append(("Response selection confusion matrix", plots.plot_confusion_matrix(
            selection.labels, selection.matrix, folder / "response_selection_confusion_matrix.png",
            title="Response selection confusion matrix", axis_name="response key")))
        images.append(("Response selection confidence", plots.plot_confidence_histogram(
            selection.correct_confidences, selection.wrong_confidences,
            folder / "response_selection_histogram.png",
            title="Response selection prediction confidence")))
    for name, entity in evaluation.entities.items():
        if entity.labels:
            images.append((f"{name}: token confusion matrix", plots.plot_confusion_matrix(
                entity.labels, entity.matrix, folder / f"{name}_confusion_matrix.png",
                title=f"{name}: entity confusion matrix (tokens)", axis_name="entity")))
        if entity.correct_confidences or entity.wrong_confidences:
            images.append((f"{name}: entity confidence", plots.plot_confidence_histogram(
                entity.correct_confidences, entity.wrong_confidences,
                folder / f"{name}_histogram.png", title=f"{name}: entity confidence")))
        if entity.confidence is not None and entity.confidence.bins:
            images.append((f"{name}: entity confidence: reliability", plots.plot_reliability(
                entity.confidence.bins, entity.confidence.ece, folder / f"{name}_reliability.png",
                title=f"{name}: entity confidence, reliability", ece_floor=entity.confidence.ece_floor,
                accuracy="share exactly right")))
    return images


# --- pipeline comparison -----------------------------------------------------------------------
def write_comparison(
    comparison: Mapping[str, Any], out: str | Path, *, plot: bool = True
) -> tuple[list[str], list[str]]:
    """Write ``comparison.json``, ``index.html`` and (with ``plot``) ``comparison.png`` into
    ``out``; returns the names of the files written and notices for the user."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "comparison.json").write_text(json.dumps(comparison, indent=2) + "\n", encoding="utf-8")
    files = ["comparison.json", "index.html"]
    notices: list[str] = []
    images = []
    if plot:
        if plots.available():
            images.append(("F1 against training examples",
                           plots.plot_comparison(comparison, folder / "comparison.png")))
            files.append("comparison.png")
        else:
            notices.append(MATPLOTLIB_MISSING)
    write_comparison_html(folder / "index.html", comparison, images)
    return files, notices


def format_comparison(comparison: Mapping[str, Any]) -> str:
    """A table for the terminal: per config and metric, mean ± std per percentage removed."""
    sizes = [round(statistics.fmean(c)) for c in zip(*comparison["num_examples"], strict=True)]
    header = ["config", "metric"] + [
        f"{p}% off ({n})" for p, n in zip(comparison["percentages"], sizes, strict=True)]
    rows = []
    for name, result in comparison["results"].items():
        lines = [("intent macro F1", result["intent_macro_f1"])] if result["intent_macro_f1"] else []
        lines += [(f"{ex} exact F1", s["exact_f1"]) for ex, s in result["entities"].items()]
        for metric, values in lines:
            rows.append([name, metric] + [
                f"{statistics.fmean(c):.4f} ± {statistics.pstdev(c):.4f}"
                for c in zip(*values, strict=True)])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    )
