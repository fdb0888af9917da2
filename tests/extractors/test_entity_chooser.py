"""EntityChooser: the extractor whose held-out entities scored better is kept, chosen from the
training data only; DIET and CRFEntityExtractor record their held-out predictions for it."""

from __future__ import annotations

import json
import logging
import random
import tarfile
from pathlib import Path

import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.extractors.crf_entity_extractor import CRFEntityExtractor
from nlu_engine.extractors.entity_chooser import (
    HELD_OUT_ENTITIES,
    STATE_FILE,
    EntityChooser,
    exact_f1,
    held_out_examples,
    record_held_out,
)
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from nlu_engine.training_data import write_data
from nlu_engine.training_data.annotations import parse_annotated

DIET, CRF = "DIETClassifier", "CRFEntityExtractor"


def city(text: str, start: int, end: int, extractor: str | None = None) -> dict:
    entity = {"start": start, "end": end, "entity": "city", "value": text[start:end]}
    return {**entity, "extractor": extractor} if extractor else entity


def held_messages(count: int, diet_right: int, crf_right: int) -> list[Message]:
    """``count`` held-out examples "fly to Oslo" (gold: Oslo); DIET gets the first
    ``diet_right`` right, the CRF the first ``crf_right`` (the others: a wrong span)."""
    messages = []
    for i in range(count):
        text = "fly to Oslo"
        message = Message(text, intent="fly", entities=[city(text, 7, 11)])
        record_held_out(message, DIET, [city(text, 7, 11) if i < diet_right else city(text, 4, 11)])
        record_held_out(message, CRF, [city(text, 7, 11) if i < crf_right else city(text, 0, 3)])
        messages.append(message)
    return messages


def test_exact_f1_counts_start_end_and_type() -> None:
    messages = held_messages(4, diet_right=3, crf_right=1)
    assert exact_f1(messages, DIET) == pytest.approx(0.75)
    assert exact_f1(messages, CRF) == pytest.approx(0.25)
    text = "fly to Oslo"
    typed = Message(text, entities=[city(text, 7, 11)])
    record_held_out(typed, DIET, [{**city(text, 7, 11), "entity": "country"}])
    assert exact_f1([typed], DIET) == 0.0
    assert held_out_examples([typed, Message("hello")]) == [typed]


def test_the_better_extractor_is_kept_and_the_other_dropped_at_parse() -> None:
    chooser = EntityChooser()
    unrecorded = Message("hi", intent="greet")
    chooser.train(TrainingData(messages=[*held_messages(30, diet_right=10, crf_right=25), unrecorded]))
    assert chooser.chosen_ == CRF and chooser.dropped() == [DIET]
    assert chooser.scores_[CRF] > chooser.scores_[DIET]
    text = "fly to Oslo"
    parsed = Message(text, entities=[city(text, 7, 11, DIET), city(text, 7, 11, CRF),
                                     {**city(text, 7, 11), "extractor": "RegexEntityExtractor"}])
    chooser.process([parsed])
    assert [e["extractor"] for e in parsed.entities] == [CRF, "RegexEntityExtractor"]


def test_a_tie_keeps_the_first_extractor() -> None:
    chooser = EntityChooser()
    chooser.train(TrainingData(messages=held_messages(30, diet_right=20, crf_right=20)))
    assert chooser.chosen_ == DIET


def test_too_few_held_out_entities_keep_the_first_with_a_notice(caplog: pytest.LogCaptureFixture) -> None:
    chooser = EntityChooser()
    with caplog.at_level(logging.INFO):
        chooser.train(TrainingData(messages=held_messages(5, diet_right=0, crf_right=5)))
    assert chooser.chosen_ == DIET and chooser.scores_ == {}
    assert "5 gold entities" in caplog.text and "DIETClassifier's entities are kept" in caplog.text
    caplog.clear()
    nothing = EntityChooser()
    with caplog.at_level(logging.INFO):
        nothing.train(TrainingData(messages=[Message("fly to Oslo", intent="fly")]))
    assert nothing.chosen_ == DIET and not caplog.text  # no entities: nothing to say


def test_examples_one_extractor_did_not_record_are_not_compared() -> None:
    messages = held_messages(30, diet_right=5, crf_right=30)
    for message in messages[:20]:
        del message.extra[HELD_OUT_ENTITIES][CRF]
    chooser = EntityChooser()
    chooser.train(TrainingData(messages=messages))
    assert chooser.chosen_ == DIET and chooser.scores_ == {}  # 10 comparable entities < 20


def test_persist_and_load(tmp_path: Path) -> None:
    chooser = EntityChooser()
    chooser.train(TrainingData(messages=held_messages(30, diet_right=10, crf_right=25)))
    chooser.persist(tmp_path)
    loaded = EntityChooser.load(tmp_path, chooser.config)
    assert (loaded.chosen_, loaded.scores_) == (chooser.chosen_, chooser.scores_)
    (tmp_path / STATE_FILE).write_text(json.dumps({"chosen": "SpacyEntityExtractor"}))
    with pytest.raises(ValueError, match="not among 'extractors'"):
        EntityChooser.load(tmp_path, chooser.config)


def test_config_names_two_different_extractors() -> None:
    with pytest.raises(ConfigError, match="two or more different"):
        EntityChooser.Config(extractors=[DIET])
    with pytest.raises(ConfigError, match="two or more different"):
        EntityChooser.Config(extractors=[DIET, DIET])


