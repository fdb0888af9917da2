"""Report files and terminal lines of nlu_engine.evaluation.reports."""

import json

import pytest

from nlu_engine.evaluation.metrics import evaluate
from nlu_engine.evaluation.reports import (
    format_comparison,
    format_folds,
    format_summary,
    write_comparison,
    write_reports,
)


def test_write_reports_files_without_plots(tmp_path, booking_case):
    golds, results = booking_case
    summary = write_reports(evaluate(golds, results), tmp_path, successes=True, plot=False,
                            info={"model": "m.tar.gz"})
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"intent_report.json", "intent_errors.json", "intent_successes.json",
                     "DIETClassifier_report.json", "DIETClassifier_errors.json",
                     "DIETClassifier_successes.json", "summary.json", "index.html"}
    errors = json.loads((tmp_path / "intent_errors.json").read_text())
    assert errors == [{"text": "book rome now", "intent": "book",
                       "intent_prediction": {"name": "greet", "confidence": 0.55}}]
    report = json.loads((tmp_path / "DIETClassifier_report.json").read_text())
    assert report["span_overlap"]["micro avg"]["f1-score"] == 1.0
    assert report["city"]["support"] == 2  # token level: "paris" and "rome"
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["model"] == "m.tar.gz" and on_disk["intent"] == summary["intent"]
    assert "report_seconds" in on_disk["timings"]


def test_write_reports_plots(tmp_path, booking_case):
    pytest.importorskip("matplotlib")
    golds, results = booking_case
    write_reports(evaluate(golds, results), tmp_path, html=False)
    for name in ("intent_confusion_matrix.png", "intent_histogram.png",
                 "DIETClassifier_confusion_matrix.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "index.html").exists()


def test_format_summary_and_folds(booking_case):
    summary = evaluate(*booking_case).summary()
    lines = format_summary(summary).splitlines()
    assert lines[0].startswith("Intents: accuracy 0.7500") and "(4 examples, 1 errors)" in lines[0]
    assert lines[1].startswith("Entities (DIETClassifier): exact F1 0.5000")
    assert format_summary({"intent": None, "entities": {}}).startswith("Nothing to evaluate")
    stats = {"intent accuracy": {"mean": 0.9, "std": 0.05}, "x exact_f1": {"mean": 1.0, "std": 0.0}}
    assert format_folds(stats).splitlines() == ["  intent accuracy  0.9000 ± 0.0500",
                                                "  x exact_f1       1.0000 ± 0.0000"]


COMPARISON = {
    "configs": ["a"], "overrides": [], "data": ["d.yml"], "runs": 2, "random_seed": 42,
    "percentages": [0, 50], "num_examples": [[10, 5], [10, 5]], "num_test_examples": [3, 3],
    "results": {"a": {"config": "a.yml", "intent_macro_f1": [[1.0, 0.5], [0.8, 0.5]],
                      "intent_accuracy": [[1.0, 0.5], [0.8, 0.5]],
                      "intent_weighted_f1": [[1.0, 0.5], [0.8, 0.5]],
                      "entities": {"E": {"exact_f1": [[0.5, 0.0], [0.5, 0.0]],
                                         "overlap_f1": [[1.0, 0.0], [1.0, 0.0]]}}}},
    "seconds": 1.0,
}


def test_write_comparison_without_plot(tmp_path):
    files, notices = write_comparison(COMPARISON, tmp_path / "out", plot=False)
    assert files == ["comparison.json", "index.html"] and notices == []
    assert json.loads((tmp_path / "out" / "comparison.json").read_text()) == COMPARISON
    assert "comparison-table" in (tmp_path / "out" / "index.html").read_text()


def test_format_comparison_table():
    header, intent, entity = format_comparison(COMPARISON).splitlines()
    assert header.split() == ["config", "metric", "0%", "off", "(10)", "50%", "off", "(5)"]
    assert intent.split()[:5] == ["a", "intent", "macro", "F1", "0.9000"]
    assert entity.split()[:4] == ["a", "E", "exact", "F1"] and "0.5000 ± 0.0000" in entity
