from collections import Counter

import numpy as np
import pytest

from nlu_engine.contract.message import Message
from nlu_engine.training_data import TrainingData
from nlu_engine.training_data.split import (
    round_robin,
    stratified_folds,
    stratified_holdout,
    train_test_split,
)


def make_data(sizes: dict[str, int]) -> TrainingData:
    messages = [
        Message(text=f"{intent} {i}", intent=intent, intent_response_key=
                intent if "/" in intent else None)
        for intent, n in sizes.items()
        for i in range(n)
    ]
    return TrainingData(
        messages=messages,
        synonyms={"a": "b"},
        regex_features=[{"name": "r", "pattern": "x"}],
        lookup_tables=[{"name": "l", "elements": ["e"]}],
        responses={"utter_faq/q": [{"text": "t"}]},
    )


SIZES = {"greet": 10, "bye": 5, "faq/q": 4, "pair": 2, "single": 1}


def test_split_is_stratified():
    train, test = train_test_split(make_data(SIZES), training_fraction=0.8, seed=1)
    assert train.intent_counts() == {"greet": 8, "bye": 4, "faq/q": 3, "pair": 1, "single": 1}
    assert test.intent_counts() == {"greet": 2, "bye": 1, "faq/q": 1, "pair": 1}


def test_split_partitions_and_keeps_order():
    data = make_data(SIZES)
    train, test = train_test_split(data, seed=3)
    texts = [m.text for m in data.messages]
    assert sorted(m.text for m in train.messages + test.messages) == sorted(texts)
    assert not {m.text for m in train.messages} & {m.text for m in test.messages}
    positions = [texts.index(m.text) for m in train.messages]
    assert positions == sorted(positions)


def test_split_is_seeded():
    data = make_data(SIZES)
    first = [m.text for m in train_test_split(data, seed=7)[1].messages]
    again = [m.text for m in train_test_split(data, seed=7)[1].messages]
    other = [m.text for m in train_test_split(data, seed=8)[1].messages]
    assert first == again
    assert first != other


def test_split_of_an_intent_does_not_depend_on_other_intents():
    small = train_test_split(make_data({"greet": 10}), seed=5)[1]
    big = train_test_split(make_data({"greet": 10, "zzz": 30, "aaa": 7}), seed=5)[1]
    assert [m.text for m in small.messages] == [
        m.text for m in big.messages if m.intent == "greet"
    ]


def test_split_keeps_sections_on_both_sides():
    train, test = train_test_split(make_data(SIZES))
    for part in (train, test):
        assert part.synonyms == {"a": "b"}
        assert part.regex_features == [{"name": "r", "pattern": "x"}]
        assert part.lookup_tables == [{"name": "l", "elements": ["e"]}]
        assert part.responses == {"utter_faq/q": [{"text": "t"}]}


def test_bad_fraction():
    with pytest.raises(ValueError, match="training_fraction"):
        train_test_split(make_data(SIZES), training_fraction=1.0)


def test_folds_cover_every_example_once():
    data = make_data(SIZES)
    folds = stratified_folds(data, n_folds=5, seed=0)
    assert len(folds) == 5
    tested = Counter(m.text for _, test in folds for m in test.messages)
    assert tested == Counter(m.text for m in data.messages if m.intent != "single")
    for train, test in folds:
        assert len(train.messages) + len(test.messages) == len(data.messages)
        assert "single 0" in {m.text for m in train.messages}
        assert not {m.text for m in train.messages} & {m.text for m in test.messages}
        assert test.intent_counts()["greet"] == 2  # spread evenly
        assert train.synonyms == {"a": "b"}


def test_folds_are_balanced_and_seeded():
    data = make_data({"a": 7, "b": 7, "c": 7})
    sizes = [len(test.messages) for _, test in stratified_folds(data, 3, seed=1)]
    assert max(sizes) - min(sizes) <= 1
    runs = [
        [[m.text for m in test.messages] for _, test in stratified_folds(data, 3, seed=s)]
        for s in (1, 1, 2)
    ]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_folds_need_enough_examples():
    with pytest.raises(ValueError, match="n_folds"):
        stratified_folds(make_data(SIZES), n_folds=1)
    with pytest.raises(ValueError, match="need at least"):
        stratified_folds(make_data({"a": 2, "b": 1}), n_folds=3)


