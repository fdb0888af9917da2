"""SklearnIntentClassifier: libsvm-equal decision values and probabilities, grid search, tiny
data, persistence without pickle."""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from nlu_engine.classifiers.held_out import fit_sigmoid
from nlu_engine.classifiers.sklearn_intent import (
    SklearnIntentClassifier,
    SVMModel,
)
from nlu_engine.classifiers.svm_probability import pairwise_probabilities
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.sparse.count_vectors import CountVectorsFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer

EXAMPLES = {
    "greet": ["hello", "hi there", "good morning", "hey", "hello friend", "hi", "good evening"],
    "bye": ["goodbye", "see you later", "bye bye", "good night", "bye", "see you", "farewell"],
    "thank": ["thanks", "thank you", "many thanks", "cheers", "thanks a lot", "thx", "thank you kindly"],
    "weather": ["is it raining", "weather forecast", "will it snow", "how hot is it", "is it sunny",
                "weather today", "will it rain"],
}


Featurized = tuple[TrainingData, WhitespaceTokenizer, CountVectorsFeaturizer]


def featurized(examples: dict[str, list[str]]) -> Featurized:
    data = TrainingData(
        messages=[Message(text, intent=intent) for intent, texts in examples.items() for text in texts]
    )
    tokenizer, featurizer = WhitespaceTokenizer(), CountVectorsFeaturizer(analyzer="char_wb", max_ngram=3)
    tokenizer.process(data.messages)
    featurizer.train(data)
    featurizer.process(data.messages)
    return data, tokenizer, featurizer


def parse(classifier: SklearnIntentClassifier, pipeline: Featurized, *texts: str) -> list[Message]:
    _, tokenizer, featurizer = pipeline
    messages = [Message(text) for text in texts]
    tokenizer.process(messages)
    featurizer.process(messages)
    classifier.process(messages)
    return messages


def random_problem(n_classes: int, seed: int = 0) -> tuple[scipy.sparse.csr_matrix, np.ndarray]:
    rs = np.random.RandomState(seed)
    X = (rs.rand(60, 8) > 0.6) * rs.rand(60, 8)
    y = np.arange(60) % n_classes
    X[np.arange(60), y] += 1.0  # learnable, not separable
    return scipy.sparse.csr_matrix(X), y


@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "sigmoid"])
def test_decision_values_equal_libsvm(n_classes: int, kernel: str) -> None:
    from sklearn.svm import SVC

    X, y = random_problem(n_classes)
    model = SVMModel.fit(X, y, n_classes, C=2.0, gamma=0.1, kernel=kernel)
    svc = SVC(C=2.0, gamma=0.1, kernel=kernel, class_weight="balanced", decision_function_shape="ovo")
    expected = svc.fit(X, y).decision_function(X)
    if n_classes == 2:  # scikit-learn reports the binary case with the opposite sign
        expected = -expected.reshape(-1, 1)
    np.testing.assert_allclose(model.decision_values(X), expected, atol=1e-9)


