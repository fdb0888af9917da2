"""benchmarks/studies/entity_errors.py: the error classes of slot filling on hand-made spans (the
figures of the study are in BENCHMARKS.md, "Where the entity errors are")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.studies import entity_errors
from benchmarks.studies.entity_errors import Outcome, analyse, class_table, classify, markdown
from nlu_engine.contract.message import Message


def kinds(outcomes: list[Outcome]) -> list[tuple[str, str]]:
    return sorted((o.kind, o.detail) for o in outcomes)


def test_each_class_of_error() -> None:
    gold = [("city", 0, 5), ("date", 10, 20), ("time", 30, 35), ("name", 40, 45), ("city", 50, 55)]
    predicted = [("city", 0, 5), ("time", 10, 20), ("time", 30, 38), ("city", 42, 44),
                 ("city", 60, 65), ("city", 51, 54)]
    assert kinds(classify(gold, predicted)) == [
        ("boundary", "too long"),   # time 30-35 predicted 30-38
        ("boundary", "too short"),  # city 50-55 predicted 51-54
        ("boundary+type", "too short"),  # name 40-45 predicted city 42-44
        ("exact", ""), ("spurious", ""),  # city 60-65 overlaps nothing
        ("type", ""),  # date 10-20 predicted time
    ]


def test_shifted_merged_split_and_missed() -> None:
    # one prediction over two gold entities: the larger overlap is paired, the other merged
    assert kinds(classify([("a", 0, 4), ("a", 5, 12)], [("a", 0, 12)])) == [
        ("boundary", "merged"), ("boundary", "too long")]
    # two predictions over one gold entity: one paired, the other split
    assert kinds(classify([("a", 0, 12)], [("a", 0, 4), ("b", 5, 12)])) == [
        ("boundary", "too short"), ("boundary+type", "split")]
    assert kinds(classify([("a", 0, 6)], [("a", 3, 9)])) == [("boundary", "shifted")]
    assert kinds(classify([("a", 0, 6)], [])) == [("missed", "")]


def test_every_gold_and_every_prediction_counted_once_and_the_f1_if_fixed() -> None:
    outcomes = classify([("a", 0, 4), ("a", 5, 12), ("b", 20, 25), ("c", 30, 33)],
                        [("a", 0, 12), ("b", 20, 25), ("d", 40, 42)])
    table = class_table(outcomes)
    assert (table["gold"], table["predicted"], table["exact"]) == (4, 3, 1)
    assert table["f1"] == pytest.approx(2 * 1 / 7)
    classes = table["classes"]
    assert classes["boundary"]["count"] == 2 and classes["boundary"]["detail"] == {"too long": 1, "merged": 1}
    assert classes["missed"]["count"] == 1 and classes["spurious"]["count"] == 1
    # boundary put right: the pair exact, the merged one found too -> 3 right of 4 gold, 4 predicted
    assert classes["boundary"]["f1_if_fixed"] == pytest.approx(2 * 3 / 8)
    # missed put right: one more found -> 2 right, 4 predicted; spurious dropped: 1 right, 2 predicted
    assert classes["missed"]["f1_if_fixed"] == pytest.approx(2 * 2 / 8)
    assert classes["spurious"]["f1_if_fixed"] == pytest.approx(2 * 1 / 6)
    assert sum(c["share"] for c in classes.values()) == pytest.approx(1.0)


def _entity(kind: str, start: int, end: int, confidence: float | None = None) -> dict:
    entity = {"entity": kind, "start": start, "end": end, "extractor": "DIETClassifier"}
    if confidence is not None:
        entity["confidence_entity"] = confidence
    return entity


def test_analysis_by_length_seen_values_and_confidence() -> None:
    text = "fly from new york to rome"
    golds = [Message(text, intent="fly", entities=[_entity("from", 9, 17), _entity("to", 21, 25)])]
    results = [{"text": text, "text_tokens": [[0, 3], [4, 8], [9, 12], [13, 17], [18, 20], [21, 25]],
                "entities": [_entity("from", 9, 17, 0.9), _entity("from", 21, 25, 0.6),
                             {**_entity("to", 21, 25), "extractor": "Other"}]}]
    seen = entity_errors.seen_values([Message("to rome", entities=[_entity("to", 3, 7)])])
    analysis = analyse(golds, results, "DIETClassifier", seen, examples=1)
    assert analysis["total"]["classes"]["type"]["count"] == 1
    assert analysis["by_length"]["2"] == {"gold": 1, "predicted": 1, "correct": 1, "precision": 1.0,
                                          "recall": 1.0, "f1": 1.0}
    assert analysis["by_length"]["1"]["f1"] == 0.0
    assert analysis["by_seen"]["seen as this type"]["gold"] == 1  # "rome" as `to`
    assert analysis["by_seen"]["seen as another type only"]["predicted"] == 1  # "rome" as `from`
    assert analysis["by_seen"]["unseen"]["correct"] == 1
    assert analysis["confidence"]["num_scored"] == 2 and analysis["confidence"]["precision"] == 0.5
    assert analysis["examples"]["type"] == [f"{text} | gold to 'rome' | predicted from 'rome'"]
    page = markdown(analysis)
    assert "| type | 1 | 100.0 % |" in page and "`confidence_entity` against exact-span" in page


def test_command_line_writes_the_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    test = tmp_path / "test.md"
    test.write_text("## intent:fly\n- to [rome](city)\n", encoding="utf-8")

    class Parser:
        @staticmethod
        def load(path: str) -> Parser:
            return Parser()

        def parse_batch(self, texts: list[str]) -> list[dict]:
            return [{"text": t, "entities": [_entity("city", 3, 7, 0.8)]} for t in texts]

    monkeypatch.setattr("nlu_engine.assembly.model.Model", Parser)
    assert entity_errors.main(["m.tar.gz", str(test), "--out", str(tmp_path / "e.json")]) == 0
    assert "exact-span F1 100.0" in capsys.readouterr().out
    assert json.loads((tmp_path / "e.json").read_text())["total"]["exact"] == 1