def test_the_crf_records_its_predictions_for_the_examples_held_out_before_it() -> None:
    names = ["Oslo", "Rome", "Lima", "Kyiv", "Bern", "Doha", "Riga", "Baku"]
    messages = []
    for i, name in enumerate(names * 3):
        text, entities = parse_annotated(f"a flight to [{name}](city) please {i}")
        messages.append(Message(text, intent="fly", entities=entities))
    WhitespaceTokenizer().process(messages)
    held = messages[-4:]
    for message in held:  # as DIET would: its held-out predictions, here empty
        record_held_out(message, DIET, [])
    crf = CRFEntityExtractor(CRFEntityExtractor.Config(max_iterations=30))
    crf.train(TrainingData(messages=messages))
    recorded = [m.extra[HELD_OUT_ENTITIES][CRF] for m in held]
    assert [[e["value"] for e in r] for r in recorded] == [[m.entities[0]["value"]] for m in held]
    assert all(CRF not in m.extra.get(HELD_OUT_ENTITIES, {}) for m in messages[:-4])
    alone = [m for m in messages[:4]]
    for message in alone:
        message.extra.clear()
    CRFEntityExtractor().train(TrainingData(messages=alone))
    assert not held_out_examples(alone)  # nothing held out before it: nothing recorded


def entity_data(per_intent: int, seed: int = 0) -> TrainingData:
    """Ten intents, ``per_intent`` examples each, a city in every example."""
    rng = random.Random(seed)
    cities = ["Oslo", "Rome", "Lima", "Kyiv", "Bern", "Doha", "Riga", "Baku", "Quito", "Hanoi"]
    verbs = ["fly", "drive", "sail", "walk", "ride", "travel", "move", "hike", "cycle", "swim"]
    messages = []
    for verb in verbs:
        texts: set[str] = set()
        while len(texts) < per_intent:
            when = rng.choice(["now", "today", "soon", "later"])
            texts.add(f"i want to {verb} to [{rng.choice(cities)}](city) {when} {rng.randrange(100)}")
        for annotated in sorted(texts):
            text, entities = parse_annotated(annotated)
            messages.append(Message(text, intent=verb, entities=entities))
    return TrainingData(messages=messages)


@pytest.mark.parametrize("head_below", [50, 0], ids=["sentence head", "calibrated network"])
def test_a_pipeline_chooses_between_diet_and_the_crf_on_held_out_examples(
    tmp_path: Path, head_below: int
) -> None:
    """DIET holds a share out (for its entities when the sentence head ranks the intents, few
    examples an intent; for its calibration otherwise), the CRF predicts the same examples, and
    the chooser keeps one."""
    data = tmp_path / "nlu.yml"
    write_data(entity_data(25), data)
    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "UniversalSentenceEncoderFeaturizer"},
        {"name": "DIETClassifier", "epochs": 2, "show_progress": False, "transformer_size": 16,
         "number_of_transformer_layers": 1, "sentence_head_below": head_below},
        {"name": "CRFEntityExtractor", "max_iterations": 30},
        {"name": "EntityChooser"},
    ]}
    archive = train(config, data, tmp_path / "models")
    with tarfile.open(archive) as tar:
        state = next(json.load(tar.extractfile(m)) for m in tar.getmembers() if m.name.endswith(STATE_FILE))
    assert set(state["scores"]) == {DIET, CRF}  # both predicted the held-out examples
    assert state["chosen"] == max(state["scores"], key=state["scores"].get)
    result = Model.load(archive).parse("i want to fly to Riga now 7")
    assert {e["extractor"] for e in result["entities"]} <= {state["chosen"]}


def test_fine_tuning_keeps_the_stored_choice_when_nothing_was_held_out() -> None:
    from nlu_engine.contract.component import FinetuneOptions

    stored = EntityChooser()
    stored.train(TrainingData(messages=held_messages(30, diet_right=10, crf_right=25)))
    tuned = EntityChooser()
    tuned.finetune(TrainingData(messages=[Message("fly to Oslo", intent="fly")]), stored, FinetuneOptions())
    assert tuned.chosen_ == CRF and tuned.scores_ == stored.scores_
    again = EntityChooser()
    measured = TrainingData(messages=held_messages(30, diet_right=30, crf_right=0))
    again.finetune(measured, stored, FinetuneOptions())
    assert again.chosen_ == DIET


def test_diet_holds_entities_out_only_for_a_chooser_that_names_it() -> None:
    """Holding a share out costs DIET a little on few examples (BENCHMARKS.md), so a pipeline
    without a chooser, or one that chooses between other extractors, leaves it as it was."""
    from nlu_engine.assembly.config import load_config
    from nlu_engine.assembly.pipeline import Pipeline

    def diet_records(*extra: dict) -> bool:
        steps = [{"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
                 {"name": "DIETClassifier"}, {"name": "CRFEntityExtractor"}, *extra]
        pipeline = Pipeline.build(load_config({"language": "en", "pipeline": steps}))
        return next(c for c in pipeline.components if c.component_name() == DIET).records_held_out_entities

    assert not diet_records()
    assert diet_records({"name": "EntityChooser"})
    others = ["CRFEntityExtractor", "RegexEntityExtractor"]
    assert not diet_records({"name": "RegexEntityExtractor"}, {"name": "EntityChooser", "extractors": others})
