"""benchmarks/studies/diet_probe.py: DIET on the sentence vector beside the logistic-regression
probe, on data small enough for a test (the figures of the study are in BENCHMARKS.md, "DIET's own share")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.studies import diet_probe
from tests.classifiers.few_shot_data import FRAMES, TOPICS


def _write(path: Path, frames: list[str]) -> Path:
    lines = []
    for intent, words in TOPICS.items():
        lines.append(f"## intent:{intent}")
        lines += [f"- {frame.format(word)}" for frame in frames for word in words]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_settings_are_read_as_yaml_and_a_variant_carries_its_label() -> None:
    read = diet_probe.parse_assignments("drop_rate=0; hidden_layers_sizes={text: [], label: []}", "--set")
    assert read == {"drop_rate": 0, "hidden_layers_sizes": {"text": [], "label": []}}
    assert diet_probe.parse_variant("lr x10: learning_rate=0.01") == ("lr x10", {"learning_rate": 0.01})
    assert diet_probe.parse_variant("epochs=40") == ("epochs=40", {"epochs": 40})


def test_a_malformed_or_unknown_setting_stops_in_one_line(tmp_path: Path) -> None:
    data = _write(tmp_path / "train.md", FRAMES[:2])
    with pytest.raises(SystemExit, match="'drop_rate' is not key=value"):
        diet_probe.parse_assignments("drop_rate", "--set")
    with pytest.raises(SystemExit, match="no such file"):
        diet_probe.main(["--data", str(tmp_path / "missing.md"), "--test", str(data)])
    with pytest.raises(SystemExit, match=r"variant 'defaults': .*no_such_parameter"):
        diet_probe.main(["--data", str(data), "--test", str(data), "--set", "no_such_parameter=1"])


def test_diet_and_the_probe_are_scored_on_the_same_test_messages(tmp_path: Path, capsys) -> None:
    train = _write(tmp_path / "train.md", FRAMES[:5])
    test = _write(tmp_path / "test.md", FRAMES[5:])
    out = tmp_path / "result.json"
    diet_probe.main(["--data", str(train), "--test", str(test), "--set", "epochs=3",
                     "--variant", "no dropout: drop_rate=0", "--variant", "wide: embedding_dimension=32",
                     "--out", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["train_examples"] == 100 and result["test_examples"] == 60
    assert [v["label"] for v in result["variants"]] == ["no dropout", "wide"]
    assert result["variants"][0]["settings"] == {"epochs": 3, "drop_rate": 0}
    assert all(v["epochs"] == 3 and 0.0 <= v["accuracy"] <= 1.0 for v in result["variants"])
    # four topical intents the sentence encoder tells apart: the probe learns them
    assert result["probe"]["accuracy"] >= 0.9
    assert "| no dropout |" in capsys.readouterr().out
