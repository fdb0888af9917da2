"""index.html loaded in headless Chromium: its sections, its search and its embedded plots.

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped when /usr/bin/chromium is
absent.
"""

import html
import json
import re
import subprocess
from pathlib import Path

import pytest

from nlu_engine.contract.message import Message
from nlu_engine.evaluation import evaluate, write_reports
from tests.extras import requires_extra

CHROMIUM = Path("/usr/bin/chromium")


def case():
    golds, results = [], []
    rows = [
        # text, gold intent, predicted intent, confidence, gold city span, predicted city span
        ("book a table in rome", "book", "book", 0.9, (16, 20), (16, 20)),
        ("table for two in paris", "book", "search", 0.8, (17, 22), (17, 22)),
        ("find food in berlin", "search", "search", 0.7, (13, 19), (13, 16)),
        ("any sushi <near> oslo", "search", "book", 0.6, (17, 21), None),
        ("hello there", "greet", "greet", 0.99, None, None),
        ("hey", "greet", None, 0.0, None, None),
    ]
    for text, gold_intent, predicted, confidence, gold_span, predicted_span in rows:
        gold_entities = ([{"entity": "city", "start": gold_span[0], "end": gold_span[1],
                           "value": text[gold_span[0]:gold_span[1]]}] if gold_span else [])
        predicted_entities = ([{"entity": "city", "start": predicted_span[0], "end": predicted_span[1],
                                "value": text[predicted_span[0]:predicted_span[1]],
                                "extractor": "DIETClassifier", "confidence_entity": 0.8}]
                              if predicted_span else [])
        golds.append(Message(text, intent=gold_intent, entities=gold_entities))
        tokens = [[m.start(), m.end()] for m in re.finditer(r"\S+", text)]
        results.append({"text": text, "intent": {"name": predicted, "confidence": confidence},
                        "entities": predicted_entities, "text_tokens": tokens, "intent_ranking": []})
    return golds, results


def dump_dom(page: Path, query: str = "") -> str:
    url = page.resolve().as_uri() + query
    completed = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         f"--user-data-dir={page.parent / 'chromium-profile'}", "--virtual-time-budget=5000",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout


def rows_of(dom: str, table_id: str) -> list[str]:
    match = re.search(rf'<table id="{table_id}"[^>]*>.*?<tbody>(.*?)</tbody>', dom, re.S)
    assert match, f"table {table_id} not found"
    return re.findall(r"<tr[^>]*>.*?</tr>", match.group(1), re.S)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium (/usr/bin/chromium): apt-get install -y chromium")
    out = tmp_path_factory.mktemp("results")
    golds, results = case()
    summary = write_reports(evaluate(golds, results), out, info={"model": "models/m.tar.gz"})
    return out, summary, dump_dom(out / "index.html"), dump_dom(out / "index.html", "?q=paris")


def test_page_has_all_parts(report):
    out, summary, dom, _ = report
    for section in ("summary", "confused-pairs", "intents", "errors", "entities", "plots"):
        assert f'<section id="{section}">' in dom, section
    assert 'data-ready="1"' in dom  # the page's script ran to the end
    # summary numbers as written to summary.json
    assert f"{summary['intent']['accuracy']:.4f}" in dom
    assert f"{summary['entities']['DIETClassifier']['exact_f1']:.4f}" in dom
    # the most confused pairs: book -> search, search -> book, greet -> (none)
    confused = rows_of(dom, "confused-table")
    assert len(confused) == 3 and "(none)" in "".join(confused)
    # every intent error is in the searchable table, escaped
    errors = rows_of(dom, "intent-errors")
    assert len(errors) == len(json.loads((out / "intent_errors.json").read_text())) == 3
    assert html.escape("any sushi <near> oslo") in "".join(errors)
    assert "3 of 3 shown" in dom
    # per-entity scores with exact, overlap and token columns
    entity_rows = rows_of(dom, "entity-scores-DIETClassifier")
    assert len(entity_rows) == 1 and "city" in entity_rows[0]
    assert len(rows_of(dom, "entity-errors-DIETClassifier")) == 2


@requires_extra("plot")
def test_plots_are_embedded_and_decode(report):
    out, _, dom, _ = report
    images = re.findall(r'<img src="data:image/png;base64,', dom)
    # every PNG the report wrote is on the page: the intent matrix, histogram, reliability diagram
    # and fallback sweep, the entity matrix, histogram and reliability diagram
    written = sorted(path.name for path in out.glob("*.png"))
    assert written == ["DIETClassifier_confusion_matrix.png", "DIETClassifier_histogram.png",
                       "DIETClassifier_reliability.png", "fallback_sweep.png",
                       "intent_confusion_matrix.png", "intent_histogram.png", "intent_reliability.png"]
    assert len(images) == len(written)
    assert f'data-images-loaded="{len(images)}"' in dom
    assert "http://" not in dom and "https://" not in dom  # nothing fetched from the network


def test_search_filters_the_error_table(report):
    _, _, _, dom = report
    errors = rows_of(dom, "intent-errors")
    shown = [row for row in errors if "hidden" not in row.split(">", 1)[0]]
    assert len(shown) == 1 and "table for two in paris" in shown[0]
    assert "1 of 3 shown" in dom
