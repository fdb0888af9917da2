"""DIET's fine-tuning (``resume.py`` and ``DIETClassifier.finetune``): stored weights mapped onto
the grown network row by row, rehearsal of the examples the model knew, and a resumed model
that learns a new intent and a new entity type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.finetune import RESUMED, REUSED, finetune_pipeline, fingerprints
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.classifiers.diet.resume import (
    ResumePlan,
    block_rows,
    example_hashes,
    name_rows,
    remap,
)
from nlu_engine.contract.component import CannotResume, FinetuneOptions
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import load_data


# --- the row maps (NumPy only) ------------------------------------------------------------------
def test_block_rows_keep_each_block_and_append_its_new_columns() -> None:
    stored = [["words", 3], ["chars", 2]]
    current = [["words", 5], ["chars", 2], ["regex", 1]]
    assert block_rows(stored, current).tolist() == [0, 1, 2, -1, -1, 3, 4, -1]
    assert block_rows([], [["words", 2]]).tolist() == [-1, -1]
    with pytest.raises(CannotResume, match="features of chars shrank"):
        block_rows(stored, [["words", 3], ["chars", 1]])


def test_name_rows_follow_names() -> None:
    assert name_rows(["O", "U-city"], ["O", "U-city", "U-size"]).tolist() == [0, 1, -1]
    assert name_rows(["a", "b", "c"], ["c", "a"]).tolist() == [2, 0]  # "b" removed


def test_remap_copies_mapped_rows_and_keeps_fresh_ones() -> None:
    stored = np.arange(6, dtype=np.float32).reshape(3, 2)
    fresh = np.full((4, 2), -1.0, np.float32)
    merged = remap(stored, fresh, (np.array([2, -1, 0, 1]), None), "t")
    assert merged.tolist() == [[4, 5], [-1, -1], [0, 1], [2, 3]]
    transitions = np.arange(9, dtype=np.float32).reshape(3, 3)
    tags = np.array([0, -1, 2])
    merged = remap(transitions, np.zeros((3, 3), np.float32), (tags, tags), "crf")
    assert merged.tolist() == [[0, 0, 2], [0, 0, 0], [6, 0, 8]]
    with pytest.raises(CannotResume, match="changed shape"):
        remap(stored, np.zeros((3, 3), np.float32), (None, None), "t")


def test_example_hashes_see_text_label_and_annotations() -> None:
    city = {"entity": "city", "start": 8, "end": 14, "value": "Berlin"}
    messages = [
        Message("fly to Berlin", intent="book"),
        Message("fly to Berlin", intent="book"),
        Message("fly to Berlin", intent="other"),
        Message("fly to Berlin", intent="book", entities=[city]),
        Message("fly to Berlin", intent="book", entities=[{**city, "role": "to"}]),
    ]
    hashes = example_hashes(messages, lambda m: m.intent)
    assert hashes.dtype == np.uint64
    assert hashes[0] == hashes[1]
    assert len(set(hashes[1:].tolist())) == 4


def test_rehearsal_takes_every_new_example_and_a_share_of_the_old() -> None:
    rehearse = np.array([True] * 10 + [False] * 3)
    plan = ResumePlan({}, {}, rehearse, FinetuneOptions(epoch_fraction=0.25, rehearsal_fraction=0.3))
    assert plan.examples_per_epoch() == 3 + 3
    assert plan.epochs(20) == 5 and plan.epochs(2) == 1
    rng = np.random.default_rng(0)
    pools = [plan.epoch_pool(rng) for _ in range(4)]
    for pool in pools:
        assert len(pool) == 6 and {10, 11, 12} <= set(pool.tolist())
    assert len({tuple(p.tolist()) for p in pools}) > 1  # drawn anew each epoch
    nothing_new = ResumePlan({}, {}, np.ones(4, bool), FinetuneOptions(rehearsal_fraction=0))
    assert nothing_new.examples_per_epoch() == 0 and nothing_new.epochs(20) == 0
    assert plan.subset(np.arange(5, 13)).examples_per_epoch() == 3 + 2


# --- resuming a trained DIET ----------------------------------------------------------------------

SMALL_DIET = {
    "name": "DIETClassifier", "number_of_transformer_layers": 1, "transformer_size": 32,
    "embedding_dimension": 8, "number_of_negative_examples": 2,
    "dense_dimension": {"text": 16, "label": 8}, "concat_dimension": {"text": 16, "label": 8},
    "learning_rate": 0.01, "run_eagerly": True, "show_progress": False,
    # no swapped values: a new synonym then reaches the synonym mapper only (with them, DIET
    # trains again: tests/classifiers/diet/test_diet_multiplying.py)
    "entity_swaps": 0,
}
STEPS = [
    {"name": "WhitespaceTokenizer"},
    {"name": "CountVectorsFeaturizer"},
    {"name": "CountVectorsFeaturizer", "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 3},
]


def diet_config(**params: Any) -> Any:
    return load_config({"language": "en", "pipeline": [*STEPS, {**SMALL_DIET, **params}]})


@pytest.fixture(scope="module")
def tiny(tiny_data_path: Path) -> TrainingData:
    return load_data(tiny_data_path)


@pytest.fixture(scope="module")
def without_orders(tiny: TrainingData) -> tuple[Pipeline, list[str]]:
    """DIET trained on the tiny data without the intent check_order, and so without its entity
    type order_id."""
    data = tiny.with_messages([m for m in tiny.messages if m.intent != "check_order"])
    cfg = diet_config(epochs=24, run_eagerly=False)
    pipeline = Pipeline.build(cfg)
    pipeline.train(data, log=None)
    return pipeline, fingerprints(cfg, pipeline.components, data)


def test_resuming_without_training_restores_the_stored_network(
    without_orders: tuple[Pipeline, list[str]], tiny: TrainingData
) -> None:
    """All examples known and none rehearsed: no epoch runs, and the resumed model predicts
    exactly what the stored one does."""
    previous, stored = without_orders
    data = tiny.with_messages([m for m in tiny.messages if m.intent != "check_order"])
    data.synonyms["big apple"] = "New York"  # a change DIET does not see,
    cfg = diet_config(epochs=25)  # and a parameter that does not change what DIET is
    _, _, outcomes = finetune_pipeline(previous, stored, cfg, data, FinetuneOptions())
    assert outcomes[3].decision == REUSED
    # without the stored fingerprints, DIET resumes
    pipeline, _, outcomes = finetune_pipeline(previous, None, cfg, data,
                                              FinetuneOptions(rehearsal_fraction=0))
    diet = pipeline.components[3]
    assert outcomes[3].decision == RESUMED and diet.history_["finetune"]["epochs"] == 0
    texts = ["fly from Rome to Paris", "hi", "book a flight to NYC please", "completely new words"]
    assert pipeline.parse_batch(texts) == previous.parse_batch(texts)


def test_a_new_intent_and_entity_type_grow_the_network_and_are_learned(
    without_orders: tuple[Pipeline, list[str]], tiny: TrainingData, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nlu_engine.classifiers.diet.training as training

    previous, stored = without_orders
    old = previous.components[3]
    captured: dict[str, Any] = {}
    train_epochs = training.train_epochs

    def spy(trainer: Any, batches: Any, epochs: int, parts: Any) -> Any:
        captured["start"] = trainer.network.export_weights()  # restored, not yet trained
        captured["epochs"] = epochs
        return train_epochs(trainer, batches, epochs, parts)

    monkeypatch.setattr(training, "train_epochs", spy)
    # 60 steps (one batch an epoch): with seeds 7 and 42 the new entity type was found in all four
    # examples of the new intent, where 24 steps found it with one seed of the two
    options = FinetuneOptions(epoch_fraction=1.0, rehearsal_fraction=0.5, learning_rate_fraction=1.0)
    cfg = diet_config(epochs=60, run_eagerly=False)
    pipeline, _, outcomes = finetune_pipeline(previous, stored, cfg, tiny, options)
    diet = pipeline.components[3]
    assert outcomes[3].decision == RESUMED
    assert diet.intents_ == ["book_flight", "check_order", "greet"]
    assert "U-order_id" in diet.tag_vocab_["entity"] and "U-order_id" not in old.tag_vocab_["entity"]
    assert captured["epochs"] == 60
    assert diet.history_["finetune"] == {"epochs": 60, "examples_per_epoch": 4 + 4,
                                         "new_examples": 4, "known_examples": 8}

    start, weights = captured["start"], old.weights_
    # the word block grew: its stored rows sit where they were; the char block moved down
    seq = names.kernel(names.SEQ_BAG)
    (_, words_before), (_, chars_before) = old.seq_blocks_
    (_, words_after), (_, chars_after) = diet.seq_blocks_
    assert words_after > words_before and chars_after >= chars_before
    assert np.array_equal(start[seq][:words_before], weights[seq][:words_before])
    assert np.array_equal(start[seq][words_after:words_after + chars_before], weights[seq][words_before:])
    # tags by name: each stored tag's logit column and transitions carried over
    logits, transitions = names.kernel(names.tag_logits("entity")), names.transitions("entity")
    rows = name_rows(old.tag_vocab_["entity"], diet.tag_vocab_["entity"])
    kept = np.flatnonzero(rows >= 0)
    assert np.array_equal(start[logits][:, kept], weights[logits][:, rows[kept]])
    assert np.array_equal(start[transitions][np.ix_(kept, kept)],
                          weights[transitions][np.ix_(rows[kept], rows[kept])])
    # the label table gained the row of the intent's new label column; the transformer is whole
    label = names.kernel(names.LABEL_DENSE)
    assert start[label].shape[0] == weights[label].shape[0] + 1
    query = names.kernel(names.TransformerLayer(0).attention("query"))
    assert np.array_equal(start[query], weights[query])

    orders = [m.text for m in tiny.messages if m.intent == "check_order"]
    results = pipeline.parse_batch(orders)
    assert [r["intent"]["name"] for r in results] == ["check_order"] * len(orders)
    assert sum(e["entity"] == "order_id" for r in results for e in r["entities"]) >= 3
    others = [m for m in tiny.messages if m.intent != "check_order"]
    predicted = pipeline.parse_batch([m.text for m in others])
    assert sum(r["intent"]["name"] == m.intent for r, m in zip(predicted, others, strict=True)) >= 6


def test_a_model_that_does_not_record_its_layout_cannot_resume(
    without_orders: tuple[Pipeline, list[str]], tiny: TrainingData
) -> None:
    previous, _ = without_orders
    old = previous.components[3]
    stripped = type(old)(old.config)
    stripped.__dict__.update({**vars(old), "seq_blocks_": None})
    new = type(old)(old.config)
    with pytest.raises(CannotResume, match="does not record its input layout"):
        new.finetune(_featurized(previous, tiny), stripped, FinetuneOptions())


def _featurized(pipeline: Pipeline, data: TrainingData) -> TrainingData:
    from nlu_engine.assembly.pipeline import fresh_copies

    copy = fresh_copies(data)
    for component in pipeline.components[:3]:
        component.process(copy.messages)
    return copy


def test_fine_tuning_a_fine_tuned_archive_again_and_again(tmp_path: Path, tiny: TrainingData) -> None:
    """Rasa's fine-tuning broke on the second round (#8973): here each round starts from the
    archive the round before wrote, and the data grows by an intent, then an entity type."""
    from nlu_engine.assembly.model import Model, train

    cfg = diet_config(epochs=2)
    rounds = [
        [m for m in tiny.messages if m.intent not in ("check_order", "book_flight")],
        [m for m in tiny.messages if m.intent != "check_order"],
        list(tiny.messages),
        [*tiny.messages, Message("order 77777 is late", intent="check_order",
                                 entities=[{"entity": "order_id", "start": 6, "end": 11, "value": "77777"}])],
    ]
    archive = train(cfg, tiny.with_messages(rounds[0]), out=tmp_path, fixed_model_name="r0", log=None)
    for index, messages in enumerate(rounds[1:], start=1):
        archive = train(cfg, tiny.with_messages(messages), out=tmp_path, finetune=archive,
                        fixed_model_name=f"r{index}", log=None)
        model = Model.load(archive)
        decisions = {c["name"]: c["decision"] for c in model.manifest["finetune"]["components"]}
        assert decisions["DIETClassifier"] == RESUMED
        assert model.manifest["finetuned_from"] == f"r{index - 1}.tar.gz"
        diet = model.pipeline.components[3]
        assert diet.intents_ == sorted({m.intent for m in messages if m.intent})
        assert len(model.parse_batch([m.text for m in tiny.messages])) == len(tiny.messages)
