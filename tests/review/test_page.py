"""The review page in a real browser (Debian's Chromium through Playwright): one keystroke labels a
message, one a group of near-duplicates; an entity span is edited by selecting text; undo; a new
intent; the YAML written read back; hostile text shown as text. Each test serves a fresh log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.review.browser import browser_page, requires_browser, served
from tests.review.conftest import DATA, HOSTILE, make_log, row

pytestmark = requires_browser()


@pytest.fixture(scope="module")
def page() -> Any:
    with browser_page() as opened:
        yield opened


def settings(project: dict[str, Path], **extra: Any) -> Any:
    from nlu_engine.review.app import ReviewSettings

    return ReviewSettings(db=str(project["db"]), data=project["data"], **extra)


def labelled(project: dict[str, Path]) -> dict[str, str]:
    """text -> intent of the labelled decisions in the database."""
    from nlu_engine.review.decisions import open_review

    store = open_review(str(project["db"]))
    try:
        return {d["text"]: d["intent"] for d in store.labelled()}
    finally:
        store.close()


def reviewed(project: dict[str, Path]) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """text -> (intent, [(entity, surface)]) as the project's loader reads reviewed.yml."""
    from nlu_engine.training_data import load_data

    data = load_data(project["data"] / "reviewed.yml")
    return {m.text: (m.intent, [(e["entity"], m.text[e["start"]:e["end"]]) for e in m.entities])
            for m in data.messages}


def open_page(page: Any, url: str) -> None:
    page.goto(url + "/")
    page.wait_for_selector("#ranking li")


def press(page: Any, key: str, done: str) -> None:
    """Press ``key`` and wait until the status line says ``done``."""
    page.evaluate("document.getElementById('status').textContent = ''")
    page.keyboard.press(key)
    page.wait_for_function("(want) => document.getElementById('status').textContent.includes(want)", arg=done)


def select_text(page: Any, start: int, end: int) -> None:
    """Select characters ``start:end`` of the message as a mouse would, and release the button."""
    page.evaluate("""([start, end]) => {
        const node = document.getElementById('text').firstChild;
        const range = document.createRange();
        range.setStart(node, start); range.setEnd(node, end);
        const selection = window.getSelection();
        selection.removeAllRanges(); selection.addRange(range);
        document.getElementById('text').dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));
    }""", [start, end])


def test_one_keystroke_labels_a_group_then_a_message_and_undo_reopens_it(page: Any, project: dict) -> None:
    with served(settings(project)) as url:
        open_page(page, url)
        # the fallback group ranks first: its three near-duplicates, labelled with one key
        assert page.text_content("#text") == "where is my order"
        assert page.locator("#members li").count() == 3
        press(page, "2", "3 labelled book_flight")
        assert labelled(project) == {"where is my order": "book_flight", "Where is my order?": "book_flight",
                                     "where is my order ??": "book_flight"}
        # the next one, accepted with Enter: the model's intent and its entity
        assert page.text_content("#text") == "I want to fly Berlin today"
        press(page, "Enter", "1 labelled book_flight")
        written = reviewed(project)
        assert written["I want to fly Berlin today"] == ("book_flight", [("city", "Berlin")])
        assert len(written) == 4
        press(page, "u", "undone: 1 messages")
        assert page.text_content("#text") == "I want to fly Berlin today"
        assert "I want to fly Berlin today" not in reviewed(project)
        assert len(labelled(project)) == 3


def test_enter_does_not_label_a_fallback_or_a_guess_below_the_threshold(page: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "nlu.yml").write_text(DATA, encoding="utf-8")
    unsure = row("parcel status", "greet", 0.2, [("greet", 0.2), ("book_flight", 0.1)], parsed_at=2)
    rows = [row("where is my parcel", "nlu_fallback", 0.3, [("nlu_fallback", 0.3), ("greet", 0.08)],
                parsed_at=1), unsure]
    project = {"data": data, "db": make_log(tmp_path / "log.db", rows)}
    with served(settings(project)) as url:
        open_page(page, url)
        assert page.text_content("#text") == "where is my parcel"
        assert "the fallback caught this message: Enter does not accept it. Pick its intent with a number, " \
               "o (out of scope) or n" in page.text_content("#guard")
        assert page.is_visible("#guard") and page.is_disabled("#accept")
        for key in ("Enter", "a"):
            press(page, key, "Enter does not accept it")
            assert page.get_attribute("#status", "class") == "error"
        assert labelled(project) == {}
        press(page, "1", "1 labelled greet")  # a number does
        # no fallback, but the intent is below the fallback threshold (0.3 by default)
        assert page.text_content("#text") == "parcel status"
        press(page, "Enter", "(0.200) is below the fallback threshold (0.3): Enter does not accept it")
        press(page, "o", "1 labelled out_of_scope")
        assert labelled(project) == {"where is my parcel": "greet", "parcel status": "out_of_scope"}
    # under a lower threshold, the same intent is the model's answer: Enter accepts it
    project = {"data": data, "db": make_log(tmp_path / "other.db", [unsure])}
    with served(settings(project, fallback_threshold=0.1)) as url:
        open_page(page, url)
        assert page.is_hidden("#guard") and page.is_enabled("#accept")
        press(page, "Enter", "1 labelled greet")
        assert labelled(project) == {"parcel status": "greet"}


