from collections import Counter

import pytest

from nlu_engine.contract.message import Message
from nlu_engine.training_data import TrainingData
from nlu_engine.training_data.split import stratified_folds, train_test_split


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
