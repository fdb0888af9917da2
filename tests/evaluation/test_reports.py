"""Report files and terminal lines of nlu_engine.evaluation.reports."""

import json

import pytest

from nlu_engine.contract.message import Message
from nlu_engine.evaluation.metrics import evaluate
from nlu_engine.evaluation.reports import (
    format_comparison,
    format_folds,
    format_summary,
    write_comparison,
    write_reports,
)
from tests.extras import requires_extra


def test_write_reports_files_without_plots(tmp_path, booking_case):
    golds, results = booking_case
    summary = write_reports(evaluate(golds, results), tmp_path, successes=True, plot=False,
                            info={"model": "m.tar.gz"})
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"intent_report.json", "intent_errors.json", "intent_successes.json",
                     "DIETClassifier_report.json", "DIETClassifier_errors.json",
                     "DIETClassifier_successes.json", "intent_confidence.json", "summary.json", "index.html"}
    errors = json.loads((tmp_path / "intent_errors.json").read_text())
    assert errors == [{"text": "book rome now", "intent": "book",
                       "intent_prediction": {"name": "greet", "confidence": 0.55}}]
    report = json.loads((tmp_path / "DIETClassifier_report.json").read_text())
    assert report["span_overlap"]["micro avg"]["f1-score"] == 1.0
    assert report["city"]["support"] == 2  # token level: "paris" and "rome"
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["model"] == "m.tar.gz" and on_disk["intent"] == summary["intent"]
    assert "report_seconds" in on_disk["timings"]


@requires_extra("plot")
def test_write_reports_plots(tmp_path, booking_case):
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


def retrieval_case():
    """Two retrieval intents' messages, one response error and one fallback."""
    def selected(key, confidence):
        prediction = {"responses": [{"text": key}], "confidence": confidence,
                      "intent_response_key": key, "utter_action": f"utter_{key}"}
        return {"all_retrieval_intents": ["faq"], "default": {"response": prediction, "ranking": []}}

    golds = [Message("name?", intent="faq", intent_response_key="faq/ask_name"),
             Message("age?", intent="faq", intent_response_key="faq/ask_age"),
             Message("hi", intent="greet")]
    results = [
        {"text": "name?", "intent": {"name": "faq", "confidence": 0.9}, "entities": [],
         "intent_ranking": [{"name": "faq", "confidence": 0.9}],
         "response_selector": selected("faq/ask_name", 0.8)},
        {"text": "age?", "intent": {"name": "nlu_fallback", "confidence": 0.7}, "entities": [],
         "intent_ranking": [{"name": "nlu_fallback", "confidence": 0.7}, {"name": "faq", "confidence": 0.6},
                            {"name": "greet", "confidence": 0.4}],
         "response_selector": selected("faq/ask_name", 0.55)},
        {"text": "hi", "intent": {"name": "greet", "confidence": 0.95}, "entities": [],
         "intent_ranking": [{"name": "greet", "confidence": 0.95}]},
    ]
    return golds, results


def test_response_selection_files_and_fallback_in_the_summary(tmp_path):
    golds, results = retrieval_case()
    summary = write_reports(evaluate(golds, results), tmp_path, successes=True, plot=False)
    names = {p.name for p in tmp_path.iterdir()}
    assert {"response_selection_report.json", "response_selection_errors.json",
            "response_selection_successes.json"} <= names
    report = json.loads((tmp_path / "response_selection_report.json").read_text())
    assert list(report) == ["faq/ask_age", "faq/ask_name", "accuracy", "micro avg", "macro avg",
                            "weighted avg"]
    assert report["accuracy"] == 0.5 and report["faq/ask_age"]["confused_with"] == {"faq/ask_name": 1}
    errors = json.loads((tmp_path / "response_selection_errors.json").read_text())
    assert errors == [{"text": "age?", "intent_response_key_target": "faq/ask_age",
                       "intent_response_key_prediction": {"name": "faq/ask_name", "confidence": 0.55}}]
    # the fallback is undone for the intent scores and reported beside them
    assert summary["intent"]["accuracy"] == 1.0 and summary["intent"]["num_fallbacks"] == 1
    assert summary["intent"]["fallback_rate"] == pytest.approx(1 / 3)
    assert summary["intent"]["accuracy_with_fallback"] == pytest.approx(2 / 3)
    assert summary["response_selection"]["accuracy"] == 0.5
    assert "response_selection_report.json" in summary["files"]
    lines = format_summary(summary).splitlines()
    assert lines[1].startswith("Fallback: 1 of 3 messages (33.33%) fell back to nlu_fallback")
    assert lines[2].startswith("Response selection: accuracy 0.5000")
    page = (tmp_path / "index.html").read_text()
    assert '<section id="responses">' in page and 'id="fallback-thresholds"' in page
    assert "fallback rate" in page and "response selection accuracy" in page


@requires_extra("plot")
def test_response_selection_plots(tmp_path):
    write_reports(evaluate(*retrieval_case()), tmp_path, html=False)
    for name in ("response_selection_confusion_matrix.png", "response_selection_histogram.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _with_entity_confidences():
    """Twenty messages, each with one gold city: DIET finds it with confidence 0.9 (right in
    the odd ones, a span too short in the even ones), and a spurious date at 0.2 in every third."""
    golds, results = [], []
    for i in range(20):
        text = f"fly to new york {i}"
        gold = {"entity": "city", "start": 7, "end": 15, "value": "new york"}
        end = 15 if i % 2 else 10
        entities = [{"entity": "city", "start": 7, "end": end, "value": text[7:end],
                     "extractor": "DIETClassifier", "confidence_entity": 0.9}]
        if i % 3 == 0:
            entities.append({"entity": "date", "start": 16, "end": len(text), "value": str(i),
                             "extractor": "DIETClassifier", "confidence_entity": 0.2})
        golds.append(Message(text, intent="fly", entities=[gold]))
        results.append({"text": text, "intent": {"name": "fly", "confidence": 0.9},
                        "intent_ranking": [], "entities": entities})
    return golds, results


def test_entity_confidence_file_line_and_page(tmp_path):
    summary = write_reports(evaluate(*_with_entity_confidences()), tmp_path, plot=False)
    assert "DIETClassifier_confidence.json" in summary["files"]
    written = json.loads((tmp_path / "DIETClassifier_confidence.json").read_text())
    assert [b["count"] for b in written["bins"]] == [7, 20]  # 7 dates at 0.2, 20 cities at 0.9
    at_half = next(row for row in written["thresholds"] if row["threshold"] == 0.5)
    # 0.5 drops the 7 spurious dates (7 of the 17 wrong entities) and none of the 10 right ones
    assert at_half["wrong_removed"] == pytest.approx(7 / 17) and at_half["right_removed"] == 0.0
    confidence = summary["entities"]["DIETClassifier"]["confidence"]
    assert confidence["ece"] == pytest.approx((7 * 0.2 + 20 * 0.4) / 27)
    lines = format_summary(summary).splitlines()
    assert any(line.startswith("Entity confidence (DIETClassifier): expected calibration error 0.3481 "
                               "over 27 entities (10 bins") for line in lines)
    page = (tmp_path / "index.html").read_text()
    assert 'id="entity-confidence-DIETClassifier"' in page and "exact F1 kept" in page


@requires_extra("plot")
def test_entity_reliability_diagram(tmp_path):
    summary = write_reports(evaluate(*_with_entity_confidences()), tmp_path, html=False)
    assert "DIETClassifier_reliability.png" in summary["files"]
    assert (tmp_path / "DIETClassifier_reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
