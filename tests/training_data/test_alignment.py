"""Annotations that cut a token split it in training (and, learned, when parsing)."""

from __future__ import annotations

from nlu_engine.contract.message import Message, Token
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from nlu_engine.training_data import load_data
from nlu_engine.training_data.alignment import (
    apply_word_splits,
    cut_points,
    learn_word_splits,
    split_tokens,
    split_tokens_at_annotations,
)
from nlu_engine.training_data.bilou import entity_tags


def jieba_like(text: str, words: list[str]) -> list[Token]:
    tokens, start = [], 0
    for word in words:
        start = text.index(word, start)
        tokens.append(Token(word, start, start + len(word), data={"pos": "x"}))
        start += len(word)
    return tokens


def test_a_token_is_cut_at_both_edges_of_an_annotation_inside_it() -> None:
    text = "帮我查一下今天天气"
    tokens = jieba_like(text, ["帮", "我查", "一下", "今天天气"])
    entities = [{"start": 5, "end": 7, "entity": "date"}]
    assert cut_points(tokens, entities) == {7}  # 5 is already a token boundary
    split = split_tokens(tokens, cut_points(tokens, entities), text)
    assert [(t.text, t.start, t.end) for t in split][-2:] == [("今天", 5, 7), ("天气", 7, 9)]
    assert split[-1].data == {"pos": "x"} and split[-1].lemma == "天气"
    assert entity_tags(split, entities) == ["O", "O", "O", "U-date", "O"]


def test_an_annotation_inside_one_word_gives_three_pieces() -> None:
    text = "我想听不懂的歌"
    tokens = jieba_like(text, ["我", "想", "听不懂的", "歌"])
    message = Message(text=text, entities=[{"start": 3, "end": 5, "entity": "song"}])
    message.tokens["text"] = tokens
    notice = split_tokens_at_annotations([message])
    assert [t.text for t in message.tokens["text"]] == ["我", "想", "听", "不懂", "的", "歌"]
    assert notice is not None and notice.startswith("2 split(s) of tokens in 1 training example(s)")
    assert text in notice


def test_nothing_changes_when_every_annotation_fits() -> None:
    text = "去北京的火车"
    tokens = jieba_like(text, ["去", "北京", "的", "火车"])
    message = Message(text=text, entities=[{"start": 1, "end": 3, "entity": "city"}])
    message.tokens["text"] = list(tokens)
    assert split_tokens_at_annotations([message]) is None
    assert message.tokens["text"] == tokens


def test_english_training_data_needs_no_split() -> None:
    """The shipped English data fits WhitespaceTokenizer: English training is unchanged."""
    data = load_data("data/nlu.yml")
    WhitespaceTokenizer().process(data.messages)
    before = [list(m.tokens["text"]) for m in data.messages]
    assert split_tokens_at_annotations(data.messages) is None
    assert [m.tokens["text"] for m in data.messages] == before


def test_learned_splits_cut_the_same_word_in_new_text() -> None:
    examples = []
    for text, words, entity in [
        ("今天天气怎么样", ["今天天气", "怎么样"], (0, 2)),
        ("杭州今天天气", ["杭州", "今天天气"], (2, 4)),
        ("体育新闻", ["体育新闻"], (0, 2)),
    ]:
        examples.append((text, jieba_like(text, words), [{"start": entity[0], "end": entity[1]}]))
    splits, notice = learn_word_splits(examples)
    assert splits == {"今天天气": [2], "体育新闻": [2]}
    assert notice is not None and notice.startswith("3 split(s) of tokens in 3 training example(s)")
    assert "the 2 word(s) cut" in notice
    text = "明天呢今天天气好吗"
    tokens = apply_word_splits(jieba_like(text, ["明天", "呢", "今天天气", "好", "吗"]), splits, text)
    assert [t.text for t in tokens] == ["明天", "呢", "今天", "天气", "好", "吗"]
    assert all(text[t.start : t.end] == t.text for t in tokens)
