"""Incremental training, pipeline level (``nlu_engine/assembly/finetune.py``): the compatibility check,
the per-component fingerprints and the reuse / resume / from-scratch decisions.

These use the no-TensorFlow pipeline (count vectors + logistic regression) on the tiny data set;
DIET's resuming is tested in ``tests/classifiers/diet/test_diet_resume.py``, and the command and
its edges (no archive, corrupt archive, interruption) in ``tests/assembly/test_model_api.py`` and
``tests/cli/test_cli.py``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, ClassVar

import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.finetune import (
    RESUMED,
    RETRAINED,
    REUSED,
    check_compatible,
    finetune_pipeline,
    fingerprints,
    summary_lines,
)
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.contract.component import CannotResume, Featurizer, FinetuneOptions
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import load_data

LOGREG_STEPS: list[dict[str, Any]] = [
    {"name": "WhitespaceTokenizer"},
    {"name": "CountVectorsFeaturizer"},
    {"name": "CountVectorsFeaturizer", "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 3},
    {"name": "LogisticRegressionClassifier"},
    {"name": "RegexEntityExtractor"},
    {"name": "EntitySynonymMapper"},
    {"name": "FallbackClassifier"},
]


def config(steps: list[dict[str, Any]] | None = None, language: str = "en") -> Any:
    return load_config({"language": language, "pipeline": steps or LOGREG_STEPS})


@pytest.fixture(scope="module")
def tiny(tiny_data_path: Path) -> TrainingData:
    return load_data(tiny_data_path)


def without_intent(data: TrainingData, intent: str) -> TrainingData:
    return data.with_messages([m for m in data.messages if m.intent != intent])


def trained(data: TrainingData, steps: list[dict[str, Any]] | None = None) -> tuple[Pipeline, list[str]]:
    cfg = config(steps)
    pipeline = Pipeline.build(cfg)
    pipeline.train(data, log=None)
    return pipeline, fingerprints(cfg, pipeline.components, data)


def decisions(outcomes: list[Any]) -> list[str]:
    return [o.decision for o in outcomes]


# --- the compatibility check ---------------------------------------------------------------------
def test_the_same_config_is_compatible() -> None:
    check_compatible(config(), config(), "m.tar.gz")


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        ({"language": "de"}, ["language is 'en'", "'de'"]),
        ({"steps": [*LOGREG_STEPS[:3], {"name": "KeywordIntentClassifier"}, *LOGREG_STEPS[4:]]},
         ["step 4 is LogisticRegressionClassifier in the model and KeywordIntentClassifier"]),
        ({"steps": LOGREG_STEPS[:-1]}, ["only the model's pipeline has FallbackClassifier"]),
        ({"steps": [*LOGREG_STEPS, {"name": "KeywordIntentClassifier"}]},
         ["only the config's pipeline has KeywordIntentClassifier"]),
        ({"steps": [*LOGREG_STEPS[:2], {**LOGREG_STEPS[2], "max_ngram": 4}, *LOGREG_STEPS[3:]]},
         ["CountVectorsFeaturizer (step 3)", "'max_ngram' = 3 in the model and 4 in the config"]),
    ],
)
def test_a_different_pipeline_parameter_or_language_is_refused_in_one_line(
    change: dict[str, Any], fragments: list[str]
) -> None:
    with pytest.raises(ConfigError) as caught:
        check_compatible(config(), config(change.get("steps"), change.get("language", "en")), "m.tar.gz")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("cannot fine-tune 'm.tar.gz': ")
    assert "train from scratch without --finetune" in message
    for fragment in fragments:
        assert fragment in message


def test_parameters_a_component_declares_free_may_differ() -> None:
    diet = [LOGREG_STEPS[0], LOGREG_STEPS[1], {"name": "DIETClassifier", "epochs": 3}]
    changed = [*diet[:2], {"name": "DIETClassifier", "epochs": 7, "show_progress": False}]
    check_compatible(config(diet), config(changed), "m.tar.gz")
    with pytest.raises(ConfigError, match="'transformer_size' = 256 in the model and 64"):
        check_compatible(config(diet), config([*diet[:2], {**diet[2], "transformer_size": 64}]), "m")


# --- fingerprints ----------------------------------------------------------------------------------
def test_fingerprints_follow_config_data_and_upstream(tiny: TrainingData) -> None:
    cfg = config()
    components = Pipeline.build(cfg).components
    base = fingerprints(cfg, components, tiny)
    assert len(set(base)) == len(base)  # every component its own
    assert fingerprints(cfg, components, tiny) == base  # stable

    more = tiny.with_messages([*tiny.messages, Message("good evening", intent="greet")])
    after = fingerprints(cfg, components, more)
    # the tokenizer learns nothing from data and comes first; everything after it changes
    # (the fallback through the featurizers before it, but it is reused: it learns nothing)
    assert [a == b for a, b in zip(base, after, strict=True)] == [True] + [False] * 6

    # a parameter of the first featurizer reaches the ones after it through the upstream chain
    steps = [LOGREG_STEPS[0], {**LOGREG_STEPS[1], "lowercase": False}, *LOGREG_STEPS[2:]]
    changed_cfg = config(steps)
    changed = fingerprints(changed_cfg, Pipeline.build(changed_cfg).components, tiny)
    assert changed[0] == base[0]
    assert all(a != b for a, b in zip(base[1:6], changed[1:6], strict=True))


def test_diet_does_not_see_a_new_synonym(tiny: TrainingData) -> None:
    """The featurizers and DIET without ``entity_swaps`` learn from the examples; a new synonym
    only reaches the synonym mapper, so fine-tuning retrains that alone."""
    steps = [*LOGREG_STEPS[:2], {"name": "DIETClassifier", "entity_swaps": 0},
             {"name": "EntitySynonymMapper"}, {"name": "ResponseSelector"}]
    cfg = config(steps)
    components = Pipeline.build(cfg).components
    more = dataclasses.replace(tiny, synonyms={**tiny.synonyms, "big apple": "New York"})
    base, after = fingerprints(cfg, components, tiny), fingerprints(cfg, components, more)
    assert [a == b for a, b in zip(base, after, strict=True)] == [True, True, True, False, True]
    answers = dataclasses.replace(tiny, responses={"utter_faq/hours": [{"text": "9 to 5"}]})
    changed = fingerprints(cfg, components, answers)
    # new responses reach the response selector (and the synonym mapper, which sees all the data)
    assert [a == b for a, b in zip(base, changed, strict=True)] == [True, True, True, False, False]


def test_the_regex_featurizer_sees_the_regex_and_lookup_sections_only(tiny: TrainingData) -> None:
    steps = [LOGREG_STEPS[0], {"name": "RegexFeaturizer"}, *LOGREG_STEPS[1:4]]
    cfg = config(steps)
    components = Pipeline.build(cfg).components
    base = fingerprints(cfg, components, tiny)
    more = tiny.with_messages([*tiny.messages, Message("good evening", intent="greet")])
    assert [a == b for a, b in zip(base, fingerprints(cfg, components, more), strict=True)] == \
        [True, True, False, False, False]
    lookup = dataclasses.replace(tiny, lookup_tables=[{"name": "city", "elements": ["Oslo"]}])
    assert [a == b for a, b in zip(base, fingerprints(cfg, components, lookup), strict=True)] == \
        [True, False, False, False, False]  # the featurizers after it see its new columns


# --- decisions ---------------------------------------------------------------------------------------
def test_no_data_change_reuses_everything_without_featurizing(
    tiny: TrainingData, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous, stored = trained(tiny)
    calls: list[str] = []
    for component in previous.components:
        monkeypatch.setattr(component, "process", lambda messages, c=component: calls.append(c))
    lines: list[str] = []
    pipeline, current, outcomes = finetune_pipeline(previous, stored, config(), tiny,
                                                    FinetuneOptions(), lines.append)
    assert current == stored
    assert decisions(outcomes) == [REUSED] * len(LOGREG_STEPS)
    assert all(new is old for new, old in zip(pipeline.components, previous.components, strict=True))
    assert calls == []  # nothing has to learn, so the training data is not even tokenized
    assert lines[0] == "[1/7] WhitespaceTokenizer reused"
    assert summary_lines(outcomes) == ["fine-tuning: reused: " + ", ".join(s["name"] for s in LOGREG_STEPS)]


def test_a_new_intent_resumes_the_featurizers_and_retrains_the_rest(tiny: TrainingData) -> None:
    previous, stored = trained(without_intent(tiny, "check_order"))
    word = previous.components[1].vocabularies_["text"]
    pipeline, current, outcomes = finetune_pipeline(previous, stored, config(), tiny, FinetuneOptions())
    assert decisions(outcomes) == [REUSED, RESUMED, RESUMED, RETRAINED, RETRAINED, RETRAINED, REUSED]
    assert outcomes[3].reason == "no incremental training"
    grown = pipeline.components[1].vocabularies_["text"]
    assert {gram: grown[gram] for gram in word} == word  # old columns keep their ids
    assert {"order", "status", "track"} <= set(grown) - set(word)
    assert current == fingerprints(config(), pipeline.components, tiny)
    assert pipeline.parse_batch(["track order 31415"])[0]["intent"]["name"] == "check_order"
    notice, summary = summary_lines(outcomes)
    assert notice == ("notice: trained from scratch, as they cannot resume: "
                      "LogisticRegressionClassifier (no incremental training); "
                      "RegexEntityExtractor (no incremental training); "
                      "EntitySynonymMapper (no incremental training)")
    assert summary == ("fine-tuning: reused: WhitespaceTokenizer, FallbackClassifier; resumed: "
                       "CountVectorsFeaturizer, CountVectorsFeaturizer; trained from scratch: "
                       "LogisticRegressionClassifier, RegexEntityExtractor, EntitySynonymMapper")


def test_the_previous_pipeline_is_left_unchanged(tiny: TrainingData) -> None:
    previous, stored = trained(without_intent(tiny, "check_order"))
    before = previous.parse_batch(["track order 31415", "hi"])
    vocabulary = dict(previous.components[1].vocabularies_["text"])
    finetune_pipeline(previous, stored, config(), tiny, FinetuneOptions())
    assert previous.components[1].vocabularies_["text"] == vocabulary
    assert previous.parse_batch(["track order 31415", "hi"]) == before


def test_a_model_without_fingerprints_resumes_whatever_learns(tiny: TrainingData) -> None:
    previous, _ = trained(tiny)
    _, _, outcomes = finetune_pipeline(previous, None, config(), tiny, FinetuneOptions())
    assert decisions(outcomes) == [REUSED, RESUMED, RESUMED, RETRAINED, RETRAINED, RETRAINED, REUSED]


class LearningFeaturizer(Featurizer):
    """A featurizer that learns from data and has no fine-tuning hook (one feature column)."""

    learns_from_data: ClassVar[bool] = True

    def train(self, data: TrainingData) -> None:
        self.size_ = 1

    def process(self, messages: list[Message]) -> None:
        """Adds nothing: only its place in the pipeline matters here."""


def test_components_after_one_trained_from_scratch_are_trained_from_scratch(
    tiny: TrainingData,
) -> None:
    steps = [LOGREG_STEPS[0], {"name": f"{__name__}.LearningFeaturizer"}, *LOGREG_STEPS[1:4]]
    previous, stored = trained(without_intent(tiny, "check_order"), steps)
    _, _, outcomes = finetune_pipeline(previous, stored, config(steps), tiny, FinetuneOptions())
    assert decisions(outcomes) == [REUSED, RETRAINED, RETRAINED, RETRAINED, RETRAINED]
    assert outcomes[1].reason == "no incremental training"
    assert outcomes[2].reason == f"{__name__}.LearningFeaturizer before it was trained from scratch"


def test_a_failed_resume_leaves_nothing_behind(tiny: TrainingData, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook that changes its component and then raises CannotResume: the pipeline trains a
    fresh instance, so the half-resumed state is not what gets trained and stored."""
    from nlu_engine.featurizers.sparse.count_vectors import CountVectorsFeaturizer

    def half_done(self: CountVectorsFeaturizer, data: TrainingData, previous: Any, options: Any) -> None:
        self.vocabularies_ = {"text": {"junk": 0}}
        raise CannotResume("gave up halfway")

    monkeypatch.setattr(CountVectorsFeaturizer, "finetune", half_done)
    previous, stored = trained(without_intent(tiny, "check_order"))
    pipeline, _, outcomes = finetune_pipeline(previous, stored, config(), tiny, FinetuneOptions())
    assert outcomes[1].decision == RETRAINED and outcomes[1].reason == "gave up halfway"
    assert "junk" not in pipeline.components[1].vocabularies_["text"]
    assert "order" in pipeline.components[1].vocabularies_["text"]


