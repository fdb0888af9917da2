"""GazetteerFeaturizer: values of every source, begin/inside columns, leave-one-out on the
training examples, touching and overlapping values, big lookup tables, storage."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.sparse.gazetteer import GazetteerFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer


def tokenized(text: str, entities: list[dict] | None = None) -> Message:
    message = Message(text, intent="x", entities=entities or [])
    WhitespaceTokenizer().process([message])
    return message


def entity(text: str, value: str, kind: str) -> dict:
    start = text.index(value)
    return {"start": start, "end": start + len(value), "value": value, "entity": kind}


def sequence_of(message: Message) -> np.ndarray:
    features = message.features_for("text", "sequence", sparse=True)
    assert features is not None
    return features.toarray()


def trained(messages: list[Message], entity_values: bool = True, **data) -> GazetteerFeaturizer:
    featurizer = GazetteerFeaturizer(entity_values=entity_values)
    featurizer.train(TrainingData(messages=messages, **data))
    return featurizer


def test_begin_and_inside_columns_per_type_from_every_source() -> None:
    text = "fly to new york from rome"
    examples = [tokenized(text, [entity(text, "new york", "city")])]
    featurizer = trained(examples, lookup_tables=[{"name": "city", "elements": ["Rome"]}],
                         synonyms={"big apple": "new york"})
    assert featurizer.types_ == ["city"]
    message = tokenized("from rome to the big apple")
    featurizer.process([message])
    # columns: city-begin, city-inside; tokens: from rome to the big apple
    assert sequence_of(message).tolist() == [[0, 0], [1, 0], [0, 0], [0, 0], [1, 0], [0, 1]]
    sentence = message.features_for("text", "sentence", sparse=True)
    assert sentence is not None and sentence.toarray().tolist() == [[1, 1]]


def test_a_value_only_its_own_example_annotated_does_not_fire_on_it() -> None:
    first, second = "book paris", "book berlin"
    examples = [tokenized(first, [entity(first, "paris", "city")]),
                tokenized(second, [entity(second, "berlin", "city")]),
                tokenized("go to berlin", [entity("go to berlin", "berlin", "city")])]
    featurizer = trained(examples)
    featurizer.process_training_data(examples)
    assert sequence_of(examples[0])[:, 0].tolist() == [0, 0]  # paris: only here
    assert sequence_of(examples[1])[:, 0].tolist() == [0, 1]  # berlin: annotated twice
    parsed = tokenized("book paris")
    featurizer.process([parsed])
    assert sequence_of(parsed)[:, 0].tolist() == [0, 1]  # at parse every known value fires


def test_touching_and_overlapping_values_are_all_marked() -> None:
    message = Message("10am new york city", intent="x")
    WhitespaceTokenizer().process([message])
    # "10" and "am" as two touching tokens, as a tokenizer splitting digits would give
    tokens = message.tokens["text"]
    from nlu_engine.contract.message import Token
    message.tokens["text"] = [Token("10", 0, 2), Token("am", 2, 4), *tokens[1:]]
    featurizer = trained([], lookup_tables=[
        {"name": "time", "elements": ["10", "10am", "10am", "am"]},
        {"name": "city", "elements": ["new york", "york city", "new york city", "New  York"]},
    ])
    assert featurizer.types_ == ["city", "time"]
    featurizer.process([message])
    matrix = sequence_of(message)
    # city-begin, city-inside, time-begin, time-inside
    assert matrix.tolist() == [[0, 0, 1, 0], [0, 0, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0]]
    assert sorted(featurizer.matches(message.text, message.tokens["text"])) == [
        (0, 0, "time"), (0, 1, "time"), (1, 1, "time"), (2, 3, "city"), (2, 4, "city"), (3, 4, "city")]


def test_a_lookup_table_of_100000_values_stays_cheap() -> None:
    elements = [f"town {i}" for i in range(100_000)] + ["town 7"] * 10  # duplicates too
    featurizer = trained([], lookup_tables=[{"name": "city", "elements": elements}])
    assert len(featurizer._known) == 100_000
    message = tokenized("from town 99999 to town 12 please")
    featurizer.process([message])
    assert sequence_of(message)[:, 0].tolist() == [0, 1, 0, 0, 1, 0, 0]


def test_no_values_no_features_and_storage_round_trip(tmp_path: Path) -> None:
    empty = trained([tokenized("hello there")])
    message = tokenized("hello")
    empty.process([message])
    assert message.features == []
    text = "to new york"
    featurizer = trained([tokenized(text, [entity(text, "new york", "city")])],
                         lookup_tables=[{"name": "airline", "elements": ["klm"]}])
    featurizer.persist(tmp_path)
    loaded = GazetteerFeaturizer.load(tmp_path, featurizer.config)
    assert loaded.types_ == featurizer.types_ == ["airline", "city"]
    before, after = tokenized("klm to new york"), tokenized("klm to new york")
    featurizer.process([before])
    loaded.process([after])
    assert (sequence_of(before) == sequence_of(after)).all()


def test_by_default_only_listed_values_are_read() -> None:
    text = "to rome"
    examples = [tokenized(text, [entity(text, "rome", "city")])]
    default = GazetteerFeaturizer()
    default.train(TrainingData(messages=examples))
    assert default.types_ == []  # annotated values alone: no features, as without it
    default.train(TrainingData(messages=examples, lookup_tables=[{"name": "city", "elements": ["oslo"]}]))
    message = tokenized("rome or oslo")
    default.process([message])
    assert sequence_of(message).tolist() == [[0, 0], [0, 0], [1, 0]]


def test_processing_twice_replaces_its_features() -> None:
    text = "to rome"
    featurizer = trained([tokenized(text, [entity(text, "rome", "city")])])
    message = tokenized("to rome")
    featurizer.process([message])
    featurizer.process([message])
    assert len(message.features) == 2  # one sequence, one sentence
