"""reviewed.yml: the project's YAML writer's output, read back unchanged by the loader and
``data validate``; hostile text survives or is left out and reported, never written changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nlu_engine.contract.errors import NLUError
from nlu_engine.review.writeback import HEADER, reviewed_path, write_reviewed
from nlu_engine.training_data import load_data
from tests.review.conftest import DATA, HOSTILE


def decision(text: str, intent: str, entities: list[dict[str, Any]] | None = None, at: float = 1.0,
             message_id: str | None = None) -> dict[str, Any]:
    return {"message_id": message_id or f"id-{text[:20]}-{at}", "text": text, "intent": intent,
            "entities": entities or [], "decided_at": at, "status": "labelled"}


def read_back(path: Path) -> list[tuple[str, str | None, list[tuple[Any, ...]]]]:
    data = load_data(path)
    return sorted((m.text, m.intent_response_key or m.intent,
                   [(e["entity"], e["start"], e["end"], e["value"], e.get("role")) for e in m.entities])
                  for m in data.messages)


def test_round_trip_keeps_texts_intents_entities_roles_values_and_retrieval_intents(tmp_path: Path) -> None:
    text = "fly from Berlin to NYC"
    entities = [{"entity": "city", "start": 9, "end": 15, "value": "Berlin", "role": "from"},
                {"entity": "city", "start": 19, "end": 22, "value": "New York"}]
    decisions = [decision(text, "book_flight", entities), decision("what is your name", "faq/ask_name"),
                 decision("two\nlines", "greet"), *(decision(t, "greet") for t in HOSTILE),
                 decision("a" * 1_000_000, "greet")]
    result = write_reviewed(decisions, tmp_path / "reviewed.yml")
    assert result.written == len(decisions) and result.left_out == []
    content = (tmp_path / "reviewed.yml").read_text(encoding="utf-8")
    assert content.startswith(HEADER) and 'version: ' in content
    expected = sorted((d["text"], d["intent"], [(e["entity"], e["start"], e["end"], e["value"], e.get("role"))
                                                 for e in d["entities"]]) for d in decisions)
    assert read_back(tmp_path / "reviewed.yml") == expected
    assert [p.name for p in tmp_path.iterdir()] == ["reviewed.yml"]  # no temporary file left


def test_annotation_syntax_and_outer_spaces_are_left_out_and_reported(tmp_path: Path) -> None:
    decisions = [decision("see [this](link) now", "greet", message_id="a"),
                 decision(" padded ", "greet", message_id="b"), decision("fine", "greet", message_id="c")]
    result = write_reviewed(decisions, tmp_path / "reviewed.yml")
    assert [mid for mid, _ in result.left_out] == ["a", "b"] and result.written == 1
    assert "entity annotation" in result.left_out[0][1]  # the YAML writer refuses it, in one line
    assert read_back(tmp_path / "reviewed.yml") == [("fine", "greet", [])]


def test_the_newest_decision_of_a_text_wins_and_no_decision_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "reviewed.yml"
    write_reviewed([decision("hi", "greet", at=1), decision("hi", "bye", at=2)], path)
    assert read_back(path) == [("hi", "bye", [])]
    write_reviewed([], path)
    assert not path.exists()


def test_a_file_the_review_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "reviewed.yml"
    path.write_text(DATA, encoding="utf-8")
    with pytest.raises(NLUError, match="was not written by nlu-engine review"):
        write_reviewed([decision("hi", "greet")], path)
    assert path.read_text(encoding="utf-8") == DATA
    write_reviewed([], path)
    assert path.read_text(encoding="utf-8") == DATA


def test_the_file_sits_in_the_data_folder_and_validates_with_the_project(tmp_path: Path) -> None:
    from nlu_engine.cli.main import main

    data = tmp_path / "data"
    data.mkdir()
    (data / "nlu.yml").write_text(DATA, encoding="utf-8")
    assert reviewed_path(data) == data / "reviewed.yml"
    assert reviewed_path(data / "nlu.yml") == data / "reviewed.yml"
    write_reviewed([decision(t, "greet") for t in HOSTILE], reviewed_path(data))
    assert main(["data", "validate", "--data", str(data), "--fail-on-warnings"]) == 0
    assert len(load_data(data).messages) == 4 + len(HOSTILE)
