"""WhitespaceTokenizer: Rasa's punctuation rules, offsets, labels and token_pattern."""

from __future__ import annotations

import pytest

from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message, Token
from nlu_engine.tokenizers.base import apply_token_pattern, split_label
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer


def spans(text: str, **config: object) -> list[tuple[str, int, int]]:
    message = Message(text)
    WhitespaceTokenizer(**config).process([message])  # type: ignore[arg-type]
    return [(t.text, t.start, t.end) for t in message.tokens["text"]]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Forecast for lunch", [("Forecast", 0, 8), ("for", 9, 12), ("lunch", 13, 18)]),
        (
            "hey ńöñàśçií how're you?",
            [("hey", 0, 3), ("ńöñàśçií", 4, 12), ("how", 13, 16), ("re", 17, 19), ("you", 20, 23)],
        ),
        (
            "50 क्या आपके पास डेरी मिल्क",
            [("50", 0, 2), ("क्या", 3, 7), ("आपके", 8, 12), ("पास", 13, 16), ("डेरी", 17, 21),
             ("मिल्क", 22, 27)],
        ),
        (
            "https://www.google.com/search?client=safari&rls=en&q=i+like+rasa&ie=UTF-8&oe=UTF-8 "
            "https://rasa.com/docs/rasa/components#whitespacetokenizer",
            [
                (
                    "https://www.google.com/search?client=safari&rls=en&q=i+like+rasa&ie=UTF-8"
                    "&oe=UTF-8",
                    0,
                    82,
                ),
                ("https://rasa.com/docs/rasa/components#whitespacetokenizer", 83, 140),
            ],
        ),
        (
            "Joselico gracias Dois 🙏🇺🇸🏦🛠🔥⭐️🦅👑💪",
            [("Joselico", 0, 8), ("gracias", 9, 16), ("Dois", 17, 21)],
        ),
        (":)", [(":)", 0, 2)]),
        ("Hi :-)", [("Hi", 0, 2)]),
        ("👍", [("👍", 0, 1)]),
        ("", [("", 0, 0)]),
        (
            "I have 10,000.1 dollars, mail a@b.com!",
            [("I", 0, 1), ("have", 2, 6), ("10,000.1", 7, 15), ("dollars", 16, 23),
             ("mail", 25, 29), ("a@b.com", 30, 37)],
        ),
        ("it costs -5 or $5", [("it", 0, 2), ("costs", 3, 8), ("-5", 9, 11), ("or", 12, 14),
                               ("$5", 15, 17)]),
        ("I want Tacos!", [("I", 0, 1), ("want", 2, 6), ("Tacos", 7, 12)]),
        ("#hashtag & @user", [("#hashtag", 0, 8), ("&", 9, 10), ("@user", 11, 16)]),
        ("'quoted' word", [("quoted", 1, 7), ("word", 9, 13)]),
        ("  spaced   out  ", [("spaced", 2, 8), ("out", 11, 14)]),
        # unlike Rasa, Hangul / CJK words are not mistaken for emoji
        ("안녕 하세요", [("안녕", 0, 2), ("하세요", 3, 6)]),
        ("hi 👨\u200d👩", [("hi", 0, 2)]),
    ],
)
def test_whitespace_tokens_and_offsets(text: str, expected: list[tuple[str, int, int]]) -> None:
    assert spans(text) == expected


def test_offsets_index_the_text() -> None:
    text = "Book a table, for 2 people at 7:30pm (tomorrow)... ok?"
    for token, start, end in spans(text):
        assert text[start:end] == token


def test_intent_is_one_token_unless_split() -> None:
    message = Message("Any Mexican restaurant will do", intent="restaurant_search")
    WhitespaceTokenizer().process([message])
    assert [t.text for t in message.tokens["intent"]] == ["restaurant_search"]
    assert [t.text for t in message.tokens["text"]] == [
        "Any", "Mexican", "restaurant", "will", "do",
    ]

    message = Message("hello", intent="mood_great")
    WhitespaceTokenizer(intent_tokenization_flag=True).process([message])
    assert [(t.text, t.start, t.end) for t in message.tokens["intent"]] == [
        ("mood", 0, 4), ("great", 5, 10),
    ]


def test_inference_message_gets_no_intent_tokens() -> None:
    message = Message("hello")
    WhitespaceTokenizer().process([message])
    assert "intent" not in message.tokens


