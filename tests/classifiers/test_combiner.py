"""The intent combiner: sentence heads and recorded scorers weighed on held-out predictions,
never worse than its best member where it is fitted, calibrated once, persisted as numbers."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.classifiers import scores
from nlu_engine.classifiers.combiner import STATE_FILE, IntentCombiner
from nlu_engine.contract.message import Features, Message, Token
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import write_data
from tests.classifiers.test_sentence_head import few_shot


def clustered_messages(per_label: int, labels: int, seed: int, noise: dict[str, float],
                       dim: int = 12) -> list[Message]:
    """Messages of ``labels`` intents, each with one dense sentence feature per origin in
    ``noise``: the intent's centre plus noise of that spread (a large spread: an origin that
    tells little)."""
    rng = np.random.default_rng(seed)
    centres = {origin: rng.normal(size=(labels, dim)) for origin in noise}
    messages = []
    for label in range(labels):
        for _ in range(per_label):
            message = Message(text=f"m{label}", intent=f"intent_{label}")
            message.tokens["text"] = [Token(text=f"m{label}", start=0, end=len(f"m{label}"))]
            for origin, spread in noise.items():
                vector = centres[origin][label] + spread * rng.normal(size=dim)
                message.features.append(Features(attribute="text", kind="sentence", origin=origin,
                                                 matrix=vector[None, :].astype(np.float32)))
            messages.append(message)
    return messages


def test_an_uninformative_member_gets_little_weight_and_the_whole_is_not_worse() -> None:
    train_messages = clustered_messages(12, 6, seed=0, noise={"good": 0.6, "noise": 50.0})
    combiner = IntentCombiner(random_seed=0)
    combiner.train(TrainingData(messages=train_messages))
    weights = {m.name: m.weight for m in combiner.members_}
    assert weights["good"] > 5 * weights["noise"]
    notes = combiner.calibration_.notes
    assert notes["combined_accuracy"] >= max(notes["members_accuracy"].values()) - 0.05
    assert combiner.calibration_.calibrated
    test = clustered_messages(20, 6, seed=0, noise={"good": 0.6, "noise": 50.0})[::3]
    combiner.process(test)
    assert np.mean([m.intent == f"intent_{m.text[1:]}" for m in test]) > 0.8


def test_recorded_scores_join_only_with_enough_held_out_predictions(caplog: pytest.LogCaptureFixture) -> None:
    messages = clustered_messages(10, 4, seed=2, noise={"vec": 0.8})
    intents = [f"intent_{i}" for i in range(4)]
    for message in messages[:30]:  # enough held-out predictions, and right ones
        right = np.eye(4)[intents.index(message.intent or "")] * 0.9 + 0.025
        scores.record(message, "DIETClassifier_3", intents, right)
    combiner = IntentCombiner(random_seed=0)
    combiner.train(TrainingData(messages=messages))
    assert [m.name for m in combiner.members_] == ["vec", "DIETClassifier_3"]
    few = clustered_messages(10, 4, seed=2, noise={"vec": 0.8})
    for message in few[:5]:
        scores.record(message, "DIETClassifier_3", intents, np.full(4, 0.25))
    with caplog.at_level(logging.INFO):
        combiner.train(TrainingData(messages=few))
    assert [m.name for m in combiner.members_] == ["vec"]
    assert "too few held-out predictions to weigh DIETClassifier_3 (5 held out" in caplog.text


def test_one_example_an_intent_trains_with_a_notice(caplog: pytest.LogCaptureFixture) -> None:
    messages = clustered_messages(1, 5, seed=3, noise={"a": 0.5, "b": 0.5})
    with caplog.at_level(logging.INFO):
        combiner = IntentCombiner()
        combiner.train(TrainingData(messages=messages))
    assert "too few examples an intent to cross-fit its scorers" in caplog.text
    assert not combiner.calibration_.calibrated
    combiner.process(messages)
    assert all(m.intent is not None for m in messages)


def test_persist_and_load_give_the_same_confidences(tmp_path: Path) -> None:
    messages = clustered_messages(8, 5, seed=4, noise={"a": 0.7, "b": 1.5})
    combiner = IntentCombiner(random_seed=0)
    combiner.train(TrainingData(messages=messages))
    combiner.persist(tmp_path)
    loaded = IntentCombiner.load(tmp_path, combiner.config)
    first, second = clustered_messages(3, 5, seed=9, noise={"a": 0.7, "b": 1.5}), \
        clustered_messages(3, 5, seed=9, noise={"a": 0.7, "b": 1.5})
    combiner.process(first)
    loaded.process(second)
    assert [m.intent_ranking for m in first] == [m.intent_ranking for m in second]
    state = (tmp_path / STATE_FILE).read_text()
    (tmp_path / STATE_FILE).write_text(state.replace('"head"', '"mystery"', 1))
    with pytest.raises(ValueError, match="not a head or recorded scorer"):
        IntentCombiner.load(tmp_path, combiner.config)


def test_a_pipeline_with_diet_and_the_combiner_trains_and_parses(tmp_path: Path) -> None:
    data = tmp_path / "nlu.yml"
    write_data(few_shot(6), data)
    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "UniversalSentenceEncoderFeaturizer"},
        {"name": "DIETClassifier", "epochs": 2, "show_progress": False, "transformer_size": 16,
         "number_of_transformer_layers": 1},
        {"name": "IntentCombiner"},
    ]}
    archive = train(config, data, tmp_path / "models")
    model = Model.load(archive)
    result = model.parse("what is the weather like")
    assert result["intent"]["name"] and 0.0 <= result["intent"]["confidence"] <= 1.0


def test_the_ngram_head_joins_on_small_data_and_persists(tmp_path: Path) -> None:
    import scipy.sparse

    messages = clustered_messages(8, 4, seed=5, noise={"vec": 3.0})
    rng = np.random.default_rng(5)
    for message in messages:  # each intent's own words, and some shared ones
        label = int(message.text[1:])
        counts = np.zeros(40)
        counts[rng.choice(range(label * 10, label * 10 + 10), 3)] += 1
        counts[rng.choice(40, 2)] += 1
        message.features.append(Features(attribute="text", kind="sentence", origin="counts",
                                         matrix=scipy.sparse.csr_matrix(counts[None, :])))
    combiner = IntentCombiner(random_seed=0)
    combiner.train(TrainingData(messages=messages))
    assert [m.kind for m in combiner.members_] == ["head", "sparse"]
    accuracy = combiner.calibration_.notes["members_accuracy"]
    assert accuracy["n-grams"] > accuracy["vec"]  # the noisy vector tells less than the words
    combiner.persist(tmp_path)
    loaded = IntentCombiner.load(tmp_path, combiner.config)
    first = messages[:6]
    second = [Message(text=m.text, tokens=m.tokens, features=m.features) for m in first]
    combiner.process(first)
    loaded.process(second)
    assert [m.intent_ranking for m in first] == [m.intent_ranking for m in second]
    never = IntentCombiner(random_seed=0, sparse_head_below=0)
    never.train(TrainingData(messages=messages))
    assert [m.kind for m in never.members_] == ["head"]


def test_a_message_no_ngram_vocabulary_knows_is_ranked_by_the_sentence_heads(tmp_path: Path) -> None:
    """The n-gram head weighs by the share of a message's tokens its vocabulary knows: two
    messages of unknown words rank the same whatever n-grams their sentences share with the
    training data, where known words do move the ranking. A model from before the weighting
    (no ``ngram_coverage`` in its state) parses without it."""
    import json

    import scipy.sparse

    messages = clustered_messages(8, 4, seed=5, noise={"vec": 3.0})
    rng = np.random.default_rng(5)

    def add_counts(message: Message, columns: list[int], known: bool) -> None:
        counts = np.zeros(40)
        counts[columns] += 1
        message.features.append(Features(attribute="text", kind="sentence", origin="counts",
                                         matrix=scipy.sparse.csr_matrix(counts[None, :])))
        token = scipy.sparse.csr_matrix(counts[None, :] if known else np.zeros((1, 40)))
        message.features.append(Features(attribute="text", kind="sequence", origin="counts", matrix=token))

    for message in messages:
        label = int(message.text[1:])
        add_counts(message, list(rng.choice(range(label * 10, label * 10 + 10), 3)), known=True)
    combiner = IntentCombiner(random_seed=0)
    combiner.train(TrainingData(messages=messages))
    assert combiner.ngram_coverage_ and [m.kind for m in combiner.members_] == ["head", "sparse"]

    def probe(columns: list[int], known: bool) -> list[dict]:
        message = Message(text="m0", tokens=messages[0].tokens,
                          features=[f for f in messages[0].features if f.origin == "vec"])
        add_counts(message, columns, known)
        combiner.process([message])
        return message.intent_ranking

    assert probe([30, 31, 32], known=False) == probe([10, 11, 12], known=False)
    assert probe([30, 31, 32], known=True) != probe([10, 11, 12], known=True)
    combiner.persist(tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    del state["ngram_coverage"]
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    assert not IntentCombiner.load(tmp_path, combiner.config).ngram_coverage_


def _in_language(messages: list[Message], code: str) -> list[Message]:
    from types import SimpleNamespace

    for message in messages:
        message.language = SimpleNamespace(name=code, confidence=0.99)  # type: ignore[attr-defined]
    return messages


def test_a_message_in_another_language_is_ranked_by_the_members_that_read_it() -> None:
    """An English bot with an English-only encoder ("english") beside a multilingual one
    ("multi"): on a German message the English encoder's vector is noise. The combiner trusts
    only the members whose encoders read German there, and stays as it was in English."""
    noise = {"multi": 1.0, "english": 0.5}
    train_messages = _in_language(clustered_messages(12, 6, seed=0, noise=noise), "en")
    combiner = IntentCombiner(random_seed=0)
    combiner.language = "en"
    combiner.member_languages_ = {"multi": ["de", "en"], "english": ["en"]}
    combiner.train(TrainingData(messages=train_messages))
    assert combiner.own_languages_ == ["en"]
    assert [v.members for v in combiner.views_] == [(), (0,)]  # no encoder reads it; multi's languages
    weights = {m.name: m.weight for m in combiner.members_}
    assert weights["english"] > 0 and weights["multi"] > 0

    def german() -> list[Message]:  # the multilingual vector as in English, the English one noise
        messages = clustered_messages(20, 6, seed=0, noise=noise)[::3]
        rng = np.random.default_rng(5)
        for m in messages:
            m.features[1].matrix = 8 * rng.normal(size=m.features[1].matrix.shape).astype(np.float32)
        return messages

    def accuracy(messages: list[Message]) -> float:
        combiner.process(messages)
        return float(np.mean([m.intent == f"intent_{m.text[1:]}" for m in messages]))

    unknown = accuracy(german())  # not identified: the full combination, misled by the noise
    identified = accuracy(_in_language(german(), "de"))
    assert identified > 0.85 and identified > unknown + 0.2
    # English messages, identified or not, take the full combination as before
    english = clustered_messages(20, 6, seed=0, noise=noise)[::3]
    identified_english = _in_language(clustered_messages(20, 6, seed=0, noise=noise)[::3], "en")
    assert accuracy(identified_english) == accuracy(english)
    # a language no encoder reads: nothing but uniform confidences to act on
    swahili = _in_language(german(), "sw")
    combiner.process(swahili)
    assert max(m.intent_confidence for m in swahili) < 0.5


def test_language_views_persist_and_an_archive_without_them_parses_as_before(tmp_path: Path) -> None:
    noise = {"multi": 1.0, "english": 0.5}
    combiner = IntentCombiner(random_seed=0)
    combiner.language = "en"
    combiner.member_languages_ = {"multi": ["de", "en"], "english": ["en"]}
    combiner.train(TrainingData(messages=clustered_messages(12, 6, seed=0, noise=noise)))
    combiner.persist(tmp_path)
    loaded = IntentCombiner.load(tmp_path, combiner.config)
    assert [v.members for v in loaded.views_] == [v.members for v in combiner.views_]
    first = _in_language(clustered_messages(20, 6, seed=1, noise=noise), "de")
    second = _in_language(clustered_messages(20, 6, seed=1, noise=noise), "de")
    combiner.process(first)
    loaded.process(second)
    assert [m.intent_ranking for m in first] == [m.intent_ranking for m in second]
    # a combiner.json from before the views: every message takes the full combination
    import json

    state = json.loads((tmp_path / STATE_FILE).read_text())
    for key in ("member_languages", "own_languages", "views"):
        del state[key]
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    old = IntentCombiner.load(tmp_path, combiner.config)
    assert old.views_ == [] and old.member_languages_ == {}
    plain = clustered_messages(20, 6, seed=1, noise=noise)
    german = _in_language(clustered_messages(20, 6, seed=1, noise=noise), "de")
    old.process(plain)
    old.process(german)
    assert [m.intent_ranking for m in plain] == [m.intent_ranking for m in german]
