"""CountVectorsFeaturizer: sklearn-identical n-gram counts, labels, OOV, pruning, persistence."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse
from sklearn.feature_extraction.text import CountVectorizer

from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.sparse.count_vectors import CountVectorsFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from tests.extras import requires_extra

TEXTS = [
    ("I want 2 Tacos, now!", "order_food"),
    ("book a table for 10 at Café Rouge", "book_table"),
    ("don't book it, thanks", "deny"),
    ("Café table tacos tacos tacos", "order_food"),
    ("the table is the best table", "chitchat"),
    ("x", "chitchat"),
    ("10,000 tacos at abc123", "order_food"),
]


def make_messages(texts: list[tuple[str, str | None]] = TEXTS) -> list[Message]:
    messages = [Message(text, intent=intent) for text, intent in texts]
    WhitespaceTokenizer().process(messages)
    return messages


def processed(message: Message, lowercase: bool = True) -> list[str]:
    """Rasa's preprocessing of a message's tokens (number replacement, lowercase)."""
    tokens = [re.sub(r"\b[0-9]+\b", "__NUMBER__", t.text) for t in message.tokens["text"]]
    return [t.lower() for t in tokens] if lowercase else tokens


def featurize(featurizer: CountVectorsFeaturizer, messages: list[Message]) -> None:
    for message in messages:
        message.features.clear()
    featurizer.process(messages)


def matrix(message: Message, kind: str, attribute: str = "text") -> np.ndarray:
    found = message.features_for(attribute, kind, sparse=True)  # type: ignore[arg-type]
    assert found is not None
    return found.toarray()


def assert_matches_sklearn(config: dict[str, Any], sklearn_config: dict[str, Any]) -> None:
    messages = make_messages()
    featurizer = CountVectorsFeaturizer(**config)
    featurizer.train(TrainingData(messages=messages))
    featurize(featurizer, messages)

    lowercase = config.get("lowercase", True)
    docs = [" ".join(processed(m, lowercase)) for m in messages]
    reference = CountVectorizer(
        token_pattern=r"(?u)\b\w+\b", lowercase=lowercase, **sklearn_config
    ).fit(docs)
    assert featurizer.vocabularies_["text"] == reference.vocabulary_
    for message in messages:
        tokens = processed(message, lowercase)
        np.testing.assert_array_equal(
            matrix(message, "sequence"), reference.transform(tokens).toarray()
        )
        np.testing.assert_array_equal(
            matrix(message, "sentence"), reference.transform([" ".join(tokens)]).toarray()
        )


@pytest.mark.filterwarnings("ignore:The parameter 'token_pattern' will not be used")
@pytest.mark.parametrize(
    "analyzer, ngrams",
    [
        ("word", (1, 1)),
        ("word", (1, 2)),
        ("word", (2, 3)),
        ("char_wb", (1, 5)),
        ("char_wb", (3, 4)),
        ("char", (1, 4)),
        ("char", (2, 3)),
    ],
)
def test_counts_match_sklearn(analyzer: str, ngrams: tuple[int, int]) -> None:
    assert_matches_sklearn(
        {"analyzer": analyzer, "min_ngram": ngrams[0], "max_ngram": ngrams[1]},
        {"analyzer": analyzer, "ngram_range": ngrams},
    )


@pytest.mark.parametrize(
    "config",
    [
        {"min_df": 2},
        {"min_df": 0.3},
        {"max_df": 0.4},
        {"max_df": 2},
        {"max_features": 5},
        {"min_df": 2, "max_features": 3},
        {"stop_words": "english"},
        {"stop_words": ["the", "a"]},
        {"strip_accents": "ascii"},
        {"strip_accents": "unicode"},
        {"lowercase": False},
    ],
)
def test_options_match_sklearn(config: dict[str, Any]) -> None:
    sklearn_config = {k: v for k, v in config.items() if k != "lowercase"}
    assert_matches_sklearn(config, sklearn_config)


def test_hand_counted_example() -> None:
    messages = make_messages([("the table is the best table 2", "chitchat")])
    featurizer = CountVectorsFeaturizer()
    featurizer.train(TrainingData(messages=messages))
    featurize(featurizer, messages)
    vocabulary = featurizer.vocabularies_["text"]
    assert list(vocabulary) == ["__number__", "best", "is", "table", "the"]
    sentence = matrix(messages[0], "sentence")[0]
    assert sentence.tolist() == [1, 1, 1, 2, 2]
    sequence = matrix(messages[0], "sequence")
    assert sequence.shape == (7, 5)
    assert sequence.argmax(axis=1).tolist() == [4, 3, 2, 4, 1, 3, 0]


def test_feature_types_and_shapes() -> None:
    messages = make_messages()
    featurizer = CountVectorsFeaturizer(analyzer="char_wb", min_ngram=1, max_ngram=4, alias="cv")
    featurizer.train(TrainingData(messages=messages))
    featurize(featurizer, messages)
    features = messages[0].features
    assert {(f.kind, f.attribute) for f in features} == {("sequence", "text"), ("sentence", "text")}
    for f in features:
        assert isinstance(f.matrix, scipy.sparse.csr_matrix)
        assert f.matrix.dtype == np.float32
        assert f.matrix.has_sorted_indices
        assert f.origin == "cv"
    assert features[0].matrix.shape[0] == len(messages[0].tokens["text"])


def test_number_replacement() -> None:
    messages = make_messages([("2 tacos at 10,000 or 3pm abc123", "x")])
    featurizer = CountVectorsFeaturizer()
    featurizer.train(TrainingData(messages=messages))
    vocabulary = featurizer.vocabularies_["text"]
    assert "__number__" in vocabulary and "2" not in vocabulary
    assert {"3pm", "abc123"} <= set(vocabulary)
    featurize(featurizer, messages)
    # "10,000" -> "__NUMBER__,__NUMBER__": two counts in one token
    assert matrix(messages[0], "sequence")[3, vocabulary["__number__"]] == 2
    assert matrix(messages[0], "sentence")[0, vocabulary["__number__"]] == 3


def test_intent_label_features() -> None:
    messages = make_messages([("hi there", "Greet"), ("bye", "goodbye"), ("hello", "Greet")])
    featurizer = CountVectorsFeaturizer()
    featurizer.train(TrainingData(messages=messages))
    # intent names are kept whole and as written, in their own vocabulary
    assert featurizer.vocabularies_["intent"] == {"Greet": 0, "goodbye": 1}
    assert "greet" not in featurizer.vocabularies_["text"]
    featurize(featurizer, messages)
    intent_features = [f for f in messages[1].features if f.attribute == "intent"]
    assert [f.kind for f in intent_features] == ["sequence"]
    assert intent_features[0].matrix.toarray().tolist() == [[0, 1]]


def test_split_intent_label_features() -> None:
    messages = [Message("hi", intent="mood_great"), Message("hey", intent="mood_unhappy")]
    WhitespaceTokenizer(intent_tokenization_flag=True).process(messages)
    featurizer = CountVectorsFeaturizer()
    featurizer.train(TrainingData(messages=messages))
    assert featurizer.vocabularies_["intent"] == {"great": 0, "mood": 1, "unhappy": 2}
    featurize(featurizer, messages)
    assert matrix(messages[0], "sequence", "intent").tolist() == [[0, 1, 0], [1, 0, 0]]


def test_char_analyzer_does_not_featurize_intents() -> None:
    messages = make_messages()
    featurizer = CountVectorsFeaturizer(analyzer="char_wb", max_ngram=3)
    featurizer.train(TrainingData(messages=messages))
    assert set(featurizer.vocabularies_) == {"text"}
    featurize(featurizer, messages)
    assert {f.attribute for f in messages[0].features} == {"text"}


def test_shared_vocabulary() -> None:
    messages = make_messages([("greet me", "greet"), ("bye", "goodbye")])
    featurizer = CountVectorsFeaturizer(use_shared_vocab=True)
    featurizer.train(TrainingData(messages=messages))
    assert featurizer.vocabularies_["text"] is featurizer.vocabularies_["intent"]
    assert list(featurizer.vocabularies_["text"]) == ["bye", "goodbye", "greet", "me"]
    featurize(featurizer, messages)
    assert matrix(messages[0], "sentence").tolist() == [[0, 0, 1, 1]]
    assert matrix(messages[0], "sequence", "intent").tolist() == [[0, 0, 1, 0]]


def test_lemmas_are_used_when_present() -> None:
    messages = make_messages([("running dogs", "x")])
    for token, lemma in zip(messages[0].tokens["text"], ["run", "dog"], strict=True):
        token.lemma = lemma
    featurizer = CountVectorsFeaturizer()
    featurizer.train(TrainingData(messages=messages))
    assert list(featurizer.vocabularies_["text"]) == ["dog", "run"]
    featurizer = CountVectorsFeaturizer(use_lemma=False)
    featurizer.train(TrainingData(messages=messages))
    assert list(featurizer.vocabularies_["text"]) == ["dogs", "running"]


def test_unseen_words_give_zero_rows_without_oov() -> None:
    messages = make_messages()
    featurizer = CountVectorsFeaturizer()
    featurizer.train(TrainingData(messages=messages))
    [new] = make_messages([("tacos with guacamole", None)])
    featurize(featurizer, [new])
    sequence = matrix(new, "sequence")
    assert sequence[0].sum() == 1 and sequence[1].sum() == 0 and sequence[2].sum() == 0
    assert "intent" not in {f.attribute for f in new.features}


def test_oov_token_and_words() -> None:
    texts = [("I want tacos", "order"), ("I want pizza", "order"), ("hello", "greet")]
    messages = make_messages(texts)
    featurizer = CountVectorsFeaturizer(OOV_token="__OOV__", OOV_words=["Pizza"])
    featurizer.train(TrainingData(messages=messages))
    vocabulary = featurizer.vocabularies_["text"]
    assert "__oov__" in vocabulary and "pizza" not in vocabulary

    [new] = make_messages([("I want sushi tacos", None)])
    featurize(featurizer, [new])
    sequence = matrix(new, "sequence")
    assert sequence[2, vocabulary["__oov__"]] == 1  # unseen -> OOV
    assert sequence[3, vocabulary["tacos"]] == 1 and sequence[3].sum() == 1
    assert matrix(new, "sentence")[0, vocabulary["__oov__"]] == 1

    # the training example with an OOV word maps to the OOV token too
    featurize(featurizer, messages)
    assert matrix(messages[1], "sequence")[2, vocabulary["__oov__"]] == 1


def test_oov_token_in_word_bigrams() -> None:
    messages = make_messages([("I want pizza", "order"), ("want tacos", "order")])
    featurizer = CountVectorsFeaturizer(max_ngram=2, OOV_token="oov", OOV_words=["pizza"])
    featurizer.train(TrainingData(messages=messages))
    vocabulary = featurizer.vocabularies_["text"]
    assert "want oov" in vocabulary
    [new] = make_messages([("want burgers", None)])
    featurize(featurizer, [new])
    sentence = matrix(new, "sentence")[0]
    assert sentence[vocabulary["want oov"]] == 1 and sentence[vocabulary["oov"]] == 1


def test_missing_oov_token_warns(caplog: pytest.LogCaptureFixture) -> None:
    featurizer = CountVectorsFeaturizer(OOV_token="oov")
    with caplog.at_level(logging.WARNING):
        featurizer.train(TrainingData(messages=make_messages()))
    assert "OOV_token 'oov'" in caplog.text


def test_everything_pruned_gives_no_features(caplog: pytest.LogCaptureFixture) -> None:
    messages = make_messages()
    featurizer = CountVectorsFeaturizer(min_df=100)
    with caplog.at_level(logging.WARNING):
        featurizer.train(TrainingData(messages=messages))
    assert "no text features are left" in caplog.text
    featurize(featurizer, messages)
    assert {f.attribute for f in messages[0].features} == {"intent"}


@pytest.mark.parametrize(
    "config, message",
    [
        ({"min_ngram": 3, "max_ngram": 2}, "min_ngram"),
        ({"max_df": 1, "min_df": 2}, "max_df"),
        ({"max_df": 0.2, "min_df": 0.5}, "max_df"),
        ({"stop_words": "german"}, "stop_words 'german'"),
        ({"analyzer": "chars"}, "'analyzer' must be one of 'word', 'char', 'char_wb', got 'chars'"),
    ],
)
def test_bad_config(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^CountVectorsFeaturizer: .*{message}"):
        CountVectorsFeaturizer(**config)  # refused when built, before anything trains


def test_process_before_train_fails() -> None:
    with pytest.raises(RuntimeError, match="trained or loaded"):
        CountVectorsFeaturizer().process(make_messages())


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"analyzer": "char_wb", "min_ngram": 1, "max_ngram": 5},
        {"analyzer": "char", "max_ngram": 3},
        {"max_ngram": 2, "OOV_token": "oov", "OOV_words": ["tacos"]},
        {"use_shared_vocab": True},
    ],
)
def test_persist_and_load_give_identical_features(config: dict[str, Any], tmp_path: Path) -> None:
    messages = make_messages()
    featurizer = CountVectorsFeaturizer(**config)
    featurizer.train(TrainingData(messages=messages))
    featurizer.persist(tmp_path)
    assert (tmp_path / "vocabularies.json").exists()
    json.loads((tmp_path / "vocabularies.json").read_text(encoding="utf-8"))
    loaded = CountVectorsFeaturizer.load(tmp_path, featurizer.config)
    assert loaded.vocabularies_ == featurizer.vocabularies_

    new = make_messages([*TEXTS, ("completely unseen words here", None)])
    fresh = make_messages([*TEXTS, ("completely unseen words here", None)])
    featurize(featurizer, new)
    featurize(loaded, fresh)
    for a, b in zip(new, fresh, strict=True):
        assert len(a.features) == len(b.features)
        for fa, fb in zip(a.features, b.features, strict=True):
            assert (fa.kind, fa.attribute, fa.origin) == (fb.kind, fb.attribute, fb.origin)
            assert (fa.matrix != fb.matrix).nnz == 0
            assert fa.matrix.shape == fb.matrix.shape


def test_repeated_processing_is_stable() -> None:
    messages = make_messages()
    featurizer = CountVectorsFeaturizer(analyzer="char_wb", max_ngram=4)
    featurizer.train(TrainingData(messages=messages))
    featurize(featurizer, messages)
    first = [f.matrix.toarray() for f in messages[0].features]
    featurize(featurizer, messages)  # now served from the per-token cache
    second = [f.matrix.toarray() for f in messages[0].features]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


# --- fine-tuning: the vocabulary grows, stored columns keep their ids -----------------------------
def _grown(config: dict[str, Any], old: list[tuple[str, str | None]],
           new: list[tuple[str, str | None]]) -> tuple[CountVectorsFeaturizer, CountVectorsFeaturizer]:
    from nlu_engine.contract.component import FinetuneOptions

    previous = CountVectorsFeaturizer(**config)
    previous.train(TrainingData(messages=make_messages(old)))
    featurizer = CountVectorsFeaturizer(**config)
    featurizer.finetune(TrainingData(messages=make_messages(new)), previous, FinetuneOptions())
    return previous, featurizer


@pytest.mark.parametrize("config", [{}, {"analyzer": "char_wb", "min_ngram": 1, "max_ngram": 3},
                                    {"max_ngram": 2}, {"use_shared_vocab": True}])
def test_finetune_appends_new_ngrams_and_keeps_every_stored_id(config: dict[str, Any]) -> None:
    new_texts = [*TEXTS[2:], ("pizza with extra cheese", "order_pizza")]
    previous, featurizer = _grown(config, TEXTS, new_texts)
    for attribute, stored in previous.vocabularies_.items():
        grown = featurizer.vocabularies_[attribute]
        assert {gram: grown[gram] for gram in stored} == stored  # ids unchanged, none dropped
        added = [gram for gram in grown if gram not in stored]
        assert sorted(grown[gram] for gram in added) == list(range(len(stored), len(grown)))
    fitted = CountVectorsFeaturizer(**config)
    fitted.train(TrainingData(messages=make_messages(new_texts)))
    for attribute, vocabulary in fitted.vocabularies_.items():  # everything the data keeps is in
        assert set(vocabulary) <= set(featurizer.vocabularies_[attribute])
    if config.get("use_shared_vocab"):
        assert len({id(v) for v in featurizer.vocabularies_.values()}) == 1
    elif config.get("analyzer") != "char_wb":  # only the word analyzer featurizes intents
        assert "order_pizza" in featurizer.vocabularies_["intent"]

    # an old message's features are the stored model's, padded with zero columns
    [before], [after] = make_messages([TEXTS[0]]), make_messages([TEXTS[0]])
    featurize(previous, [before])
    featurize(featurizer, [after])
    for kind in ("sequence", "sentence"):
        old, new = matrix(before, kind), matrix(after, kind)
        assert np.array_equal(new[:, : old.shape[1]], old)
        assert not new[:, old.shape[1]:].any()


def test_finetune_respects_max_features(caplog: pytest.LogCaptureFixture) -> None:
    previous, featurizer = _grown({"max_features": 12}, TEXTS, [("pizza with extra cheese", "x")])
    assert len(previous.vocabularies_["text"]) == 12
    assert featurizer.vocabularies_["text"] == previous.vocabularies_["text"]
    assert "the vocabulary is full (max_features=12): 4 new n-grams" in caplog.text


def test_finetune_needs_a_stored_vocabulary() -> None:
    from nlu_engine.contract.component import CannotResume, FinetuneOptions

    with pytest.raises(CannotResume, match="no stored vocabulary"):
        CountVectorsFeaturizer().finetune(TrainingData(messages=make_messages()),
                                          CountVectorsFeaturizer(), FinetuneOptions())


ZH_TEXTS = [("播放周杰伦的歌", "play"), ("北京天气怎么样？", "weather"), ("打开QQ音乐 放Yesterday", "play")]


@requires_extra("zh")
@pytest.mark.parametrize("analyzer, ngrams", [("char_wb", (1, 3)), ("char", (1, 4)), ("char", (2, 2))])
def test_character_ngrams_of_unspaced_text_cross_word_boundaries(
    analyzer: str, ngrams: tuple[int, int]
) -> None:
    """With jieba's words, the sentence's character n-grams are those of the text itself: words
    touching in Chinese are not pulled apart by a space (sklearn on the raw text agrees)."""
    from nlu_engine.tokenizers.jieba import JiebaTokenizer

    messages = [Message(text, intent=intent) for text, intent in ZH_TEXTS]
    tokenizer = JiebaTokenizer()
    tokenizer.train(TrainingData(messages=[]))
    tokenizer.process(messages)
    assert len(messages[0].tokens["text"]) == 4  # 播放 周杰伦 的 歌
    featurizer = CountVectorsFeaturizer(analyzer=analyzer, min_ngram=ngrams[0], max_ngram=ngrams[1])
    featurizer.train(TrainingData(messages=messages))
    featurize(featurizer, messages)
    # the text as sklearn sees it: the tokens, a space only where the text does not join them
    docs = ["播放周杰伦的歌", "北京天气怎么样？", "打开 qq 音乐 放 yesterday"]
    reference = CountVectorizer(analyzer=analyzer, ngram_range=ngrams).fit(docs)
    assert featurizer.vocabularies_["text"] == reference.vocabulary_
    assert "伦的" in featurizer.vocabularies_["text"]
    for message, doc in zip(messages, docs, strict=True):
        np.testing.assert_array_equal(matrix(message, "sentence"), reference.transform([doc]).toarray())
        assert matrix(message, "sequence").shape[0] == len(message.tokens["text"])


def test_rasa_1_token_pattern_is_read_and_ignored_as_rasa_3_does(caplog: pytest.LogCaptureFixture) -> None:
    """Rasa's demo bot's config sets ``token_pattern``; Rasa 3 never reads it (its word pattern is
    fixed), so the config trains here too, with the same features, and another pattern is named."""
    plain, with_rasa_pattern = CountVectorsFeaturizer(), CountVectorsFeaturizer(token_pattern=r"(?u)\b\w+\b")
    for featurizer in (plain, with_rasa_pattern):
        featurizer.train(TrainingData(make_messages()))
    assert plain.vocabularies_ == with_rasa_pattern.vocabularies_
    assert not caplog.records
    with caplog.at_level(logging.WARNING):
        CountVectorsFeaturizer(token_pattern=r"(?u)\b\w\w+\b")
    assert "token_pattern '(?u)\\\\b\\\\w\\\\w+\\\\b' is ignored, as Rasa 3 ignores it" in caplog.text
