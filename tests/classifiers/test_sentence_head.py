"""The sentence head: a logistic regression on sentence vectors for few examples an intent, its
cross-fitted calibration, and DIET choosing it from the data."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.classifiers import held_out
from nlu_engine.classifiers.sentence_head import (
    HEAD_FILE,
    SentenceHead,
    sentence_vectors,
)
from nlu_engine.contract.errors import ArchiveError
from nlu_engine.contract.message import Features, Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import write_data
from tests.classifiers.few_shot_data import FRAMES, TOPICS


def clusters(per_label: list[int], dim: int = 16, seed: int = 0, spread: float = 0.3):
    """Unit vectors around one centre per label [M, D] and their labels [M]."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(per_label), dim))
    vectors, labels = [], []
    for label, n in enumerate(per_label):
        vectors.append(centres[label] + spread * rng.normal(size=(n, dim)))
        labels += [label] * n
    x = np.concatenate(vectors)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), np.array(labels)


def test_the_head_ranks_separable_labels_and_gives_unseen_labels_nothing() -> None:
    x, y = clusters([8, 8, 8])
    head = SentenceHead.fit(x, y, n_labels=4)
    p = head.predict_proba(x)
    assert p.shape == (24, 4)
    assert np.allclose(p.sum(axis=1), 1.0)
    assert (p.argmax(axis=1) == y).all()
    assert p[:, 3].max() < 1e-6  # label 3 had no example


def test_the_head_handles_two_labels_and_one() -> None:
    x, y = clusters([6, 6])
    two = SentenceHead.fit(x, y, n_labels=2)
    assert (two.predict_proba(x).argmax(axis=1) == y).all()
    one = SentenceHead.fit(x[:6], y[:6], n_labels=3)
    assert np.allclose(one.predict_proba(x)[:, 0], 1.0)


def test_the_head_round_trips_and_refuses_broken_weights(tmp_path: Path) -> None:
    x, y = clusters([5, 5, 5])
    head = SentenceHead.fit(x, y, n_labels=3)
    head.persist(tmp_path)
    loaded = SentenceHead.load(tmp_path)
    assert loaded is not None
    assert np.array_equal(loaded.predict_proba(x), head.predict_proba(x))
    assert SentenceHead.load(tmp_path / "missing") is None
    f32 = np.float32
    broken = [  # (weights, bias, error, message, labels)
        (np.full((4, 3), np.nan, f32), np.zeros(3, f32), ArchiveError, "array 'weights' holds NaN", None),
        (np.full((4, 3), 1e300), np.zeros(3), ValueError, "NaN or infinite", None),  # inf at float32
        (np.zeros((4, 3), f32), np.zeros(2, f32), ValueError, "do not fit", None),
        # found by the hostile-archive search (tests/assembly/test_hostile_pipelines.py): integer
        # weights were read as floats, and a head without rows failed only when a message came
        (np.zeros((4, 3), np.int32), np.zeros(3, f32), ArchiveError,
         "array 'weights' is int32, not the float16 or float32", None),
        (np.zeros((0, 3), f32), np.zeros(3, f32), ValueError, "do not fit", None),
        (np.zeros((5, 3), f32), np.zeros(3, f32), ValueError,
         r"the weights are \[5, 3\], not the \[16, 3\]", 3),
    ]
    for weights, bias, error, message, labels in broken:
        np.savez(tmp_path / HEAD_FILE, weights=weights, bias=bias)
        with pytest.raises(error, match=message):
            SentenceHead.load(tmp_path, **({} if labels is None else {"labels": labels}))
    with pytest.raises(ValueError, match=r"not the \[16, 4\]"):
        head.persist(tmp_path)
        SentenceHead.load(tmp_path, labels=4)


def cross_fitted_calibration(x: np.ndarray, y: np.ndarray, n_labels: int):
    """The head's calibration as its owner fits it: on its out-of-fold predictions."""

    def fit_predict(train: np.ndarray, labels: np.ndarray, held: np.ndarray) -> np.ndarray:
        return SentenceHead.fit(x[train], labels, n_labels).predict_proba(x[held])

    return held_out.calibrate_cross_fitted(fit_predict, y, n_labels, x)