def test_the_split_holds_out_a_share_of_each_intent_and_keeps_small_ones_whole() -> None:
    labels = ["a"] * 30 + ["b"] * 10 + ["c"] * 9 + ["d"] + [None] * 3
    train, held = stratified_holdout(labels, 0.1, 1)
    held_labels = [labels[i] for i in held]
    assert held_labels.count("a") == 3 and held_labels.count("b") == 1
    assert "c" not in held_labels and "d" not in held_labels and None not in held_labels
    assert sorted([*train, *held]) == list(range(len(labels)))
    again = stratified_holdout(labels, 0.1, 1)
    assert np.array_equal(again[1], held)  # seeded


def test_large_data_holds_out_a_smaller_share() -> None:
    labels = ["a"] * 6000 + ["b"] * 4000
    _, held = stratified_holdout(labels, 0.1, 1, max_held=500)
    assert len(held) == 500 and sum(labels[i] == "a" for i in held) == 300


def test_a_keyed_split_holds_out_the_same_examples_when_other_intents_are_added() -> None:
    labels = ["a"] * 40 + ["b"] * 30
    keys = np.arange(1000, 1070, dtype=np.uint64)
    _, held = stratified_holdout(labels, 0.1, 3, keys=keys)
    grown = ["0_new"] * 25 + labels  # a new intent, sorted first, and every old index moved
    grown_keys = np.concatenate([np.arange(5000, 5025, dtype=np.uint64), keys])
    _, grown_held = stratified_holdout(grown, 0.1, 3, keys=grown_keys)
    old_held = sorted(int(keys[i]) for i in held)
    assert sorted(int(grown_keys[i]) for i in grown_held if grown[i] != "0_new") == old_held
    assert sum(grown[i] == "0_new" for i in grown_held) == 2
    _, other_seed = stratified_holdout(labels, 0.1, 4, keys=keys)
    assert not np.array_equal(other_seed, held)  # the seed still decides the order


def test_examples_a_stored_model_trained_on_are_never_held_out() -> None:
    labels = ["a"] * 29
    keys = np.arange(29, dtype=np.uint64)
    train, held = stratified_holdout(labels, 0.1, 5, keys=keys)
    assert len(held) == 2
    # one more example: the share now holds out 3, but the stored model trained on all but 2
    grown = [*labels, "a"]
    grown_keys = np.append(keys, np.uint64(99))
    trained = np.isin(grown_keys, keys[train])
    _, grown_held = stratified_holdout(grown, 0.1, 5, keys=grown_keys, trained=trained)
    assert not trained[grown_held].any()
    assert set(grown_keys[grown_held].tolist()) <= {*keys[held].tolist(), 99}
    with pytest.raises(ValueError, match="30 labels, but 29 keys"):
        stratified_holdout(grown, 0.1, 5, keys=keys)


def test_both_sides_rounds_and_keeps_one_example_each_side() -> None:
    """A test split (and DIET's evaluation examples): round(n * (1 - share)) kept, but every
    label with two or more examples on both sides; a calibration share rounds down instead."""
    labels = ["a"] * 2 + ["b"] * 4 + ["c"] * 10 + ["d"] + ["e"] * 7
    _, held = stratified_holdout(labels, 0.2, 3, both_sides=True)
    assert Counter(labels[i] for i in held) == {"a": 1, "b": 1, "c": 2, "e": 1}
    _, floor = stratified_holdout(labels, 0.2, 3)
    assert Counter(labels[i] for i in floor) == {"c": 2, "e": 1}
    _, most = stratified_holdout(labels, 0.9, 3, both_sides=True)
    assert Counter(labels[i] for i in most) == {"a": 1, "b": 3, "c": 9, "e": 6}


# --- the one fold splitter ------------------------------------------------------------------
def test_round_robin_spreads_each_group_over_consecutive_folds() -> None:
    folds = round_robin([[4, 0, 2], [1, 5]], 2, 7)
    assert folds.tolist() == [1, 1, 0, -1, 0, 0, -1]  # 4 0 2 -> 0 1 0; 1 5 -> 1 0; 3 and 6 in none
