"""Pipeline.build hands a trainable encoder to the one component that fine-tunes it, or refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.contract.errors import ConfigError
from tests.extras import requires_extra
from tests.featurizers.tiny_bert import tiny_bert

pytestmark = requires_extra("lm")

DIET = {"name": "DIETClassifier", "epochs": 1}


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tiny_bert(tmp_path_factory.mktemp("lm") / "tiny-bert"))


def build(bert_dir: str, *after: dict[str, Any], **lm: Any) -> Pipeline:
    steps = [
        {"name": "WhitespaceTokenizer"},
        {"name": "LanguageModelFeaturizer", "model_weights": bert_dir, "trainable": True, **lm},
        {"name": "CountVectorsFeaturizer"},
        *after,
    ]
    return Pipeline.build(load_config({"language": "en", "pipeline": steps}))


def test_the_reader_gets_the_encoder(bert_dir: str) -> None:
    pipeline = build(bert_dir, DIET)
    featurizer, diet = pipeline.components[1], pipeline.components[3]
    assert diet.trainable_encoders == (featurizer,)


def test_frozen_encoders_are_handed_to_nobody(bert_dir: str) -> None:
    pipeline = build(bert_dir, DIET, {**DIET, "entity_recognition": False}, trainable=False)
    assert all(not getattr(c, "trainable_encoders", ()) for c in pipeline.components)


def test_a_second_reader_is_refused(bert_dir: str) -> None:
    with pytest.raises(ConfigError) as error:
        build(bert_dir, DIET, {"name": "LogisticRegressionClassifier"})
    message = str(error.value)
    assert "\n" not in message
    assert "LanguageModelFeaturizer (step 2) is trainable" in message
    assert "DIETClassifier (step 4), LogisticRegressionClassifier (step 5)" in message
    with pytest.raises(ConfigError, match=r"DIETClassifier \(step 4\), DIETClassifier \(step 5\)"):
        build(bert_dir, DIET, DIET)
    with pytest.raises(ConfigError, match=r"ResponseSelector \(step 5\) do"):
        build(bert_dir, DIET, {"name": "ResponseSelector", "epochs": 1})
    crf = {"name": "CRFEntityExtractor", "features": [["low"], ["low", "text_dense_features"], ["low"]]}
    with pytest.raises(ConfigError, match=r"CRFEntityExtractor \(step 5\) do"):
        build(bert_dir, DIET, crf)


def test_readers_that_leave_its_features_out_do_not_count(bert_dir: str) -> None:
    other = {**DIET, "featurizers": ["CountVectorsFeaturizer_2"]}
    pipeline = build(bert_dir, other, DIET, {"name": "CRFEntityExtractor"})
    assert pipeline.components[3].trainable_encoders == ()
    assert pipeline.components[4].trainable_encoders == (pipeline.components[1],)


def test_a_combiner_that_leaves_its_features_out_does_not_count(bert_dir: str) -> None:
    """The combiner's heads read only the sentence vectors of its ``featurizers``; with the
    fine-tuned encoder left out of them, DIET is its one reader."""
    combiner = {"name": "IntentCombiner", "featurizers": ["CountVectorsFeaturizer_2"]}
    pipeline = build(bert_dir, DIET, combiner)
    assert pipeline.components[3].trainable_encoders == (pipeline.components[1],)
    with pytest.raises(ConfigError, match=r"IntentCombiner \(step 5\) do"):
        build(bert_dir, DIET, {"name": "IntentCombiner"})


def test_a_reader_that_cannot_fine_tune_is_refused(bert_dir: str) -> None:
    with pytest.raises(ConfigError, match=r"LogisticRegressionClassifier \(step 4\), which reads its "
                       "features, cannot fine-tune it"):
        build(bert_dir, {"name": "LogisticRegressionClassifier"})
    with pytest.raises(ConfigError, match=r"ResponseSelector \(step 4\).*cannot fine-tune it"):
        build(bert_dir, {"name": "ResponseSelector", "epochs": 1})


def test_an_encoder_nothing_reads_is_refused(bert_dir: str) -> None:
    with pytest.raises(ConfigError, match="trainable but no later component reads its features"):
        build(bert_dir, {"name": "CRFEntityExtractor"})


def test_missing_weights_fail_when_the_pipeline_is_built(bert_dir: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        build(str(tmp_path / "no-such-model"), DIET)
    assert "neither a local directory nor an installed package" in str(error.value)
    assert "LanguageModelFeaturizer (step 2)" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="trainable_layers is 5 but the model"):
        build(bert_dir, DIET, trainable_layers=5)


def test_an_intent_classifier_whose_ranking_a_later_one_replaces_is_marked() -> None:
    """DIET before the IntentCombiner needs no calibrated ranking of its own (the combiner's is
    the message's); one whose ranking a component reads first (FallbackClassifier) does."""
    def built(*names: str) -> dict[str, bool]:
        pipeline = Pipeline.build(load_config({"language": "en", "pipeline": [
            {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
            *({"name": name} for name in names)]}))
        return {f"{c.component_name()}_{c.index}": c.ranking_superseded
                for c in pipeline.components if hasattr(c, "scorer_name")}

    assert built("DIETClassifier", "IntentCombiner", "FallbackClassifier") == {
        "DIETClassifier_2": True, "IntentCombiner_3": False}
    assert built("DIETClassifier", "FallbackClassifier", "LogisticRegressionClassifier") == {
        "DIETClassifier_2": False, "LogisticRegressionClassifier_4": False}
    assert built("DIETClassifier", "ResponseSelector") == {
        "DIETClassifier_2": False, "ResponseSelector_3": False}
    # keyword matching keeps an earlier prediction when nothing matches: it replaces nothing
    assert built("DIETClassifier", "KeywordIntentClassifier") == {
        "DIETClassifier_2": False, "KeywordIntentClassifier_3": False}
    assert built("LogisticRegressionClassifier", "KeywordIntentClassifier", "IntentCombiner") == {
        "LogisticRegressionClassifier_2": True, "KeywordIntentClassifier_3": True, "IntentCombiner_4": False}
