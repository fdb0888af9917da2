"""The Train button's runs: the commands it starts, and nothing started before any decision."""

from __future__ import annotations

from pathlib import Path

from nlu_engine.review.loop import Trainer, compare_sets


def test_a_data_file_gets_the_reviewed_file_named_beside_it(tmp_path: Path) -> None:
    data = tmp_path / "nlu.yml"
    data.write_text("version: '3.1'\n", encoding="utf-8")
    trainer = Trainer("models/base.tar.gz", data, tmp_path / "reviewed.yml", "log.db", ["test.yml"])
    train, compare = trainer.commands(tmp_path / "models" / "base.tar.gz", "new", "report.json")
    assert train[train.index("train"):] == ["train", "--finetune", str(tmp_path / "models" / "base.tar.gz"),
                                            "--data", str(data), "--data", str(tmp_path / "reviewed.yml"),
                                            "--out", str(tmp_path / "models"), "--fixed-model-name", "new"]
    assert compare[compare.index("review"):] == [
        "review", "compare", "--old", str(tmp_path / "models" / "base.tar.gz"),
        "--new", str(tmp_path / "models" / "new.tar.gz"), "--db", "log.db", "--test", "test.yml",
        "--json", "report.json"]
    folder_trainer = Trainer("m", tmp_path, tmp_path / "reviewed.yml", "log.db")
    train, _ = folder_trainer.commands(Path("m.tar.gz"), "new", "r.json")
    assert train.count("--data") == 1


def test_nothing_trains_before_a_decision(tmp_path: Path) -> None:
    trainer = Trainer("m", tmp_path, tmp_path / "reviewed.yml", "log.db")
    trainer.start()
    assert trainer.status() == {"state": "failed", "log": "nothing reviewed yet: label some messages first"}


class Fixed:
    """A model answering each text's intent from a table."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def parse_batch(self, texts: list[str]) -> list[dict]:
        return [{"intent": {"name": self.answers[text]}} for text in texts]


def test_compare_counts_fixes_and_breaks() -> None:
    examples = [("a", "x"), ("b", "y"), ("c", "z"), ("d", "w")]
    old = Fixed({"a": "x", "b": "q", "c": "z", "d": "q"})
    new = Fixed({"a": "q", "b": "y", "c": "z", "d": "w"})
    report = compare_sets(old, new, {"test": examples})["test"]
    assert (report["old_accuracy"], report["new_accuracy"]) == (0.5, 0.75)
    assert [e["text"] for e in report["fixed_examples"]] == ["b", "d"]
    assert report["broken_examples"] == [{"text": "a", "intent": "x", "old": "x", "new": "q"}]
