"""An intent with one example, in the shipped default pipeline (``pipelines/diet.yml``): it trains
in both of DIET's regimes, never held out for calibration (issue 40, bad input and edges).

- few examples an intent (the sentence head ranks the intents, calibrated by cross-fitting): one
  notice names the intent that could not be held out;
- ``sentence_head_below: 0`` (the network ranks them, calibrated on a held-out share): the share
  comes from the other intents, no notice.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.classifiers.diet.component import DIETClassifier
from nlu_engine.contract.errors import NOTICE
from nlu_engine.training_data import load_data
from tests.classifiers.few_shot_data import FRAMES, TOPICS

#: the shipped pipeline, small and short enough for a test
FAST = ["DIETClassifier.epochs=1", "DIETClassifier.transformer_size=16",
        "DIETClassifier.number_of_transformer_layers=1", "ResponseSelector.epochs=1"]


def write_nlu(path: Path, intents: int, per_intent: int) -> Path:
    """``intents`` topics with ``per_intent`` distinct examples each, and 'phone' with one."""
    lines = ["nlu:"]
    for intent, words in list(TOPICS.items())[:intents]:
        texts = [frame.format(word) for frame in FRAMES for word in words][:per_intent]
        lines += [f"- intent: {intent}", "  examples: |", *(f"    - {t}" for t in texts)]
    lines += ["- intent: phone", "  examples: |", "    - call my mother"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def diet_of(archive: Path) -> tuple[Model, DIETClassifier]:
    model = Model.load(archive)
    return model, next(c for c in model.pipeline.components if isinstance(c, DIETClassifier))


def notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == NOTICE and "DIET" in r.getMessage()]


def test_the_sentence_head_never_holds_out_the_single_example_and_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    data = write_nlu(tmp_path / "nlu.yml", intents=3, per_intent=8)  # 24 examples cross-fitted
    with caplog.at_level(NOTICE, logger="nlu_engine"):
        archive = train("diet", str(data), out=str(tmp_path), fixed_model_name="m", overrides=FAST,
                        log=None)
    assert notices(caplog) == [
        "DIETClassifier: intents with one example cannot be held out (phone); their confidences "
        "are calibrated on the other intents' examples"]
    model, diet = diet_of(archive)
    assert diet.head_ is not None and diet.calibration_.notes["cross_fitted"]
    assert diet.calibration_.examples == 24  # every example but the single one, out of fold
    result = model.parse("call my mother")
    assert result["intent"]["name"] == "phone"
    assert {r["name"] for r in result["intent_ranking"]} >= {"phone", "weather", "music", "food"}


def test_the_old_regime_holds_out_a_share_of_the_other_intents(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    data = write_nlu(tmp_path / "nlu.yml", intents=4, per_intent=10)
    overrides = [*FAST, "DIETClassifier.sentence_head_below=0", "DIETClassifier.calibration_share=0.5"]
    with caplog.at_level(NOTICE, logger="nlu_engine"):
        archive = train("diet", str(data), out=str(tmp_path), fixed_model_name="m",
                        overrides=overrides, log=None)
    assert notices(caplog) == []
    model, diet = diet_of(archive)
    assert diet.head_ is None
    assert diet.calibration_.calibrated and not diet.calibration_.notes.get("cross_fitted")
    assert diet.calibration_.examples == 20  # half of each topic's 10; 'phone' is never held out
    assert len(load_data(data).messages) == 41
    ranking = model.parse("call my mother")["intent_ranking"]
    assert "phone" in {r["name"] for r in ranking}
    assert all(0.0 <= r["confidence"] <= 1.0 for r in ranking)


def test_too_few_examples_to_calibrate_is_still_one_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Two intents with one example each and nothing else: nothing can be held out at all."""
    data = tmp_path / "nlu.yml"
    data.write_text("nlu:\n- intent: greet\n  examples: |\n    - hello there\n"
                    "- intent: bye\n  examples: |\n    - see you\n", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="nlu_engine"):
        archive = train("diet", str(data), out=str(tmp_path), fixed_model_name="m", overrides=FAST,
                        log=None)
    assert notices(caplog) == [
        "DIETClassifier: too few examples to hold 20 out by cross-fitting (intents with one example "
        "are never held out: bye, greet); its confidences are not calibrated"]
    model, diet = diet_of(archive)
    assert not diet.calibration_.calibrated
    assert model.parse("see you")["intent"]["name"] in {"greet", "bye"}
