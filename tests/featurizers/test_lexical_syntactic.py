"""LexicalSyntacticFeaturizer: window features, Rasa's column numbering, errors, persistence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.sparse.lexical_syntactic import LexicalSyntacticFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer


def tokenized(*texts: str) -> list[Message]:
    messages = [Message(text) for text in texts]
    WhitespaceTokenizer().process(messages)
    return messages


def columns(message: Message) -> list[list[int]]:
    [features] = message.features
    return [sorted(np.flatnonzero(row).tolist()) for row in features.matrix.toarray()]


def test_hand_computed_features() -> None:
    featurizer = LexicalSyntacticFeaturizer(
        features=[["BOS", "upper"], ["BOS", "EOS", "prefix2", "digit"], ["EOS", "low"]]
    )
    featurizer.train(TrainingData(messages=tokenized("hello goodbye hello")))
    # keys sorted by (window position, name), values sorted as strings, contiguous offsets
    assert featurizer.feature_to_idx_ == {
        (0, "BOS"): {"False": 0, "True": 1},
        (0, "upper"): {"False": 2},
        (1, "BOS"): {"False": 3, "True": 4},
        (1, "EOS"): {"False": 5, "True": 6},
        (1, "digit"): {"False": 7},
        (1, "prefix2"): {"go": 8, "he": 9},
        (2, "EOS"): {"False": 10, "True": 11},
        (2, "low"): {"True": 12},
    }
    [message] = tokenized("hello goodbye hello")
    featurizer.process([message])
    assert columns(message) == [
        [4, 5, 7, 9, 10, 12],
        [1, 2, 3, 5, 7, 8, 11, 12],
        [0, 2, 3, 6, 7, 9],
    ]


def test_output_is_sequence_only_float32_csr() -> None:
    featurizer = LexicalSyntacticFeaturizer(alias="lex")
    messages = tokenized("Book a Table in PARIS for 2", "hi")
    featurizer.train(TrainingData(messages=messages))
    featurizer.process(messages)
    [features] = messages[0].features
    assert (features.kind, features.attribute, features.origin) == ("sequence", "text", "lex")
    assert isinstance(features.matrix, scipy.sparse.csr_matrix)
    assert features.matrix.dtype == np.float32
    assert features.matrix.shape == (7, featurizer.n_features_)
    # default config: 3 before + 6 current + 3 after features, fewer at the edges
    assert np.asarray(features.matrix.sum(axis=1)).ravel().tolist() == [9, 12, 12, 12, 12, 12, 9]


def test_default_features_describe_word_shape() -> None:
    featurizer = LexicalSyntacticFeaturizer()
    featurizer.train(TrainingData(messages=tokenized("Book a Table in PARIS for 2")))
    index = featurizer.feature_to_idx_
    [message] = tokenized("PARIS 2")
    featurizer.process([message])
    row_paris, row_two = message.features[0].matrix.toarray()
    assert row_paris[index[(1, "upper")]["True"]] == 1
    assert row_paris[index[(1, "BOS")]["True"]] == 1
    assert row_two[index[(1, "digit")]["True"]] == 1
    assert row_two[index[(1, "EOS")]["True"]] == 1
    assert row_two[index[(0, "upper")]["True"]] == 1  # the token before is upper case


def test_even_window_looks_one_more_token_back() -> None:
    featurizer = LexicalSyntacticFeaturizer(features=[["upper"], ["digit"], ["low"], ["digit"]])
    featurizer.train(TrainingData(messages=tokenized("HELLO 123 hello 123 hello")))
    # positions 0..3 are offsets -2, -1, 0, +1
    assert sorted(featurizer.feature_to_idx_) == [(0, "upper"), (1, "digit"), (2, "low"), (3, "digit")]
    [message] = tokenized("HELLO 123 hello")
    featurizer.process([message])
    index = featurizer.feature_to_idx_
    row = message.features[0].matrix.toarray()[2]  # "hello"
    assert row[index[(0, "upper")]["True"]] == 1  # two back: HELLO
    assert row[index[(1, "digit")]["True"]] == 1  # one back: 123
    assert row[index[(2, "low")]["True"]] == 1
    assert row.sum() == 3  # nothing after the last token


def test_unseen_values_are_ignored() -> None:
    featurizer = LexicalSyntacticFeaturizer(features=[["suffix3", "title"]])
    featurizer.train(TrainingData(messages=tokenized("running fast")))
    [message] = tokenized("Jumping quickly")
    featurizer.process([message])
    index = featurizer.feature_to_idx_
    assert featurizer.n_features_ == 3  # ing, ast, title=False
    assert columns(message) == [[index[(0, "suffix3")]["ing"]], [index[(0, "title")]["False"]]]


def test_pos_features_from_token_data() -> None:
    messages = tokenized("The sun is shining")
    for token, pos in zip(messages[0].tokens["text"], ["DET", "NOUN", "AUX", "VERB"], strict=True):
        token.data["pos"] = pos
    featurizer = LexicalSyntacticFeaturizer(features=[["pos", "pos2"]])
    featurizer.train(TrainingData(messages=messages))
    assert featurizer.feature_to_idx_ == {
        (0, "pos"): {"AUX": 0, "DET": 1, "NOUN": 2, "VERB": 3},
        (0, "pos2"): {"AU": 4, "DE": 5, "NO": 6, "VE": 7},
    }
    featurizer.process(messages)
    assert columns(messages[0]) == [[1, 5], [2, 6], [0, 4], [3, 7]]


@pytest.mark.parametrize("features", [[["low", "lowercase"]], [["BOS"], ["prefix3"]]])
def test_unknown_feature_is_a_config_error(features: list[list[str]]) -> None:
    with pytest.raises(ConfigError, match=r"unknown feature '\w+'.*allowed: BOS, EOS, digit"):
        LexicalSyntacticFeaturizer(features=features)


def test_malformed_features_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="'features' must be a list of a list of a string"):
        LexicalSyntacticFeaturizer(features=["low", "upper"])  # type: ignore[list-item]


def test_persist_and_load_give_identical_features(tmp_path: Path) -> None:
    featurizer = LexicalSyntacticFeaturizer(
        features=[["low", "suffix2"], ["BOS", "EOS", "prefix5", "title"], ["upper", "digit"]]
    )
    featurizer.train(TrainingData(messages=tokenized("Book a table", "I want 2 TACOS now")))
    featurizer.persist(tmp_path)
    assert (tmp_path / "feature_to_idx.json").exists()
    loaded = LexicalSyntacticFeaturizer.load(tmp_path, featurizer.config)
    assert loaded.feature_to_idx_ == featurizer.feature_to_idx_
    assert loaded.n_features_ == featurizer.n_features_
    a, b = tokenized("Book 2 TACOS please"), tokenized("Book 2 TACOS please")
    featurizer.process(a)
    loaded.process(b)
    np.testing.assert_array_equal(
        a[0].features[0].matrix.toarray(), b[0].features[0].matrix.toarray()
    )


def test_finetune_appends_new_values_after_the_stored_columns() -> None:
    from nlu_engine.contract.component import FinetuneOptions

    features = [["low"], ["prefix2", "digit"]]
    previous = LexicalSyntacticFeaturizer(features=features)
    previous.train(TrainingData(messages=tokenized("hello there")))
    featurizer = LexicalSyntacticFeaturizer(features=features)
    featurizer.finetune(TrainingData(messages=tokenized("hello 42")), previous, FinetuneOptions())
    stored = previous.feature_to_idx_
    grown = featurizer.feature_to_idx_
    for key, values in stored.items():
        assert {v: grown[key][v] for v in values} == values
    added = sorted((column, key, value) for key, values in grown.items()
                   for value, column in values.items() if value not in stored.get(key, {}))
    # "42" (the token itself is window position 1): a digit, a new prefix; numbered after the
    # stored columns, by key
    assert [(key, value) for _, key, value in added] == [((1, "digit"), "True"), ((1, "prefix2"), "42")]
    assert [column for column, _, _ in added] == [previous.n_features_, previous.n_features_ + 1]
    assert featurizer.n_features_ == previous.n_features_ + 2
