"""The Chinese example assistant trains and parses as it stands, and `nlu-engine test` reports on
it (HTML and plots) with the Chinese text intact."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from nlu_engine.assembly.model import Model
from tests.examples.test_projects import ROOT, cli
from tests.extras import requires_extra

pytestmark = requires_extra("zh")

ZH = ROOT / "examples" / "zh_assistant"


@pytest.fixture(scope="module")
def zh_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("zh_models")
    code, _, err = cli(ZH, "train", "--config", "config.yml", "--data", "data", "--out", str(out),
                       "--fixed-model-name", "zh", "--set", "DIETClassifier.epochs=50")
    assert code == 0, err
    assert "Traceback" not in err
    return out / "zh.tar.gz"


def test_the_chinese_assistant_parses_intents_and_exact_entities(zh_model: Path) -> None:
    model = Model.load(zh_model)
    result = model.parse("来一首韩雅乐的歌")
    assert result["intent"]["name"] == "play_music"
    assert [3, 6] in result["text_tokens"]  # the user dictionary's word, stored in the archive
    assert [(e["entity"], e["start"], e["end"], e["value"]) for e in result["entities"]] == [
        ("singer", 3, 6, "韩雅乐")
    ]
    result = model.parse("帝都明天冷吗")
    assert result["intent"]["name"] == "weather"
    assert {(e["entity"], e["value"]) for e in result["entities"]} == {("city", "北京"), ("date", "明天")}


TEST_DATA = """\
version: "3.1"
nlu:
- intent: 问候
  examples: |
    - 你好啊朋友
- intent: play_music
  examples: |
    - 播放[周杰伦](singer)的歌
"""


@requires_extra("plot")
def test_nlu_engine_test_reports_chinese_text_and_labels(zh_model: Path, tmp_path: Path) -> None:
    """A Chinese intent name the model does not know: an error whose text and labels the HTML
    report shows as written, and a confusion matrix drawn without missing glyphs."""
    data = tmp_path / "test.yml"
    data.write_text(TEST_DATA, encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, _, err = cli(ZH, "test", "-m", str(zh_model), "--data", str(data), "--out",
                           str(tmp_path / "results"))
    assert code == 0, err
    html = (tmp_path / "results" / "index.html").read_text(encoding="utf-8")
    assert "你好啊朋友" in html and "问候" in html
    for name in ("intent_report.json", "intent_errors.json", "DIETClassifier_report.json"):
        assert (tmp_path / "results" / name).is_file(), name
    assert (tmp_path / "results" / "intent_confusion_matrix.png").stat().st_size > 0
    assert not [w for w in caught if "missing from font" in str(w.message)]
