"""The trainable top of the BERT encoder (TrainableBert) against the featurizer's NumPy pass.

With the pretrained weights the layer must compute the frozen features exactly (DIET's
step 0); with changed weights, the weights it hands back must make the NumPy encoder compute
what the layer computes (training and parsing see the same features).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nlu_engine.contract.message import Message
from nlu_engine.featurizers.dense.bert import load_weights
from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from tests.extras import requires_extra
from tests.featurizers.tiny_bert import HIDDEN, LAYERS, sentence_transformers_files, tiny_bert

pytestmark = requires_extra("lm")

TEXTS = [
    "hello unbelievable world!",
    "book a table for two",
    "hi",
    " ".join(["hello"] * 13 + ["unbelievable", "paris"]),  # over the 16 sub-token limit: truncated
]


def tokenized(*texts: str) -> list[Message]:
    messages = [Message(text) for text in texts]
    WhitespaceTokenizer().process(messages)
    return messages


def pad(arrays: list[np.ndarray]) -> np.ndarray:
    out = np.zeros((len(arrays), max(len(a) for a in arrays), *arrays[0].shape[1:]), arrays[0].dtype)
    for i, array in enumerate(arrays):
        out[i, : len(array)] = array
    return out


def layer_features(
    featurizer: LanguageModelFeaturizer, layer: object, messages: list[Message], training: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The layer's (sequence (B, T, H), sentence (B, H)) for messages, batched as DIET does."""
    import tensorflow as tf

    inputs = featurizer.encode_inputs(messages)
    batch = {key: tf.constant(pad([i[key] for i in inputs])) for key in inputs[0]}
    words = max(len(m.tokens["text"]) for m in messages)
    sequence, sentence = layer(batch, tf.constant(words), training=training)  # type: ignore[operator]
    return np.asarray(sequence), np.asarray(sentence)


def numpy_features(
    featurizer: LanguageModelFeaturizer, messages: list[Message]
) -> list[tuple[np.ndarray, np.ndarray]]:
    return featurizer.featurize([[t.text for t in m.tokens["text"]] for m in messages])


def assert_same_features(
    layer_out: tuple[np.ndarray, np.ndarray], expected: list[tuple[np.ndarray, np.ndarray]], atol: float
) -> None:
    sequences, sentences = layer_out
    for b, (sequence, sentence) in enumerate(expected):
        np.testing.assert_allclose(sequences[b, : len(sequence)], sequence, atol=atol)
        assert not sequences[b, len(sequence) :].any()  # padding words stay zero
        np.testing.assert_allclose(sentences[b], sentence[0], atol=atol)


@pytest.fixture
def bert_dir(tmp_path: Path) -> Path:
    return tiny_bert(tmp_path / "tiny-bert")


@pytest.mark.parametrize("trainable_layers", [1, LAYERS, None])
@pytest.mark.parametrize("token_pooling", ["mean", "first"])
def test_pretrained_layer_computes_the_frozen_features(
    bert_dir: Path, trainable_layers: int | None, token_pooling: str
) -> None:
    featurizer = LanguageModelFeaturizer(
        model_weights=str(bert_dir), trainable=True, trainable_layers=trainable_layers,
        token_pooling=token_pooling,
    )
    messages = tokenized(*TEXTS)
    inputs = featurizer.encode_inputs(messages)
    assert ("ids" in inputs[0]) == (trainable_layers is None)
    assert ("states" in inputs[0]) == (trainable_layers is not None)
    assert max(len(i["mask"]) for i in inputs) == 16  # truncated as the featurizer truncates
    layer = featurizer.build()
    assert_same_features(layer_features(featurizer, layer, messages), numpy_features(featurizer, messages),
                         atol=2e-5)


def test_sentence_mean_pooling_and_normalisation_in_the_layer(bert_dir: Path) -> None:
    sentence_transformers_files(bert_dir, "mean", normalize=True)
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=1)
    messages = tokenized(*TEXTS)
    layer = featurizer.build()
    sequences, sentences = layer_features(featurizer, layer, messages)
    np.testing.assert_allclose(np.linalg.norm(sentences, axis=-1), 1.0, atol=1e-6)
    assert_same_features((sequences, sentences), numpy_features(featurizer, messages), atol=2e-5)


def test_untouched_layer_hands_back_the_pretrained_weights(bert_dir: Path) -> None:
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=1)
    tuned = featurizer.build().tuned_weights()
    pretrained = load_weights(bert_dir / "model.safetensors", featurizer._model().config)
    assert set(tuned) == {n for n in pretrained if n.startswith(f"encoder.layer.{LAYERS - 1}.")}
    for name, value in tuned.items():
        np.testing.assert_array_equal(value, pretrained[name])

    everything = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True).build().tuned_weights()
    assert set(everything) == set(pretrained)


def test_a_layer_built_from_tuned_weights_starts_from_them(bert_dir: Path) -> None:
    """``build(start)``: the weights a contrastive phase tuned, which DIET's training goes on from;
    weights that do not fit the trainable layers are refused."""
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=1)
    rng = np.random.default_rng(5)
    start = {name: w + rng.normal(0, 0.1, w.shape).astype(np.float32)
             for name, w in featurizer.pretrained_weights().items()}
    built = featurizer.build(start).tuned_weights()
    assert set(built) == set(start)
    for name, value in built.items():
        np.testing.assert_allclose(value, start[name], rtol=1e-6, err_msg=name)
    assert not hasattr(featurizer, "tuned_weights_")  # building adopts nothing
    with pytest.raises(ValueError, match="do not fit trainable_layers 1"):
        featurizer.build({name: w for name, w in start.items() if "query" not in name})


