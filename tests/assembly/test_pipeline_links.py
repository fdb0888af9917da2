"""Declared links (``Component.links``): checked with the config, resolved by ``Pipeline.build``;
and the names the components know each other by (``Component.pipeline_name``), which come from
the config, not from a component's place in it."""

from __future__ import annotations

from typing import Any

import pytest

from nlu_engine.assembly.config import load_config, step_names
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.contract.errors import ConfigError

HEAD = [{"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"}]
DIET = {"name": "DIETClassifier", "epochs": 1}


def config(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"language": "en", "pipeline": [*HEAD, *steps]}


def refused(*steps: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as error:
        load_config(config(*steps))
    message = str(error.value)
    assert "\n" not in message
    return message


def test_a_combiner_needs_an_intent_classifier_that_records_its_scores_before_it() -> None:
    advice = "add DIETClassifier or LogisticRegressionClassifier above it"
    assert refused({"name": "IntentCombiner"}) == (
        f"<config>: IntentCombiner (step 3) needs an intent classifier before it: {advice}")
    # keyword matching leaves no scores to weigh
    assert refused({"name": "KeywordIntentClassifier"}, {"name": "IntentCombiner"}).endswith(advice)
    assert refused({"name": "IntentCombiner"}, DIET) == (
        "<config>: IntentCombiner (step 3) needs DIETClassifier (step 4) before it: move "
        "DIETClassifier above IntentCombiner")
    for scorer in ("LogisticRegressionClassifier", "SklearnIntentClassifier", "DIETClassifier"):
        load_config(config({"name": scorer}, {"name": "IntentCombiner"}))


def test_an_entity_chooser_needs_the_extractors_it_names_before_it() -> None:
    assert refused(DIET, {"name": "EntityChooser"}) == (
        "<config>: EntityChooser (step 4) names CRFEntityExtractor in `extractors`, which is not in "
        "the pipeline: add it above EntityChooser or leave it out of `extractors`")
    assert refused(DIET, {"name": "EntityChooser"}, {"name": "CRFEntityExtractor"}) == (
        "<config>: EntityChooser (step 4) needs CRFEntityExtractor (step 5) before it: move "
        "CRFEntityExtractor above EntityChooser")
    named = {"name": "EntityChooser", "extractors": ["DIETClassifier", "EntitySynonymMapper"]}
    assert refused(DIET, {"name": "EntitySynonymMapper"}, named) == (
        "<config>: EntityChooser (step 5) names EntitySynonymMapper (step 4) in `extractors`, which "
        "is not an entity extractor: add it above EntityChooser or leave it out of `extractors`")


def test_the_chooser_asks_the_extractors_it_names_and_no_other() -> None:
    chooser = {"name": "EntityChooser", "extractors": ["CRFEntityExtractor", "RegexEntityExtractor"]}
    pipeline = Pipeline.build(load_config(config(
        DIET, {"name": "CRFEntityExtractor"}, {"name": "RegexEntityExtractor"}, chooser)))
    asked = {c.component_name(): c.records_held_out_entities for c in pipeline.components[2:5]}
    assert asked == {"DIETClassifier": False, "CRFEntityExtractor": True, "RegexEntityExtractor": True}
    pipeline = Pipeline.build(load_config(config(DIET, {"name": "CRFEntityExtractor"},
                                                 {"name": "EntityChooser"})))
    assert pipeline.components[2].records_held_out_entities
    # built without the chooser, nothing is asked
    assert not Pipeline.build(load_config(config(DIET))).components[2].records_held_out_entities


def test_step_names_are_the_config_names_with_a_suffix_only_for_a_name_written_twice() -> None:
    assert step_names(["WhitespaceTokenizer", "CountVectorsFeaturizer", "CountVectorsFeaturizer",
                       "DIETClassifier"]) == [
        "WhitespaceTokenizer", "CountVectorsFeaturizer-1", "CountVectorsFeaturizer-2", "DIETClassifier"]


def test_moving_a_component_keeps_its_scores_and_features_names() -> None:
    """Scores and features are known by the name in the config: a component moved (or one
    added before it) keeps them."""
    def names(*steps: dict[str, Any]) -> dict[str, str]:
        pipeline = Pipeline.build(load_config(config(*steps)))
        return {c.component_name(): getattr(c, "scorer_name", getattr(c, "origin", str))()
                for c in pipeline.components if hasattr(c, "scorer_name") or hasattr(c, "origin")}

    lexical = {"name": "LexicalSyntacticFeaturizer"}
    first = names(lexical, {"name": "LogisticRegressionClassifier"}, DIET, {"name": "IntentCombiner"})
    moved = names(DIET, {"name": "LogisticRegressionClassifier"}, {"name": "IntentCombiner"}, lexical)
    assert first == moved == {
        "CountVectorsFeaturizer": "CountVectorsFeaturizer", "LexicalSyntacticFeaturizer":
        "LexicalSyntacticFeaturizer", "LogisticRegressionClassifier": "LogisticRegressionClassifier",
        "DIETClassifier": "DIETClassifier", "IntentCombiner": "IntentCombiner"}


def test_a_featurizers_list_may_name_a_featurizer_by_its_old_positional_name() -> None:
    """``CountVectorsFeaturizer_3`` (class and place, as models before names knew it) still
    names the featurizer at that place; the stored config keeps what the user wrote."""
    char = {"name": "CountVectorsFeaturizer", "analyzer": "char_wb"}
    cfg = load_config(config(char, {**DIET, "featurizers": ["CountVectorsFeaturizer_2"]},
                             {"name": "IntentCombiner", "featurizers": ["CountVectorsFeaturizer-1"]}))
    pipeline = Pipeline.build(cfg)
    assert [c.origin() for c in pipeline.components[1:3]] == [
        "CountVectorsFeaturizer-1", "CountVectorsFeaturizer-2"]
    assert pipeline.components[3].config.featurizers == ["CountVectorsFeaturizer-2"]
    assert pipeline.components[4].config.featurizers == ["CountVectorsFeaturizer-1"]
    assert cfg.as_dict()["pipeline"][3]["featurizers"] == ["CountVectorsFeaturizer_2"]


def test_a_pipeline_built_with_the_names_of_a_model_from_before_names_keeps_their_positions() -> None:
    """Fine-tuning a model that kept no names builds with none: every component is known by its
    class and place, as that model's stored state knows it."""
    cfg = load_config(config(DIET, {"name": "IntentCombiner"}))
    pipeline = Pipeline.build(cfg, names=[""] * len(cfg.steps))
    assert pipeline.components[1].origin() == "CountVectorsFeaturizer_1"
    assert pipeline.components[2].scorer_name() == "DIETClassifier_2"
