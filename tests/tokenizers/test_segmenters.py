"""The tokenizers of unspaced writing (Sudachi, Kiwi, PyThaiNLP; jieba has its own file): words
with exact offsets on hand-written messages, hostile texts and long texts, learned word splits,
and the one-line error when the package is missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.registry import component_class
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.tokenizers.segmenter import SegmentingTokenizer, chunks
from tests.extras import requires_extra
from tests.hostile_texts import HOSTILE_TEXTS

#: tokenizer -> (its extra, hand-written messages mixing Latin words, digits, emoji, full-width
#: punctuation and line breaks into the language)
SEGMENTERS = {
    "SudachiTokenizer": ("ja", [
        "明日の朝7時に東京駅から大阪行きの新幹線を予約してください",
        "iPhone 15 Proの値段を調べて😀",
        "来週の金曜日、午後３時に山田さんと会議を入れて。",
        "京都の清水寺までの行き方を教えてください\n急いでいます！",
        "ＡＢＣ株式会社の電話番号は03-1234-5678です",
    ]),
    "KiwiTokenizer": ("ko", [
        "내일 아침 7시에 서울역에서 부산 가는 기차표 예매해줘",
        "😀강남역 근처 맛집 알려줘",
        "아이폰 15 프로 가격 알려줘\n빨리！",
        "했다고 했잖아요",
    ]),
    "PyThaiNLPTokenizer": ("th", [
        "จองตั๋วรถไฟไปเชียงใหม่พรุ่งนี้เช้า",
        "เปิดเพลงของ Taylor Swift ให้หน่อย😀",
        "ตั้งนาฬิกาปลุก 6 โมงครึ่ง\nด่วน！",
    ]),
}
PARAMS = [pytest.param(name, marks=requires_extra(extra)) for name, (extra, _) in SEGMENTERS.items()]
#: hand-written words each tokenizer must find (its words of the first message above)
WORDS = {
    "SudachiTokenizer": ["明日", "の", "朝", "7", "時", "に", "東京駅", "から", "大阪", "行き", "の",
                         "新幹線", "を", "予約", "し", "て", "ください"],
    "KiwiTokenizer": ["내일", "아침", "7", "시", "에", "서울역", "에서", "부산", "가", "는", "기차표",
                      "예매", "해", "줘"],
    "PyThaiNLPTokenizer": ["จอง", "ตั๋วรถไฟ", "ไป", "เชียงใหม่", "พรุ่งนี้", "เช้า"],
}


def tokenizer(name: str, **params: Any) -> SegmentingTokenizer:
    cls = component_class(name)
    assert issubclass(cls, SegmentingTokenizer)
    component = cls(**params)
    component.train(TrainingData([]))
    return component


def tokens(component: SegmentingTokenizer, text: str) -> list[tuple[str, int, int]]:
    message = Message(text=text)
    component.process([message])
    return [(t.text, t.start, t.end) for t in message.tokens["text"]]


def assert_exact(text: str, found: list[tuple[str, int, int]]) -> None:
    """Every token is the text at its span, in order, not blank; every letter is in a token."""
    assert found, text
    previous = 0
    for word, start, end in found:
        assert text[start:end] == word and start >= previous, (text, found)
        previous = end
    if text.strip():
        assert all(word.strip() for word, _, _ in found), found
        covered = {i for _, start, end in found for i in range(start, end)}
        assert all(i in covered for i, c in enumerate(text) if c.isalnum()), (text, found)


@pytest.mark.parametrize("name", PARAMS)
def test_hand_written_messages_are_words_with_exact_offsets(name: str) -> None:
    component = tokenizer(name)
    _, texts = SEGMENTERS[name]
    assert [w for w, _, _ in tokens(component, texts[0])] == WORDS[name]
    for text in texts:
        assert_exact(text, tokens(component, text))


@pytest.mark.parametrize("name", PARAMS)
@pytest.mark.parametrize("text", [*HOSTILE_TEXTS, "", "   ", "\n"])
def test_hostile_texts_keep_exact_offsets(name: str, text: str) -> None:
    assert_exact(text, tokens(tokenizer(name), text))


@pytest.mark.parametrize("name", PARAMS)
def test_a_long_text_is_segmented_in_pieces_with_exact_offsets(name: str) -> None:
    """Sudachi refuses more than 49,149 bytes at once; the text is cut at a line break."""
    _, texts = SEGMENTERS[name]
    text = "\n".join(texts * 600)
    found = tokens(tokenizer(name), text)
    assert_exact(text, found)
    assert found[-1][2] >= len(text) - 1  # the end is segmented too (all but the final "！")


def test_chunks_cut_after_a_break_and_cover_the_text() -> None:
    text = "あいう えお\nかきくけこ" * 3
    pieces = list(chunks(text, 7))
    assert "".join(piece for _, piece in pieces) == text
    assert all(len(piece) <= 7 and text[offset:offset + len(piece)] == piece for offset, piece in pieces)
    assert [piece for _, piece in pieces[:2]] == ["あいう えお\n", "かきくけこあい"]
    assert list(chunks("abc", None)) == [(0, "abc")]


#: tokenizer -> (an example whose annotation cuts one of the tokenizer's words, that word, the
#: text to parse and the tokens expected there)
CUT_WORDS = {
    "SudachiTokenizer": ("東京駅に行きたい", {"start": 0, "end": 2, "value": "東京", "entity": "city"},
                         "東京駅", "東京駅まで", ["東京", "駅", "まで"]),
    "PyThaiNLPTokenizer": ("ตั๋วรถไฟ", {"start": 0, "end": 4, "value": "ตั๋ว", "entity": "item"},
                           "ตั๋วรถไฟ", "จองตั๋วรถไฟ", ["จอง", "ตั๋ว", "รถไฟ"]),
}


@pytest.mark.parametrize("name", [p for p in PARAMS if p.values[0] in CUT_WORDS])
def test_an_annotation_inside_a_word_teaches_where_to_cut_it(name: str, tmp_path: Path) -> None:
    text, entity, word, parsed, expected = CUT_WORDS[name]
    plain = tokenizer(name)
    assert word in [w for w, _, _ in tokens(plain, text)]
    taught = component_class(name)()
    taught.train(TrainingData([Message(text=text, intent="go", entities=[entity])]))
    assert [w for w, _, _ in tokens(taught, parsed)] == expected
    taught.persist(tmp_path)
    loaded = component_class(name).load(tmp_path, taught.config)
    assert [w for w, _, _ in tokens(loaded, parsed)] == expected
    assert tokens(tokenizer(name, split_annotated_words=False), parsed) == tokens(plain, parsed)


@requires_extra("ja")
def test_sudachi_split_mode_a_gives_the_shortest_units() -> None:
    shortest = tokenizer("SudachiTokenizer", split_mode="A")
    assert [w for w, _, _ in tokens(shortest, "東京駅")] == ["東京", "駅"]
    with pytest.raises(ConfigError, match="split_mode"):
        component_class("SudachiTokenizer")(split_mode="D")


@pytest.mark.parametrize("name, extra, module", [
    ("SudachiTokenizer", "ja", "sudachidict_core"),
    ("KiwiTokenizer", "ko", "kiwipiepy"),
    ("PyThaiNLPTokenizer", "th", "pythainlp"),
    ("JiebaTokenizer", "zh", "jieba"),
])
def test_a_missing_package_is_one_line_naming_the_extra(
    name: str, extra: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m, *a: None if m == module else real(m, *a))
    with pytest.raises(ConfigError) as info:
        component_class(name)().train(TrainingData([Message(text="x", intent="a")]))
    message = str(info.value)
    assert "\n" not in message and f"'{module}'" in message
    assert f"pip install 'nlu-engine[{extra}]'" in message