def test_cross_fitted_calibration_is_fitted_on_out_of_fold_predictions() -> None:
    x, y = clusters([10] * 6, spread=0.9, seed=3)
    fitted = cross_fitted_calibration(x, y, n_labels=6)
    assert fitted.calibrated and fitted.examples == 60
    assert fitted.notes["cross_fitted"]
    assert fitted.in_scope is not None and len(fitted.in_scope.reference) == 60
    assert len(fitted.notes["held_out_confidence"]) == len(fitted.notes["held_out_correct"]) == 60
    # out-of-fold predictions are wrong more often than the in-sample ones
    head = SentenceHead.fit(x, y, n_labels=6)
    assert fitted.notes["held_out_accuracy"] <= float((head.predict_proba(x).argmax(1) == y).mean())


def test_too_few_examples_to_hold_out_leave_the_head_uncalibrated() -> None:
    x, y = clusters([2, 2, 2])
    assert not cross_fitted_calibration(x, y, n_labels=3).calibrated


def test_sentence_vectors_put_unit_length_features_side_by_side() -> None:
    message = Message(text="hi")
    message.features += [
        Features(attribute="text", kind="sentence", origin="a", matrix=np.array([[3.0, 4.0]])),
        Features(attribute="text", kind="sentence", origin="b", matrix=np.array([[0.0, 2.0, 0.0]])),
    ]
    assert np.allclose(sentence_vectors([message]), [[0.6, 0.8, 0.0, 1.0, 0.0]])
    assert np.allclose(sentence_vectors([message], without={"a"}), [[0.0, 1.0, 0.0]])
    assert sentence_vectors([message], origins=["c"]) is None
    assert sentence_vectors([Message(text="no features")]) is None




def few_shot(per_intent: int, seed: int = 0) -> TrainingData:
    rng = random.Random(seed)
    messages = []
    for intent, words in TOPICS.items():
        texts: set[str] = set()
        while len(texts) < per_intent:
            texts.add(rng.choice(FRAMES).format(rng.choice(words)))
        messages += [Message(text=t, intent=intent) for t in sorted(texts)]
    return TrainingData(messages=messages)


def pipeline(**diet: object) -> dict:
    return {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "UniversalSentenceEncoderFeaturizer"},
        {"name": "DIETClassifier", "epochs": 2, "show_progress": False, "transformer_size": 16,
         "number_of_transformer_layers": 1, **diet},
    ]}


@pytest.fixture(scope="module")
def data_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("few") / "nlu.yml"
    write_data(few_shot(8), path)
    return path


def test_diet_ranks_few_shot_intents_with_the_head_and_calibrates_it(
    data_path: Path, tmp_path: Path,
) -> None:
    archive = train(pipeline(), str(data_path), out=str(tmp_path), fixed_model_name="m", log=None)
    model = Model.load(archive)
    diet = model.pipeline.components[-1]
    assert diet.head_ is not None
    assert diet.calibration_.calibrated and diet.calibration_.notes["cross_fitted"]
    texts = ["tell me about the storm", "a playlist of jazz", "sushi for lunch", "book a flight"]
    results = model.parse_batch(texts)
    assert [r["intent"]["name"] for r in results] == ["weather", "music", "food", "travel"]
    # the head's calibrated confidences are what the parse reports
    vectors = diet._head_vectors(model.pipeline.process([Message(text=t) for t in texts]))
    expected = diet.calibration_.apply(diet.head_.predict_proba(vectors), vectors)
    assert [r["intent"]["confidence"] for r in results] == pytest.approx(expected.max(axis=1).tolist())


def test_diet_keeps_its_own_ranking_with_many_examples_or_the_head_off(
    data_path: Path, tmp_path: Path,
) -> None:
    for below, folder in ((0, "off"), (5, "above")):
        config = pipeline(sentence_head_below=below)
        archive = train(config, str(data_path), out=str(tmp_path / folder), fixed_model_name="m", log=None)
        diet = Model.load(archive).pipeline.components[-1]
        assert diet.head_ is None
        assert not diet.calibration_.notes.get("cross_fitted")


def test_an_intent_with_one_example_trains_with_one_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    data = few_shot(8)
    data.messages.append(Message(text="call my mother", intent="phone"))
    path = tmp_path / "nlu.yml"
    write_data(data, path)
    with caplog.at_level("INFO"):
        archive = train(pipeline(), str(path), out=str(tmp_path), fixed_model_name="m", log=None)
    notices = [r.getMessage() for r in caplog.records if "one example" in r.getMessage()]
    assert len(notices) == 1 and "phone" in notices[0]
    model = Model.load(archive)
    assert model.pipeline.components[-1].calibration_.calibrated
    assert model.parse("call my mother")["intent"]["name"] == "phone"


