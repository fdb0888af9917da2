"""LogisticRegressionClassifier's weights are checked against what it recorded (the intents of
classes.json and the feature width of shapes.json) before they are used."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.classifiers.logistic_regression import LogisticRegressionClassifier
from nlu_engine.contract.errors import ArchiveMemberError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.sparse.count_vectors import CountVectorsFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer

EXAMPLES = {
    "greet": ["hello", "hi there", "good morning", "hey"],
    "bye": ["goodbye", "see you later", "bye bye", "good night"],
    "thank": ["thanks", "thank you", "many thanks", "cheers"],
}


def trained(folder: Path) -> tuple[LogisticRegressionClassifier, list[Message]]:
    data = TrainingData(messages=[Message(t, intent=i) for i, texts in EXAMPLES.items() for t in texts])
    tokenizer, featurizer = WhitespaceTokenizer(), CountVectorsFeaturizer()
    tokenizer.process(data.messages)
    featurizer.train(data)
    featurizer.process(data.messages)
    classifier = LogisticRegressionClassifier()
    classifier.train(data)
    classifier.persist(folder)
    messages = [Message(t) for t in ("hello there", "thanks a lot")]
    tokenizer.process(messages)
    featurizer.process(messages)
    return classifier, messages


def rewrite(folder: Path, **arrays: np.ndarray) -> None:
    with np.load(folder / "weights.npz", allow_pickle=False) as stored:
        saved = {name: stored[name] for name in stored.files}
    np.savez(folder / "weights.npz", **{**saved, **arrays})


def test_persist_records_the_width_and_loads_the_same(tmp_path: Path) -> None:
    classifier, messages = trained(tmp_path)
    assert json.loads((tmp_path / "shapes.json").read_text()) == {"width": classifier.width_}
    loaded = LogisticRegressionClassifier.load(tmp_path, classifier.config)
    loaded.process(messages)
    assert [m.intent for m in messages] == ["greet", "thank"]


@pytest.mark.parametrize(
    ("change", "says"),
    [("one more column", "array 'coef' has shape"), ("one row less", "array 'coef' has shape"),
     ("intercept float64", "array 'intercept' is float64, not the float32"),
     ("intercept longer", "array 'intercept' has shape")],
)
def test_weights_unlike_the_record_are_refused(tmp_path: Path, change: str, says: str) -> None:
    classifier, _ = trained(tmp_path)
    coef, intercept = classifier.coef_, classifier.intercept_
    rewrite(tmp_path, **{
        "one more column": {"coef": np.hstack([coef, np.ones((coef.shape[0], 1), np.float32)])},
        "one row less": {"coef": coef[:-1]},
        "intercept float64": {"intercept": intercept.astype(np.float64)},
        "intercept longer": {"intercept": np.append(intercept, np.float32(0))},
    }[change])
    with pytest.raises(ArchiveMemberError) as info:
        LogisticRegressionClassifier.load(tmp_path, classifier.config)
    assert says in str(info.value) and "weights.npz" in str(info.value) and "retrain" in str(info.value)


def test_an_archive_without_the_record_still_checks_the_rows(tmp_path: Path) -> None:
    """Archives made before shapes.json load as before; their rows still match the intents."""
    classifier, messages = trained(tmp_path)
    (tmp_path / "shapes.json").unlink()
    LogisticRegressionClassifier.load(tmp_path, classifier.config).process(messages)
    assert [m.intent for m in messages] == ["greet", "thank"]
    rewrite(tmp_path, coef=classifier.coef_[:-1])
    with pytest.raises(ArchiveMemberError, match=r"not 3 row\(s\), one per intent of classes.json"):
        LogisticRegressionClassifier.load(tmp_path, classifier.config)
