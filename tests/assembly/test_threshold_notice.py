"""Training says, in one notice, when the FallbackClassifier threshold sends more than a tenth of
the held-out examples to nlu_fallback (``classifiers.fallback.training_notice``), after a
training from scratch and after ``--finetune``; never for the shipped pipelines' 0.3 on data/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.model import train
from nlu_engine.assembly.persistence import load_archive
from nlu_engine.classifiers.fallback import held_out_predictions
from tests.conftest import PROJECT_ROOT

NOTICE_START = "notice: FallbackClassifier threshold 0.9 sends "
NOTICE_END = ("% of the held-out examples to nlu_fallback; ", " keeps in-scope accuracy within a "
              "point of no fallback (confidences here are calibrated: README, Rasa projects)")


def config(threshold: float) -> dict[str, Any]:
    return {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
        {"name": "FallbackClassifier", "threshold": threshold, "ambiguity_threshold": 0.0}]}


def notices(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("notice: FallbackClassifier threshold")]


@pytest.fixture(scope="module")
def unsure_model(tmp_path_factory: pytest.TempPathFactory, noisy_data_path: Path) -> tuple[Path, list[str]]:
    """A model whose threshold 0.9 sends most held-out examples to the fallback, and its log."""
    lines: list[str] = []
    archive = train(config(0.9), noisy_data_path, out=tmp_path_factory.mktemp("models"),
                    fixed_model_name="unsure", log=lines.append)
    return archive, lines


def test_a_threshold_that_sends_most_examples_to_the_fallback_gets_one_notice(
        unsure_model: tuple[Path, list[str]]) -> None:
    archive, lines = unsure_model
    [notice] = notices(lines)
    assert notice.startswith(NOTICE_START)
    share, rest = notice.removeprefix(NOTICE_START).split(" ", 1)
    assert float(share) > 10.0
    suggested = rest.removeprefix(NOTICE_END[0]).removesuffix(NOTICE_END[1])
    assert 0.0 <= float(suggested) < 0.9 and len(suggested) == 4  # e.g. 0.35
    # the numbers are the stored classifier's held-out predictions
    pipeline, _, _ = load_archive(archive)
    held_out = held_out_predictions(pipeline.components)
    assert held_out is not None
    confidences, _ = held_out
    assert float(share) == pytest.approx(100 * sum(c < 0.9 for c in confidences) / len(confidences), abs=0.05)
    # it comes after the components trained, before the archive is written
    assert lines.index(notice) > max(i for i, line in enumerate(lines) if "trained in" in line)
    assert lines.index(notice) < next(i for i, line in enumerate(lines) if line.startswith("model written"))


def test_a_threshold_that_keeps_most_examples_gets_none(tmp_path: Path, noisy_data_path: Path) -> None:
    lines: list[str] = []
    archive = train(config(0.3), noisy_data_path, out=tmp_path, log=lines.append)
    held_out = held_out_predictions(load_archive(archive)[0].components)
    assert held_out is not None  # the classifier did hold examples out: the notice had its data
    assert sum(c < 0.3 for c in held_out[0]) <= len(held_out[0]) / 10
    assert notices(lines) == []


def test_the_notice_after_finetune(unsure_model: tuple[Path, list[str]], tmp_path: Path,
                                   noisy_data_path: Path) -> None:
    archive, first = unsure_model
    lines: list[str] = []
    train(None, noisy_data_path, out=tmp_path, finetune=archive, log=lines.append)
    assert any(line.startswith("fine-tuning ") for line in lines)
    assert notices(lines) == notices(first)  # the same data: the classifier is reused as it was


def test_no_notice_for_the_shipped_threshold_on_the_projects_data(tmp_path: Path) -> None:
    """pipelines/diet.yml (FallbackClassifier at 0.3) on data/nlu.yml; the epochs are cut, which
    leaves the held-out predictions as they are (the sentence head ranks these few examples)."""
    lines: list[str] = []
    archive = train("diet", PROJECT_ROOT / "data" / "nlu.yml", out=tmp_path, log=lines.append,
                    overrides=["DIETClassifier.epochs=1", "ResponseSelector.epochs=1"])
    held_out = held_out_predictions(load_archive(archive)[0].components)
    assert held_out is not None and len(held_out[0]) >= 20
    assert notices(lines) == []