@pytest.mark.parametrize(
    "name, expected",
    [
        ("Forecast_for_LUNCH", ["Forecast_for_LUNCH"]),
        ("Forecast for LUNCH", ["Forecast for LUNCH"]),
        ("Forecast+for+LUNCH", ["Forecast", "for", "LUNCH"]),
    ],
)
def test_custom_intent_split_symbol(name: str, expected: list[str]) -> None:
    message = Message("x", intent=name)
    WhitespaceTokenizer(intent_tokenization_flag=True, intent_split_symbol="+").process([message])
    assert [t.text for t in message.tokens["intent"]] == expected


def test_retrieval_intent_names() -> None:
    # a retrieval intent is one label unless split
    assert split_label("faq/ask_name", False, "_") == ["faq/ask_name"]
    assert split_label("faq/ask_name", True, "_") == ["faq", "ask", "name"]
    # Rasa's rule for intent_response_key: always split on "/"
    message = Message("what is your name", intent="faq", intent_response_key="faq/ask_name")
    WhitespaceTokenizer().process([message])
    assert [t.text for t in message.tokens["intent"]] == ["faq"]
    assert [(t.text, t.start) for t in message.tokens["intent_response_key"]] == [
        ("faq", 0), ("ask_name", 4),
    ]
    WhitespaceTokenizer(intent_tokenization_flag=True, intent_split_symbol="+").process(
        [message := Message("x", intent="faq", intent_response_key="faq/ask+language")]
    )
    assert [t.text for t in message.tokens["intent_response_key"]] == ["faq", "ask", "language"]


@pytest.mark.parametrize(
    "name, irk, expected",
    [
        ("PREFIX!Forecast+for+LUNCH", False, ["PREFIX", "Forecast", "for", "LUNCH"]),
        ("prefix!Forecast_for_LUNCH", False, ["prefix", "Forecast_for_LUNCH"]),
        ("prefix!faq/ask_language", True, ["prefix", "faq", "ask_language"]),
        ("main+other!faq/ask+language", True, ["main", "other", "faq", "ask", "language"]),
        ("prefix_forecast_for_LUNCH", False, ["prefix_forecast_for_LUNCH"]),
    ],
)
def test_prefix_separator(name: str, irk: bool, expected: list[str]) -> None:
    tokenizer = WhitespaceTokenizer(
        intent_tokenization_flag=True, intent_split_symbol="+", prefix_separator_symbol="!"
    )
    attribute = "intent_response_key" if irk else "intent"
    assert [t.text for t in tokenizer.split_name(name, attribute)] == expected


@pytest.mark.parametrize(
    "pattern, expected",
    [
        (None, [("role-based", 0, 10), ("access-control", 11, 25)]),
        ("", [("role-based", 0, 10), ("access-control", 11, 25)]),
        (
            r"(?u)\b\w\w+\b",
            [("role", 0, 4), ("based", 5, 10), ("access", 11, 17), ("control", 18, 25)],
        ),
        (r".*", [("role-based", 0, 10), ("access-control", 11, 25)]),
        (r"(test)", [("role-based", 0, 10), ("access-control", 11, 25)]),
        (r"(\w+)-", [("role", 0, 4), ("access", 11, 17)]),
    ],
)
def test_token_pattern(pattern: str | None, expected: list[tuple[str, int, int]]) -> None:
    assert spans("role-based access-control", token_pattern=pattern) == expected
    tokens = [Token("role-based", 0, 10), Token("access-control", 11, 25)]
    assert [(t.text, t.start, t.end) for t in apply_token_pattern(tokens, pattern)] == expected


def test_token_pattern_keeps_offsets_in_the_middle_of_text() -> None:
    assert spans("go to new-york now", token_pattern=r"\w+") == [
        ("go", 0, 2), ("to", 3, 5), ("new", 6, 9), ("york", 10, 14), ("now", 15, 18),
    ]


def test_invalid_token_pattern_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"token_pattern '\(unclosed'"):
        spans("hello", token_pattern="(unclosed")


def test_response_attribute_is_tokenized() -> None:
    message = Message("hi", extra={"response": "Hello there!"})
    WhitespaceTokenizer().process([message])
    assert [t.text for t in message.tokens["response"]] == ["Hello", "there"]
