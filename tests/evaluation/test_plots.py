"""Plots with labels the default font cannot draw (Chinese intent names)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from nlu_engine.evaluation import plots
from tests.extras import requires_extra

pytestmark = requires_extra("plot")

CHINESE = ["问候", "天气", "play_music"]


def _draw(path: Path) -> list[str]:
    """Draw a confusion matrix of the Chinese labels; the warnings matplotlib gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plots.plot_confusion_matrix(CHINESE, [[3, 1, 0], [0, 2, 0], [0, 0, 4]], path)
    return [str(w.message) for w in caught]


def test_latin_labels_keep_the_default_font() -> None:
    assert plots.drawable_labels(["greet", "", "café"]) == (
        ["greet", "(none)", "café"], [plots.DEFAULT_FAMILY],
    )


def test_chinese_labels_are_drawn_with_a_cjk_font_when_one_is_installed(tmp_path: Path) -> None:
    family = plots.cjk_family()
    if family is None:
        pytest.skip("no CJK font installed (Debian: fonts-wqy-zenhei or fonts-noto-cjk)")
    names, families = plots.drawable_labels(CHINESE)
    assert names == CHINESE and families == [plots.DEFAULT_FAMILY, family]
    messages = _draw(tmp_path / "matrix.png")
    assert not [m for m in messages if "missing from font" in m], messages
    assert (tmp_path / "matrix.png").stat().st_size > 0


def test_without_a_cjk_font_labels_need_no_glyphs_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plots, "cjk_family", lambda: None)
    names, families = plots.drawable_labels(CHINESE)
    assert names == ["\\u95ee\\u5019", "\\u5929\\u6c14", "play_music"]
    assert families == [plots.DEFAULT_FAMILY]
    messages = _draw(tmp_path / "matrix.png")
    assert not [m for m in messages if "missing from font" in m], messages
