"""``nlu-engine data validate --config``: the data checked against the config's ``language:`` and
the tokenizer it chose (issue 49)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.cli.main import main
from tests.extras import requires_extra

JA_DATA = """\
nlu:
- intent: book
  examples: |
    - [東京](city)駅までの新幹線を予約して
    - [大阪](city)行きの切符を買いたい
- intent: weather
  examples: |
    - 今日の天気を教えてください
    - 明日は雨が降りますか
"""


def config(language: str, *tokenizer_params: str) -> str:
    params = "".join(f"\n    {p}" for p in tokenizer_params)
    return f"language: {language}\npipeline:\n  - name: WhitespaceTokenizer{params}\n"


def warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str], config_text: str | None,
             *args: str) -> list[str]:
    (tmp_path / "nlu.yml").write_text(JA_DATA, encoding="utf-8")
    if config_text is not None:
        (tmp_path / "config.yml").write_text(config_text, encoding="utf-8")
    capsys.readouterr()
    assert main(["data", "validate", "--data", str(tmp_path / "nlu.yml"), *args]) == 0
    out = capsys.readouterr().out
    return [line.removeprefix("  - ") for line in out.splitlines() if line.startswith("  - ")]


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_japanese_data_under_language_en_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = warnings(tmp_path, capsys, config("en"))  # config.yml of the working folder
    assert sum("mostly written in Japanese" in w and "language is 'en'" in w for w in found) == 1


def test_an_annotation_off_the_whitespace_tokens_is_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kept.yml").write_text(config("ja", "language_tokenizer: false"), encoding="utf-8")
    found = warnings(tmp_path, capsys, None, "--config", "kept.yml")
    assert sum("does not fall on token boundaries" in w for w in found) == 2
    assert not any("mostly written in" in w for w in found)


@requires_extra("ja")
def test_the_tokenizer_language_chose_fits_the_annotations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sudachi reads 東京駅 as one word; the annotation teaches the cut, so nothing is warned."""
    found = warnings(tmp_path, capsys, config("ja"))
    assert not any("token boundaries" in w or "mostly written in" in w for w in found), found
    (tmp_path / "nosplit.yml").write_text(config("ja", "split_annotated_words: false")
                                          .replace("WhitespaceTokenizer", "SudachiTokenizer"),
                                          encoding="utf-8")
    found = warnings(tmp_path, capsys, None, "--config", "nosplit.yml")
    assert [w for w in found if "token boundaries" in w] == [
        "entity 'city' ('東京') in example '東京駅までの新幹線を予約して' does not fall on token "
        "boundaries (tokens: ['東京駅']); annotate whole tokens"]