def test_entity_span_by_selection_and_a_new_intent(page: Any, project: dict) -> None:
    with served(settings(project)) as url:
        open_page(page, url)
        page.keyboard.press("j")  # past the fallback group
        page.keyboard.press("j")  # past "I want to fly Berlin today"
        assert page.text_content("#text") == "a flight to Berlin please"
        select_text(page, 12, 19)  # "Berlin " - the trailing space is trimmed
        assert page.is_visible("#entity-type")
        page.keyboard.type("destination")
        page.keyboard.press("Enter")
        assert page.text_content("#text mark.entity") == "Berlin"
        assert page.get_attribute("#text mark.entity", "data-type") == "destination"
        press(page, "Enter", "1 labelled book_flight")
        assert reviewed(project)["a flight to Berlin please"] == ("book_flight", [("destination", "Berlin")])
        # a new intent: n, its name, Enter
        page.keyboard.press("k")
        page.keyboard.press("k")
        assert page.text_content("#text") == "where is my order"
        page.keyboard.press("n")
        page.keyboard.type("check_order")
        press(page, "Enter", "3 labelled check_order")
        assert {text: intent for text, (intent, _) in reviewed(project).items()} == {
            "a flight to Berlin please": "book_flight", "where is my order": "check_order",
            "Where is my order?": "check_order", "where is my order ??": "check_order"}
        from nlu_engine.cli.main import main

        assert main(["data", "validate", "--data", str(project["data"])]) == 0


def test_hostile_text_is_shown_as_text_and_written_unchanged(page: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "nlu.yml").write_text(DATA, encoding="utf-8")
    megabyte = "a" * 1_000_000
    texts = [*HOSTILE, megabyte, "[click](javascript:alert) me"]
    # shown in this order: the first the least confident
    rows = [row(text, "greet", 0.3 + i / 100, [("greet", 0.4), ("book_flight", 0.38)])
            for i, text in enumerate(texts)]
    project = {"data": data, "db": make_log(tmp_path / "log.db", rows)}
    with served(settings(project)) as url:
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("dialog", lambda dialog: (errors.append("dialog " + dialog.message), dialog.dismiss()))
        open_page(page, url)
        for text in texts:
            shown = page.text_content("#text")
            assert shown == text
            assert page.locator("#text *").count() == 0  # no element came out of the text
            press(page, "1", "1 labelled greet")
        assert page.title() == "nlu-engine review" and errors == []
        assert page.locator("script").count() == 1  # the page's own
    written = reviewed(project)
    assert set(written) == set(texts) - {"[click](javascript:alert) me"}  # annotation syntax: left out
    assert all(written[text] == ("greet", []) for text in written)
    assert labelled(project)["[click](javascript:alert) me"] == "greet"  # kept in the database


def test_two_reviewers_never_overwrite_each_other(page: Any, project: dict) -> None:
    import httpx

    with served(settings(project)) as url:
        open_page(page, url)
        first = httpx.get(url + "/api/inbox", trust_env=False).json()["groups"][0]
        # another reviewer decides the group the page shows first
        other = httpx.post(url + "/api/decide", trust_env=False, json={
            "intent": "greet", "messages": [{"id": m["id"], "version": 0} for m in first["messages"]]})
        assert other.status_code == 200
        page.keyboard.press("1")
        page.wait_for_selector("#status.error")
        assert "decided by someone else" in page.text_content("#status")
        assert set(labelled(project).values()) == {"greet"}
        assert page.text_content("#text") == "I want to fly Berlin today"  # the page reloaded its inbox




LOGREG = {"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
                                         {"name": "LogisticRegressionClassifier"}]}


def test_train_fine_tunes_on_the_review_and_shows_what_it_fixes(page: Any, project: dict) -> None:
    from nlu_engine.assembly.model import train

    base = train(LOGREG, project["data"] / "nlu.yml", out=project["root"] / "models",
                 fixed_model_name="base", log=None)
    with served(settings(project, model=str(base))) as url:
        open_page(page, url)
        page.keyboard.press("n")
        page.keyboard.type("check_order")
        press(page, "Enter", "3 labelled check_order")
        page.click("#train")
        finished = "() => /^(done|failed)/.test(document.getElementById('train-status').textContent)"
        page.wait_for_function(finished, timeout=120_000)
        shown = page.text_content("#train-status")
        assert "reviewed: 3 messages, accuracy 0.0% → 100.0%; fixes 3, breaks 0" in shown
    archives = sorted(p.name for p in (project["root"] / "models").glob("*.tar.gz"))
    assert archives[0] == "base.tar.gz" and archives[1].startswith("reviewed-") and len(archives) == 2