@pytest.mark.parametrize("trainable_layers", [1, None])
def test_tensorflow_and_numpy_agree_on_tuned_weights(bert_dir: Path, trainable_layers: int | None) -> None:
    featurizer = LanguageModelFeaturizer(
        model_weights=str(bert_dir), trainable=True, trainable_layers=trainable_layers,
        weights_dtype="float32",
    )
    messages = tokenized(*TEXTS)
    frozen = numpy_features(featurizer, messages)
    layer = featurizer.build()
    rng = np.random.default_rng(7)
    for variable in layer.trainable_variables:  # as if trained: every weight moved
        variable.assign(np.asarray(variable) + rng.normal(0, 0.2, variable.shape).astype(np.float32))
    from_layer = layer_features(featurizer, layer, messages)
    featurizer.adopt(layer.tuned_weights())
    tuned = numpy_features(featurizer, messages)
    assert_same_features(from_layer, tuned, atol=5e-5)
    assert not np.allclose(tuned[0][0], frozen[0][0], atol=1e-3)  # the tuned weights are in use


def test_float16_storage_rounds_the_weights_once(bert_dir: Path) -> None:
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=1)
    layer = featurizer.build()
    featurizer.adopt(layer.tuned_weights())
    assert {w.dtype for w in featurizer.tuned_weights_.values()} == {np.dtype(np.float16)}
    messages = tokenized(*TEXTS)
    # features from float16-rounded weights stay close to the layer's float32 ones
    assert_same_features(layer_features(featurizer, layer, messages), numpy_features(featurizer, messages),
                         atol=5e-2)


def test_variable_groups_run_from_the_top_layer_to_the_embeddings(bert_dir: Path) -> None:
    top = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=1).build()
    assert len(top.variable_groups()) == 1
    everything = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True).build()
    groups = everything.variable_groups()
    assert len(groups) == LAYERS + 1
    assert groups[-1][0].shape[1] == HIDDEN and groups[-1][0].shape[0] > 16  # the word embeddings
    assert sum(len(g) for g in groups) == len(everything.trainable_variables)


def test_encoder_dropout_acts_only_in_training(bert_dir: Path) -> None:
    featurizer = LanguageModelFeaturizer(
        model_weights=str(bert_dir), trainable=True, trainable_layers=1, encoder_dropout=0.5
    )
    messages = tokenized(*TEXTS[:2])
    layer = featurizer.build()
    quiet = layer_features(featurizer, layer, messages)
    assert_same_features(quiet, numpy_features(featurizer, messages), atol=2e-5)
    noisy = layer_features(featurizer, layer, messages, training=True)
    assert not np.allclose(noisy[0], quiet[0])


def test_bfloat16_products_keep_float32_weights_and_close_features(
    bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tensorflow as tf

    import nlu_engine.nn.tensorflow_runtime as runtime

    monkeypatch.setattr(runtime, "onednn_active", lambda: True)
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=LAYERS,
                                         training_precision="bfloat16")
    assert featurizer.optimization().bfloat16
    layer = featurizer.build()
    assert layer.compute == tf.bfloat16
    assert {v.dtype for v in layer.trainable_variables} == {"float32"}  # the master weights
    messages = tokenized(*TEXTS)
    # bfloat16 keeps 8 bits of mantissa: the features move by about 1e-2, not more
    assert_same_features(layer_features(featurizer, layer, messages), numpy_features(featurizer, messages),
                         atol=6e-2)
    inputs = featurizer.encode_inputs(messages[:2])
    batch = {key: tf.constant(pad([i[key] for i in inputs])) for key in inputs[0]}
    with tf.GradientTape() as tape:
        words = max(len(m.tokens["text"]) for m in messages[:2])
        sequence, sentence = layer(batch, tf.constant(words), training=True)
        loss = tf.reduce_sum(sequence**2) + tf.reduce_sum(sentence**2)
    grads = tape.gradient(loss, layer.trainable_variables)
    assert all(g is not None and g.dtype == tf.float32 for g in grads)


def test_bfloat16_without_onednn_fine_tunes_in_float32(
    bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tensorflow as tf

    import nlu_engine.nn.tensorflow_runtime as runtime

    monkeypatch.setattr(runtime, "onednn_active", lambda: False)
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=1,
                                         training_precision="bfloat16")
    layer = featurizer.build()
    assert layer.compute == tf.float32
    messages = tokenized(*TEXTS)
    assert_same_features(layer_features(featurizer, layer, messages), numpy_features(featurizer, messages),
                         atol=2e-5)


@pytest.mark.parametrize(("flags", "setting", "expected"), [
    ({"avx512f", "avx512_bf16"}, "auto", "bfloat16"),
    ({"avx2", "amx_bf16"}, "auto", "bfloat16"),
    ({"avx2", "avx512_vnni"}, "auto", "float32"),
    (set(), "auto", "float32"),
    ({"avx512_bf16"}, "float32", "float32"),  # forced: a CPU with bfloat16 trains as one without
    (set(), "bfloat16", "bfloat16"),
])
def test_training_precision_reads_the_cpu(
    bert_dir: Path, monkeypatch: pytest.MonkeyPatch, flags: set[str], setting: str, expected: str
) -> None:
    import nlu_engine.nn.cpu as cpu

    monkeypatch.setattr(cpu, "detect", lambda: cpu.Cpu(frozenset(flags)))
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=1,
                                         training_precision=setting)
    assert featurizer.training_dtype() == expected
    assert featurizer.optimization().bfloat16 == (expected == "bfloat16")