@pytest.mark.parametrize("n_classes", [2, 4])
def test_probabilities_equal_libsvm_given_its_sigmoids(n_classes: int) -> None:
    from sklearn.svm import SVC

    if "probability" not in inspect.signature(SVC).parameters:
        pytest.skip("this scikit-learn has no SVC(probability=True) to compare with")
    X, y = random_problem(n_classes, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        svc = SVC(C=1.0, kernel="linear", class_weight="balanced", probability=True, random_state=0)
        svc.fit(X, y)
        expected = svc.predict_proba(X)
        prob_a, prob_b = svc.probA_, svc.probB_
    model = SVMModel.fit(X, y, n_classes, C=1.0, gamma=0.1, kernel="linear")
    # the same sigmoids (libsvm fits them on its own random folds) give the same probabilities
    probabilities = pairwise_probabilities(model.decision_values(X), prob_a, prob_b, n_classes)
    np.testing.assert_allclose(probabilities, expected, atol=1e-9)
    # ours, from our folds, are close and agree on the winner for clear cases
    ours = model.predict_proba(X)
    np.testing.assert_allclose(ours.sum(axis=1), 1.0, atol=1e-9)
    clear = expected.max(axis=1) > 0.6
    assert (ours.argmax(axis=1)[clear] == expected.argmax(axis=1)[clear]).mean() > 0.9


def test_sigmoid_train_is_platts_maximum_likelihood() -> None:
    rs = np.random.RandomState(3)
    labels = np.where(rs.rand(200) > 0.5, 1, -1)
    decisions = rs.randn(200) + labels
    A, B = fit_sigmoid(decisions, labels)
    assert A < 0  # larger decision values mean the positive class
    # gradient of the regularised log-likelihood (Platt's targets) vanishes at the optimum
    positives = (labels > 0).sum()
    targets = np.where(labels > 0, (positives + 1) / (positives + 2), 1 / (len(labels) - positives + 2))
    p = 1 / (1 + np.exp(A * decisions + B))
    assert abs(np.sum((targets - p) * decisions)) < 1e-4
    assert abs(np.sum(targets - p)) < 1e-4


def test_trains_and_ranks_intents() -> None:
    pipeline = featurized(EXAMPLES)
    classifier = SklearnIntentClassifier()
    classifier.train(pipeline[0])
    assert classifier.search_["folds"] == 2  # max(2, min(5, 7 // 5))
    assert classifier.search_["best_params"]["C"] in [1, 2, 5, 10, 20, 100]
    messages = parse(classifier, pipeline, "hello there friend", "thanks so much", "will it rain today")
    assert [m.intent for m in messages] == ["greet", "thank", "weather"]
    for message in messages:
        confidences = [r["confidence"] for r in message.intent_ranking]
        assert confidences == sorted(confidences, reverse=True)
        assert len(confidences) == 4 and sum(confidences) == pytest.approx(1.0)
        assert message.intent_confidence == confidences[0] > 0.4
    classifier.config = dataclasses.replace(classifier.config, ranking_length=2)
    [message] = parse(classifier, pipeline, "good evening")
    assert len(message.intent_ranking) == 2


def test_rbf_kernel_and_grid() -> None:
    pipeline = featurized(EXAMPLES)
    classifier = SklearnIntentClassifier(C=[1, 10], gamma=[0.1, 1.0], kernels=["linear", "rbf"])
    classifier.train(pipeline[0])
    assert classifier.search_["best_params"]["kernel"] in ("linear", "rbf")
    [message] = parse(classifier, pipeline, "bye bye now")
    assert message.intent == "bye"


def test_persist_load_identical_without_pickle(tmp_path: Path) -> None:
    pipeline = featurized(EXAMPLES)
    classifier = SklearnIntentClassifier(kernels=["rbf"], gamma=[0.5])
    classifier.train(pipeline[0])
    classifier.persist(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.json", "svm.json", "svm.npz"]
    with np.load(tmp_path / "svm.npz", allow_pickle=False) as arrays:
        assert all(arrays[name].dtype != object for name in arrays.files)
    loaded = SklearnIntentClassifier.load(tmp_path, classifier.config)
    texts = ["hello", "see you tomorrow", "is it cold", "xyzzy"]
    before = [m.as_parse_result() for m in parse(classifier, pipeline, *texts)]
    after = [m.as_parse_result() for m in parse(loaded, pipeline, *texts)]
    assert before == after


def test_tiny_data_trains_without_search() -> None:
    pipeline = featurized({"greet": ["hello"], "bye": ["goodbye"]})
    classifier = SklearnIntentClassifier()
    classifier.train(pipeline[0])
    assert classifier.search_["folds"] == 0
    # libsvm's cross-validated sigmoid would invert these probabilities; ours follow the SVM
    hello, goodbye = parse(classifier, pipeline, "hello", "goodbye")
    assert (hello.intent, goodbye.intent) == ("greet", "bye")
    assert hello.intent_confidence > 0.5 and goodbye.intent_confidence > 0.5
    assert sum(r["confidence"] for r in hello.intent_ranking) == pytest.approx(1.0)


def test_tiny_data_with_several_examples() -> None:
    pipeline = featurized({"greet": ["hello", "hi there"], "bye": ["goodbye", "see you"]})
    classifier = SklearnIntentClassifier()
    classifier.train(pipeline[0])
    messages = parse(classifier, pipeline, "hello", "hi there", "goodbye", "see you")
    assert [m.intent for m in messages] == ["greet", "greet", "bye", "bye"]


def test_single_intent_predicts_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pipeline = featurized({"greet": ["hello", "hi"]})
    classifier = SklearnIntentClassifier()
    classifier.train(pipeline[0])
    assert "fewer than 2 intents" in caplog.text
    classifier.persist(tmp_path)
    loaded = SklearnIntentClassifier.load(tmp_path, classifier.config)
    for component in (classifier, loaded):
        [message] = parse(component, pipeline, "hello")
        assert (message.intent, message.intent_confidence, message.intent_ranking) == (None, 0.0, [])


def _svm_broken(arrays: dict[str, np.ndarray], how: str) -> dict[str, np.ndarray]:
    arrays = dict(arrays)
    if how == "index out of range":
        arrays["sv_indices"] = arrays["sv_indices"].copy()
        arrays["sv_indices"][0] = 10**6
    elif how == "indptr past the data":
        arrays["sv_indptr"] = arrays["sv_indptr"].copy()
        arrays["sv_indptr"][-1] += 5
    elif how == "more columns":
        arrays["sv_shape"] = arrays["sv_shape"] + np.array([0, 1])
    elif how == "n_support off":
        arrays["n_support"] = arrays["n_support"] + 1
    elif how == "dual_coef short":
        arrays["dual_coef"] = arrays["dual_coef"][:, :-1]
    elif how == "intercept float32":
        arrays["intercept"] = arrays["intercept"].astype(np.float32)
    return arrays


@pytest.mark.parametrize(
    ("how", "says"),
    [("index out of range", "'sv_indices' points outside the feature width"),
     ("indptr past the data", "'sv_indptr' is not a row index"),
     ("more columns", "columns, not the"),
     ("n_support off", "'n_support' does not add up"),
     ("dual_coef short", "'dual_coef' has shape"),
     ("intercept float32", "array 'intercept' is float32, not the float64")],
)
def test_inconsistent_support_vectors_are_refused_before_scipy_sees_them(
    tmp_path: Path, how: str, says: str
) -> None:
    """scipy's CSR code is native: indices past the width would be read out of bounds."""
    from nlu_engine.contract.errors import ArchiveMemberError

    classifier = SklearnIntentClassifier(kernels=["linear"], C=[1])
    classifier.train(featurized(EXAMPLES)[0])
    classifier.persist(tmp_path)
    with np.load(tmp_path / "svm.npz", allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    np.savez(tmp_path / "svm.npz", **_svm_broken(arrays, how))
    with pytest.raises(ArchiveMemberError) as info:
        SklearnIntentClassifier.load(tmp_path, classifier.config)
    assert says in str(info.value) and "svm.npz" in str(info.value) and "\n" not in str(info.value)