def test_removing_an_intent_means_it_is_no_longer_predicted(tiny: TrainingData) -> None:
    previous, stored = trained(tiny)
    pipeline, _, _ = finetune_pipeline(previous, stored, config(), without_intent(tiny, "greet"),
                                       FinetuneOptions())
    results = pipeline.parse_batch(["hi", "hello there", "good morning"])
    assert {r["intent"]["name"] for r in results} <= {"book_flight", "check_order", "nlu_fallback"}
    assert all(r["name"] != "greet" for result in results for r in result["intent_ranking"])


@pytest.mark.parametrize(
    ("field", "value"),
    [("epoch_fraction", 0), ("epoch_fraction", 1.5), ("rehearsal_fraction", -0.1),
     ("learning_rate_fraction", "half"), ("epoch_fraction", True)],
)
def test_finetune_options_are_checked(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=field.replace("_", "-")):
        FinetuneOptions(**{field: value})


# --- a language model fine-tuned inside DIET -----------------------------------------------------
def tuned_steps(bert_dir: Path) -> list[dict[str, Any]]:
    return [
        {"name": "WhitespaceTokenizer"},
        {"name": "LanguageModelFeaturizer", "model_weights": str(bert_dir), "trainable": True},
        {"name": "CountVectorsFeaturizer"},
        {"name": "DIETClassifier", "epochs": 2, "hidden_layers_sizes": {"text": [8]},
         "transformer_size": 8, "number_of_transformer_layers": 1, "embedding_dimension": 8,
         "sentence_head_below": 0},  # fine-tuned even on few examples an intent
    ]


