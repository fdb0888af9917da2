"""The contrastive phase of a fine-tuned encoder (contrastive.py, ``contrastive_pairs``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.classifiers.diet.component import DIETClassifier
from nlu_engine.classifiers.diet.contrastive import PAIR_BATCH, draw_pairs, tune
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.featurizers.dense.bert import load_weights
from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from nlu_engine.training_data import load_data
from tests.classifiers.diet.test_diet_encoders import TINY_DIET
from tests.extras import requires_extra
from tests.featurizers.tiny_bert import tiny_bert

LABELS = np.array([0, 0, 0, 1, 1, 2, 2, 2, 3])  # label 3 has one example


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("lm") / "tiny-bert")


def test_pairs_alternate_positive_and_negative_draws_for_each_example() -> None:
    pairs = draw_pairs(LABELS, 4, seed=1)
    first, second, target = pairs.T
    assert np.all(first != second)
    np.testing.assert_array_equal(LABELS[first] == LABELS[second], target == 1)
    # 2 positives and 2 negatives an example, but no positive for the intent with one example
    assert len(pairs) == 4 * len(LABELS) - 2
    assert np.bincount(first[target == 1], minlength=len(LABELS)).tolist() == [2] * 8 + [0]
    assert np.bincount(first[target == 0], minlength=len(LABELS)).tolist() == [2] * 9
    np.testing.assert_array_equal(pairs, draw_pairs(LABELS, 4, seed=1))
    assert not np.array_equal(pairs, draw_pairs(LABELS, 4, seed=2))


def test_one_intent_alone_has_no_negative_pair() -> None:
    pairs = draw_pairs(np.zeros(3, np.int64), 3, seed=0)
    assert len(pairs) == 6 and set(pairs[:, 2].tolist()) == {1}


@pytest.mark.parametrize("value", [-1, 65, "many", 2.5])
def test_bad_contrastive_pairs_are_refused_in_one_line(value: Any) -> None:
    with pytest.raises(ConfigError, match="DIETClassifier: parameter 'contrastive_pairs'") as error:
        DIETClassifier(contrastive_pairs=value)
    assert "\n" not in str(error.value)


def test_contrastive_pairs_without_a_fine_tuned_encoder_say_they_have_no_effect(
    tiny_data_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    pipeline = Pipeline.build(load_config({"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {**TINY_DIET, "contrastive_pairs": 2},
    ]}))
    with caplog.at_level(logging.INFO):
        pipeline.train(load_data(tiny_data_path), log=None)
    assert any("contrastive_pairs has no effect" in r.getMessage() for r in caplog.records)


# --- with a (tiny) language model ----------------------------------------------------------------
def tokenized(texts: list[str]) -> list[Message]:
    messages = [Message(text) for text in texts]
    WhitespaceTokenizer().process(messages)
    return messages


@requires_extra("lm")
def test_tuning_moves_the_trainable_layers_reproducibly_and_leaves_the_encoder_as_it_was(bert: Path) -> None:
    encoder = LanguageModelFeaturizer(model_weights=str(bert), trainable=True, trainable_layers=1,
                                      encoder_learning_rate=0.01, training_precision="float32")
    messages = tokenized(["book a flight", "fly me to rome", "where is my order", "track my parcel",
                          "hello there", "hi"])
    labels = np.array([0, 0, 1, 1, 2, 2])
    pretrained = encoder.pretrained_weights()
    tuned = tune(encoder, messages, labels, per_example=6, seed=3)
    assert len(tuned.losses) == -(-len(draw_pairs(labels, 6, 3)) // PAIR_BATCH)
    assert set(tuned.weights) == set(pretrained)
    assert all(not np.array_equal(w, pretrained[n]) for n, w in tuned.weights.items() if n.endswith("weight"))
    again = tune(encoder, messages, labels, per_example=6, seed=3)
    for name, weights in tuned.weights.items():
        np.testing.assert_array_equal(weights, again.weights[name], err_msg=name)
    assert not hasattr(encoder, "tuned_weights_")  # the caller adopts (or starts from) them


def lm_pipeline(bert: Path, head: bool, **diet: Any) -> Pipeline:
    return Pipeline.build(load_config({"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "LanguageModelFeaturizer", "model_weights": str(bert), "trainable": True,
         "trainable_layers": 1, "weights_dtype": "float32", "training_precision": "float32",
         "encoder_learning_rate": 0.01},
        {"name": "CountVectorsFeaturizer"},
        {**TINY_DIET, "sentence_head_below": 50 if head else 0, **diet},
    ]}))


def trained_weights(bert: Path, data: Path, head: bool, **diet: Any) -> dict[str, np.ndarray]:
    pipeline = lm_pipeline(bert, head, **diet)
    pipeline.train(load_data(data), log=None)
    return dict(pipeline.components[1].tuned_weights_)


@requires_extra("lm")
def test_with_the_sentence_head_the_contrastive_weights_are_kept_and_read(
    bert: Path, tiny_data_path: Path, tiny_texts: list[str]
) -> None:
    """Few examples an intent: the encoder keeps its pretrained weights without the phase, and
    those of the contrastive phase with it (seeded: the same twice); the head reads its vectors."""
    pretrained = load_weights(bert / "model.safetensors",
                              LanguageModelFeaturizer(model_weights=str(bert))._model().config)
    off = trained_weights(bert, tiny_data_path, head=True)
    assert all(np.array_equal(w, pretrained[n]) for n, w in off.items())
    pipeline = lm_pipeline(bert, head=True, contrastive_pairs=4)
    pipeline.train(load_data(tiny_data_path), log=None)
    on = pipeline.components[1].tuned_weights_
    assert all(not np.array_equal(w, pretrained[n]) for n, w in on.items() if n.endswith("weight"))
    again = trained_weights(bert, tiny_data_path, head=True, contrastive_pairs=4)
    for name, weights in on.items():
        np.testing.assert_array_equal(weights, again[name], err_msg=name)
    assert pipeline.components[-1].head_ is not None
    messages = pipeline.process([Message(text) for text in tiny_texts])
    assert all(m.intent in {"greet", "book_flight", "check_order"} for m in messages if m.tokens.get("text"))


@requires_extra("lm")
def test_diet_fine_tunes_from_the_contrastive_weights(bert: Path, tiny_data_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the sentence head, DIET's network starts its encoder layer from the contrastive
    phase's weights (and from the pretrained ones without it)."""
    started: list[dict[str, np.ndarray] | None] = []
    build = LanguageModelFeaturizer.build

    def recording(self: LanguageModelFeaturizer, start: dict[str, np.ndarray] | None = None) -> Any:
        layer = build(self, start)
        started.append(layer.tuned_weights())
        return layer

    monkeypatch.setattr(LanguageModelFeaturizer, "build", recording)
    pipeline = lm_pipeline(bert, head=False, contrastive_pairs=2)
    diet = pipeline.components[-1]
    pipeline.train(load_data(tiny_data_path), log=None)
    assert len(started) == 2  # the contrastive phase's layer, then DIET's network's
    contrastive_start, network_start = started
    pretrained = pipeline.components[1].pretrained_weights()
    assert all(np.array_equal(w, pretrained[n]) for n, w in contrastive_start.items())
    assert any(not np.array_equal(w, pretrained[n]) for n, w in network_start.items())
    assert diet.head_ is None

    started.clear()
    plain = lm_pipeline(bert, head=False)
    plain.train(load_data(tiny_data_path), log=None)
    assert len(started) == 1 and all(np.array_equal(w, pretrained[n]) for n, w in started[0].items())
