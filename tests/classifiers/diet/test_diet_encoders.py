"""A featurizer's encoder fine-tuned inside DIET (encoders.py and the network's dense inputs)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse
import tensorflow as tf

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.classifiers.diet import encoding
from nlu_engine.classifiers.diet.batching import make_batch
from nlu_engine.classifiers.diet.encoders import (
    dense_columns,
    encoder_slots,
    ragged_inputs,
    with_pretrained_features,
)
from nlu_engine.contract.message import Features, Message
from nlu_engine.featurizers.dense.bert import load_weights
from nlu_engine.training_data import load_data
from tests.extras import requires_extra
from tests.featurizers.tiny_bert import tiny_bert

pytestmark = requires_extra("lm")

TINY_DIET = {
    "name": "DIETClassifier", "epochs": 3, "number_of_transformer_layers": 1, "transformer_size": 16,
    "number_of_attention_heads": 2, "embedding_dimension": 8, "run_eagerly": True,
    "show_progress": False,
    # the tiny data has a few examples an intent, where DIET would keep the encoder as pretrained
    # (test_few_examples_keep_the_encoder_pretrained...): these tests fine-tune it
    "sentence_head_below": 0,
}


def lm_pipeline(bert: Path, between: bool = False, **lm: Any) -> Pipeline:
    """Tokenizer, a trainable LanguageModelFeaturizer (``between``: between two frozen ones),
    count vectors and a tiny DIET."""
    frozen = [{"name": "LanguageModelFeaturizer", "model_weights": str(bert), "alias": alias,
               "token_pooling": pooling} for alias, pooling in (("before", "mean"), ("after", "first"))]
    trainable = {"name": "LanguageModelFeaturizer", "model_weights": str(bert), "trainable": True, **lm}
    return Pipeline.build(load_config({"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        *([frozen[0], trainable, frozen[1]] if between else [trainable]),
        {"name": "CountVectorsFeaturizer"},
        TINY_DIET,
    ]}))


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("lm") / "tiny-bert")


def test_dense_columns_follow_the_order_features_are_stacked_in() -> None:
    message = Message("a b")
    message.add_features(Features(np.zeros((2, 3), np.float32), "sequence", "text", "spacy"))
    message.add_features(Features(scipy.sparse.csr_matrix((2, 9)), "sequence", "text", "counts"))
    message.add_features(Features(np.zeros((2, 5), np.float32), "sequence", "text", "lm"))
    message.add_features(Features(np.zeros((1, 5), np.float32), "sentence", "text", "lm"))
    assert dense_columns(message, "sequence", None, "lm") == (3, 8)
    assert dense_columns(message, "sequence", ["lm", "counts"], "lm") == (0, 5)
    assert dense_columns(message, "sentence", None, "lm") == (0, 5)
    assert dense_columns(message, "sentence", None, "spacy") is None
    stacked = message.features_for("text", "sequence", sparse=False)
    assert stacked is not None and stacked.shape == (2, 8)


@pytest.mark.parametrize(
    "lm", [{"trainable_layers": 1}, {"trainable_layers": None, "token_pooling": "first"},
           {"trainable_layers": 2, "between": True}]
)
def test_at_step_zero_the_graph_computes_the_frozen_features(
    bert: Path, tiny_data_path: Path, lm: dict[str, Any]
) -> None:
    from nlu_engine.classifiers.diet.training import build_network, ragged_signature

    pipeline = lm_pipeline(bert, training_precision="float32", **lm)  # exact: float32 products
    between = lm.get("between", False)
    data = load_data(tiny_data_path)
    for component in pipeline.components[:-1]:
        component.train(data)
        component.process(data.messages)
    diet = pipeline.components[-1]
    examples = [m for m in data.messages if m.intent]
    diet._learn_vocabularies(data, examples)
    slots = encoder_slots(diet.trainable_encoders, examples[0], None)
    columns = (8, 16) if between else (0, 8)
    assert [(s.seq_columns, s.sent_columns) for s in slots] == [(columns, columns)]
    spec = diet.training_spec(diet._label_features(examples), slots)
    encoded = encoding.encode(examples, spec.data, None, diet.label_of, slots)
    if between:  # the frozen featurizers' columns travel in the batch, the trainable one's not
        assert encoded.dense_seq is not None and encoded.dense_seq.shape[1] == 16
    else:
        assert encoded.dense_seq is None and encoded.dense_sent is None
    encoded.ragged = ragged_inputs(slots, examples)
    network = build_network(spec, ragged_signature(encoded.ragged))
    batch = make_batch(encoded, np.arange(len(examples)))
    sequence, sentence = network.dense_features({k: tf.constant(v) for k, v in batch.items()}, False)
    frozen = encoding.encode(examples, spec.data, None, diet.label_of)  # what the featurizer wrote
    expected = make_batch(frozen, np.arange(len(examples)))
    np.testing.assert_allclose(np.asarray(sequence), expected["dense_seq"], atol=2e-5)
    np.testing.assert_allclose(np.asarray(sentence), expected["dense_sent"], atol=2e-5)
    layer = network.encoder_layers[0]
    assert {id(v) for v in layer.trainable_variables} <= {id(v) for v in network.trainable_variables}


def test_few_examples_keep_the_encoder_pretrained_and_its_sentence_vector_ranks_intents(
    bert: Path, tiny_data_path: Path, tiny_texts: list[str]
) -> None:
    pipeline = lm_pipeline(bert, trainable_layers=1, weights_dtype="float32")
    pipeline.components[-1].config = dataclasses.replace(pipeline.components[-1].config,
                                                         sentence_head_below=50)
    pipeline.train(load_data(tiny_data_path), log=None)
    featurizer, diet = pipeline.components[1], pipeline.components[-1]
    assert diet.head_ is not None and diet.trainable_encoders == ()
    pretrained = load_weights(bert / "model.safetensors", featurizer._model().config)
    assert all(np.array_equal(w, pretrained[n]) for n, w in featurizer.tuned_weights_.items())
    messages = pipeline.process([Message(text) for text in tiny_texts])
    frozen = Pipeline.build(load_config({"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "LanguageModelFeaturizer", "model_weights": str(bert)},
    ]}))
    reference = frozen.process([Message(text) for text in tiny_texts])
    np.testing.assert_allclose(messages[1].features_for("text", "sentence", False),
                               reference[1].features_for("text", "sentence", False), atol=1e-5)



def test_fine_tuning_moves_only_the_trainable_layers_and_parses_with_them(
    bert: Path, tiny_data_path: Path, tiny_texts: list[str]
) -> None:
    pipeline = lm_pipeline(bert, trainable_layers=1, encoder_learning_rate=0.01, weights_dtype="float32")
    pipeline.train(load_data(tiny_data_path), log=None)
    featurizer = pipeline.components[1]
    pretrained = load_weights(bert / "model.safetensors", featurizer._model().config)
    tuned = featurizer.tuned_weights_
    assert set(tuned) == {n for n in pretrained if n.startswith("encoder.layer.1.")}
    assert all(not np.array_equal(w, pretrained[n]) for n, w in tuned.items() if not n.endswith("bias"))

    messages = pipeline.process([Message(text) for text in tiny_texts])
    frozen = Pipeline.build(load_config({"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "LanguageModelFeaturizer", "model_weights": str(bert)},
    ]}))
    reference = frozen.process([Message(text) for text in tiny_texts])
    first = messages[1].features_for("text", "sequence", sparse=False)
    assert first is not None and not np.allclose(first, reference[1].features_for("text", "sequence", False))
    assert all(m.intent in {"greet", "book_flight", "check_order"} for m in messages if m.tokens.get("text"))


def test_the_encoder_trains_at_its_own_learning_rate(bert: Path, tiny_data_path: Path) -> None:
    """With encoder_learning_rate 0 the encoder keeps its pretrained weights, DIET still learns."""
    pipeline = lm_pipeline(bert, trainable_layers=2, encoder_learning_rate=0.0, weights_dtype="float32")
    pipeline.train(load_data(tiny_data_path), log=None)
    featurizer, diet = pipeline.components[1], pipeline.components[-1]
    pretrained = load_weights(bert / "model.safetensors", featurizer._model().config)
    for name, weights in featurizer.tuned_weights_.items():
        np.testing.assert_array_equal(weights, pretrained[name], err_msg=name)
    assert diet.history_["epochs"][-1]["t_loss"] < diet.history_["epochs"][0]["t_loss"]


def test_kept_pretrained_the_placeholders_become_the_features_in_their_place(bert: Path) -> None:
    """Few examples an intent: the featurizer's placeholders on DIET's training messages are
    replaced by the pretrained features, each where its placeholder sat (the parse order)."""
    pipeline = lm_pipeline(bert, between=True)
    tokenizer, before, trainable, after = pipeline.components[:4]
    messages = [Message("play some jazz"), Message("hello there world")]
    tokenizer.process(messages)
    before.process(messages)
    trainable.process_training_data(messages)
    after.process(messages)
    order = [(f.origin, f.kind) for f in messages[0].features]
    with_pretrained_features(messages, [trainable])
    assert [(f.origin, f.kind) for f in messages[0].features] == order
    reference = [Message("play some jazz"), Message("hello there world")]
    tokenizer.process(reference)
    trainable.process(reference)
    for message, expected in zip(messages, reference, strict=True):
        for kind in ("sequence", "sentence"):
            got = [f.matrix for f in message.features if f.origin == trainable.origin() and f.kind == kind]
            want = [f.matrix for f in expected.features if f.kind == kind]
            assert len(got) == 1 and got[0].any()
            np.testing.assert_array_equal(got[0], want[0])