def test_a_language_model_tuned_inside_diet_trains_again_with_it(tiny: TrainingData, tmp_path: Path) -> None:
    """The encoder and DIET learn together: new data trains both from scratch (never a tuned
    encoder under a fresh DIET, nor the other way round); no data change reuses both."""
    from tests.featurizers.tiny_bert import tiny_bert

    steps = tuned_steps(tiny_bert(tmp_path / "tiny-bert"))
    previous, stored = trained(without_intent(tiny, "check_order"), steps)
    lines: list[str] = []
    pipeline, _, outcomes = finetune_pipeline(previous, stored, config(steps), tiny, FinetuneOptions(),
                                              lines.append)
    assert decisions(outcomes) == [RETRAINED] * len(steps)
    assert lines[0].startswith("notice: every component is trained from scratch: the pipeline "
                               "fine-tunes a language model")
    featurizer, diet = pipeline.components[1], pipeline.components[3]
    assert diet.trainable_encoders == (featurizer,)  # the featurizer that parses is the one DIET tuned
    assert featurizer is not previous.components[1]
    assert pipeline.parse_batch(["track order 31415"])[0]["intent"]["name"] in set(tiny.intents)

    stored = fingerprints(config(steps), pipeline.components, tiny)
    again, _, outcomes = finetune_pipeline(pipeline, stored, config(steps), tiny, FinetuneOptions())
    assert decisions(outcomes) == [REUSED] * len(steps)
    assert all(new is old for new, old in zip(again.components, pipeline.components, strict=True))
