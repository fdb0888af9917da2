"""RegexFeaturizer: overlap semantics, lookup tables, case, token.data["pattern"], errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse

from nlu_engine.contract.errors import DataError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.sparse.regex import RegexFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from nlu_engine.training_data.patterns import lookup_table_regex

PATTERNS = [
    {"name": "number", "pattern": "[0-9]+"},
    {"name": "hello", "pattern": "\\bhey*"},
    {"name": "binary", "pattern": "[0-1]+"},
]
LOOKUPS = [
    {"name": "drinks", "elements": ["mojito", "lemonade", "sweet berry wine", "tea", "club?mate"]},
    {"name": "plates", "elements": ["pizza", "burrito"]},
]


def tokenized(text: str) -> Message:
    message = Message(text)
    WhitespaceTokenizer().process([message])
    return message


def featurize(text: str, **kwargs: Any) -> tuple[np.ndarray, np.ndarray, Message]:
    regexes = kwargs.pop("regexes", PATTERNS)
    lookups = kwargs.pop("lookups", [])
    featurizer = RegexFeaturizer(**kwargs)
    featurizer.train(TrainingData(regex_features=regexes, lookup_tables=lookups))
    message = tokenized(text)
    featurizer.process([message])
    sequence = message.features_for("text", "sequence", sparse=True)
    sentence = message.features_for("text", "sentence", sparse=True)
    assert sequence is not None and sentence is not None
    return sequence.toarray(), sentence.toarray(), message


@pytest.mark.parametrize(
    "text, sequence, sentence",
    [
        ("hey how are you today", [[0, 1, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
         [[0, 1, 0]]),
        ("hey 456 how are you", [[0, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
         [[1, 1, 0]]),
        ("blah balh random eh", [[0, 0, 0]] * 4, [[0, 0, 0]]),
        ("a 1 digit number", [[0, 0, 0], [1, 0, 1], [0, 0, 0], [0, 0, 0]], [[1, 0, 1]]),
        # a match inside a token marks the token ("heyyy" starts with "hey")
        ("heyyy there", [[0, 1, 0], [0, 0, 0]], [[0, 1, 0]]),
        # a match only in removed punctuation overlaps no token
        ("call me!! 4", [[0, 0, 0], [0, 0, 0], [1, 0, 0]], [[1, 0, 0]]),
    ],
)
def test_regex_features(
    text: str, sequence: list[list[int]], sentence: list[list[int]]
) -> None:
    seq, sen, _ = featurize(text)
    assert seq.tolist() == sequence
    assert sen.tolist() == sentence


def test_match_outside_tokens_does_not_count() -> None:
    seq, sen, _ = featurize("what?! now", regexes=[{"name": "bang", "pattern": "!"}])
    assert seq.tolist() == [[0], [0]]
    assert sen.tolist() == [[0]]


def test_token_pattern_flags() -> None:
    _, _, message = featurize("hey 456 how")
    assert [t.data["pattern"] for t in message.tokens["text"]] == [
        {"number": False, "hello": True, "binary": False},
        {"number": True, "hello": False, "binary": False},
        {"number": False, "hello": False, "binary": False},
    ]


def test_same_name_patterns_are_or_ed() -> None:
    regexes = [{"name": "x", "pattern": "abc"}, {"name": "x", "pattern": "def"}]
    seq, _, message = featurize("abc def", regexes=regexes)
    assert seq.tolist() == [[1, 0], [0, 1]]
    assert [t.data["pattern"] for t in message.tokens["text"]] == [{"x": True}, {"x": True}]


@pytest.mark.parametrize(
    "text, boundaries, sequence",
    [
        ("I want to order some mojitos", True, [[0, 0]] * 6),
        ("I want to order some mojitos", False, [[0, 0]] * 5 + [[1, 0]]),
        ("sweet berry wine and a pizza", True, [[1, 0]] * 3 + [[0, 0]] * 2 + [[0, 1]]),
        ("club?mate please", True, [[1, 0], [0, 0]]),
        ("clubXmate please", True, [[0, 0], [0, 0]]),  # elements are escaped
        ("tea", True, [[1, 0]]),
    ],
)
def test_lookup_tables(text: str, boundaries: bool, sequence: list[list[int]]) -> None:
    seq, _, _ = featurize(text, regexes=[], lookups=LOOKUPS, use_word_boundaries=boundaries)
    assert seq.tolist() == sequence


def test_lookup_table_regex() -> None:
    assert lookup_table_regex(["a.b", "c"]) == r"(\ba\.b\b|\bc\b)"
    assert lookup_table_regex(["a.b", "c"], use_word_boundaries=False) == r"(a\.b|c)"


def test_use_regexes_and_lookup_tables_switches() -> None:
    featurizer = RegexFeaturizer(use_regexes=False)
    featurizer.train(TrainingData(regex_features=PATTERNS, lookup_tables=LOOKUPS))
    assert [p["name"] for p in featurizer.patterns_] == ["drinks", "plates"]
    featurizer = RegexFeaturizer(use_lookup_tables=False)
    featurizer.train(TrainingData(regex_features=PATTERNS, lookup_tables=LOOKUPS))
    assert [p["name"] for p in featurizer.patterns_] == ["number", "hello", "binary"]


def test_case_sensitivity() -> None:
    regexes = [{"name": "greet", "pattern": "hello"}]
    seq, _, _ = featurize("Hello HELLO hello", regexes=regexes)
    assert seq.ravel().tolist() == [0, 0, 1]
    seq, _, _ = featurize("Hello HELLO hello", regexes=regexes, case_sensitive=False)
    assert seq.ravel().tolist() == [1, 1, 1]


def test_feature_types() -> None:
    featurizer = RegexFeaturizer(alias="rx")
    featurizer.train(TrainingData(regex_features=PATTERNS))
    message = tokenized("hey 10")
    featurizer.process([message])
    assert [(f.kind, f.attribute, f.origin) for f in message.features] == [
        ("sequence", "text", "rx"),
        ("sentence", "text", "rx"),
    ]
    for f in message.features:
        assert isinstance(f.matrix, scipy.sparse.csr_matrix)
        assert f.matrix.dtype == np.float32
    assert message.features[0].matrix.shape == (2, 3)
    assert message.features[1].matrix.shape == (1, 3)


def test_no_patterns_gives_no_features(tmp_path: Path) -> None:
    featurizer = RegexFeaturizer()
    featurizer.train(TrainingData(messages=[tokenized("hello")]))
    message = tokenized("hello there")
    featurizer.process([message])
    assert message.features == []
    assert "pattern" not in message.tokens["text"][0].data
    featurizer.persist(tmp_path)
    loaded = RegexFeaturizer.load(tmp_path, featurizer.config)
    loaded.process([message])
    assert message.features == []


def test_invalid_regex_is_a_data_error() -> None:
    featurizer = RegexFeaturizer()
    with pytest.raises(DataError, match=r"regex 'broken'.*'\[0-9'"):
        featurizer.train(TrainingData(regex_features=[{"name": "broken", "pattern": "[0-9"}]))


def test_persist_and_load_give_identical_features(tmp_path: Path) -> None:
    featurizer = RegexFeaturizer(case_sensitive=False)
    featurizer.train(TrainingData(regex_features=PATTERNS, lookup_tables=LOOKUPS))
    featurizer.persist(tmp_path)
    assert (tmp_path / "patterns.json").exists()
    loaded = RegexFeaturizer.load(tmp_path, featurizer.config)
    assert loaded.patterns_ == featurizer.patterns_
    a, b = tokenized("HEY 101 Mojito and pizza"), tokenized("HEY 101 Mojito and pizza")
    featurizer.process([a])
    loaded.process([b])
    for fa, fb in zip(a.features, b.features, strict=True):
        np.testing.assert_array_equal(fa.matrix.toarray(), fb.matrix.toarray())
    assert [t.data for t in a.tokens["text"]] == [t.data for t in b.tokens["text"]]


def test_finetune_keeps_stored_patterns_in_their_columns_and_appends_new_ones() -> None:
    from nlu_engine.contract.component import FinetuneOptions

    previous = RegexFeaturizer()
    previous.train(TrainingData(regex_features=PATTERNS))
    featurizer = RegexFeaturizer()
    added = {"name": "zip", "pattern": "[0-9]{5}"}
    featurizer.finetune(TrainingData(regex_features=[PATTERNS[2], added]), previous, FinetuneOptions())
    assert featurizer.patterns_ == [*PATTERNS, added]  # "number" and "hello" left the data: kept
    message = tokenized("hey 10115")
    featurizer.process([message])
    sequence = message.features[0].matrix.toarray()
    assert sequence.tolist() == [[0, 1, 0, 0], [1, 0, 1, 1]]
