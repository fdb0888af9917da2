"""Report files and terminal lines of nlu_engine.evaluation.reports."""

import json

import pytest

from nlu_engine.evaluation.metrics import evaluate
from nlu_engine.evaluation.reports import format_folds, format_summary, write_reports


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