def test_with_the_head_the_network_trains_for_fewer_steps_unless_epochs_are_set() -> None:
    from nlu_engine.classifiers.diet.component import DIETClassifier

    diet = DIETClassifier(DIETClassifier.Config())
    assert diet._head_epochs(640) == 50  # 4 batches an epoch: 200 steps
    assert diet._head_epochs(320) == 100  # 2 batches an epoch
    assert diet._head_epochs(20000) == 50  # never fewer than 50 epochs
    assert DIETClassifier(DIETClassifier.Config(epochs=7))._head_epochs(640) == 7


def test_with_the_head_a_language_models_token_states_need_no_transformer() -> None:
    """``head_transformer_layers: auto``: none over contextual token features (a language
    model's) below ``head_transformer_entities`` annotated entities, the configured layers
    otherwise, and a resumed network keeps its own."""
    from nlu_engine.classifiers.diet.component import DIETClassifier

    def message(contextual: bool) -> Message:
        plain = Message(text="fly to Oslo")
        states = np.zeros((3, 4), np.float32)
        plain.add_features(Features(states, "sequence", "text", "lm", contextual=contextual))
        return plain

    auto = DIETClassifier(number_of_transformer_layers=2)
    assert auto._transformer_layers([message(True)], None, head=True) == 0
    assert auto._transformer_layers([message(False)], None, head=True) == 2
    # many annotated entities (a few big intents and a long tail) keep the transformer
    annotated = message(True)
    annotated.entities = [{"start": 7, "end": 11, "value": "Oslo", "entity": "city"}]
    few = DIETClassifier(number_of_transformer_layers=2, head_transformer_entities=3)
    assert few._transformer_layers([annotated, annotated], None, head=True) == 0
    assert few._transformer_layers([annotated] * 3, None, head=True) == 2
    assert auto._transformer_layers([message(True)], None, head=False) == 2
    one = DIETClassifier(head_transformer_layers=1)
    assert one._transformer_layers([message(True)], None, head=True) == 1
    # a featurizer DIET does not read does not count
    other = DIETClassifier(featurizers=["CountVectorsFeaturizer"])
    assert other._transformer_layers([message(True)], None, head=True) == 2
    resumed = DIETClassifier(number_of_transformer_layers=2)
    resumed.transformer_layers_ = 0
    assert auto._transformer_layers([message(False)], resumed, head=False) == 0


def test_the_language_models_token_states_are_marked_contextual() -> None:
    from nlu_engine.assembly.config import load_config
    from nlu_engine.assembly.pipeline import Pipeline

    config = load_config({"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "LanguageModelFeaturizer", "model_name": "bert",
         "model_weights": "sentence-transformers/all-MiniLM-L6-v2"},
    ]})
    [message] = Pipeline.build(config).process([Message(text="fly to Oslo")])
    kinds = {f.kind: f.contextual for f in message.features}
    assert kinds == {"sequence": True, "sentence": False}


def test_the_head_networks_layers_are_stored_and_an_archive_without_them_loads_as_before(
    data_path: Path, tmp_path: Path,
) -> None:
    import json

    from nlu_engine.classifiers.diet.component import DIETClassifier
    from nlu_engine.classifiers.diet.storage import STATE_FILE

    texts = ["tell me about the storm", "a playlist of jazz"]
    for layers, below in ((0, 50), (1, 0)):
        archive = train(pipeline(head_transformer_layers=0, sentence_head_below=below), str(data_path),
                        out=str(tmp_path / str(below)), fixed_model_name="m", log=None)
        model = Model.load(archive)
        diet = model.pipeline.components[-1]
        assert diet.network_params().number_of_transformer_layers == layers  # the head's, or the config's
        assert (diet.head_ is not None) == (below == 50)
        folder = tmp_path / f"stored{below}"
        folder.mkdir()
        diet.persist(folder)
        assert json.loads((folder / STATE_FILE).read_text())["transformer_layers"] == layers
        if layers:  # an archive from before the key existed: the config's layers, the same parse
            state = json.loads((folder / STATE_FILE).read_text())
            del state["transformer_layers"]
            (folder / STATE_FILE).write_text(json.dumps(state))
        again = DIETClassifier.load(folder, diet.config)
        assert again.network_params().number_of_transformer_layers == layers
        expected = model.parse_batch(texts)
        model.pipeline.components[-1] = again
        assert model.parse_batch(texts) == expected
