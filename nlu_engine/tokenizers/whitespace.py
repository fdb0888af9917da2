"""WhitespaceTokenizer: Rasa's rule-based tokenizer for languages that separate words by spaces.

Punctuation is turned into spaces in three cases, then the text is split on whitespace:

1. a run of characters other than word characters, ``#``, ``@`` and ``&`` that is followed by
   whitespace or the end of the text (``"you?"`` -> ``"you"``);
2. such a run preceded by whitespace or the start of the text and not followed by a digit
   (``"'hello"`` -> ``"hello"``, but ``"-5"`` stays);
3. characters outside the URL-safe set that sit between two characters that are neither
   digits nor whitespace (``"how're"`` -> ``"how re"``).

So ``10,000.1``, ``a@b.com`` and URLs survive as single tokens. Tokens made only of emoji are
dropped; if nothing is left (``":)"``, ``"👍"``), the whole text is one token.

Rasa uses the ``regex`` module, whose ``\\w`` also matches combining marks (so Hindi
``"क्या"`` is one word); we emulate that with ``re`` by adding the Unicode mark categories and
the zero-width (non-)joiners to ``\\w``. Offsets are exact: punctuation is replaced by as many
spaces as it has characters, so every token's span is its span in the original text.

Deliberate difference from Rasa: Rasa's emoji class spans U+24C2–U+1F251, which also covers
CJK and Hangul, so a Korean word was dropped as an "emoji". Here a token is only dropped when
it is in that class *and* has no letter or digit.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from dataclasses import dataclass

from nlu_engine.contract.message import Message, Token
from nlu_engine.tokenizers.base import BaseTokenizer

_EMOJI = re.compile(
    "["
    "\U0001f600-\U0001f64f"  # emoticons
    "\U0001f300-\U0001f5ff"  # symbols & pictographs
    "\U0001f680-\U0001f6ff"  # transport & map symbols
    "\U0001f1e0-\U0001f1ff"  # flags
    "\U00002702-\U000027b0"
    "\U000024c2-\U0001f251"
    "\u200d"  # zero width joiner
    "\u200c"  # zero width non-joiner
    "]+"
)


@functools.cache
def _word_chars() -> str:
    """The body of a character class matching what ``regex``'s ``\\w`` matches."""
    marks = [
        c
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)).startswith("M") and not chr(c).isalnum()
    ]
    ranges: list[list[int]] = []
    for c in marks:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    body = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )
    return r"\w" + body + "\u200c\u200d"


@functools.cache
def _punctuation_regex() -> re.Pattern[str]:
    w = _word_chars()
    return re.compile(
        # not a word character (nor # @ &), followed by whitespace or the end
        rf"[^{w}#@&]+(?=\s|$)|"
        # preceded by whitespace or the start, not followed by a digit
        rf"(?:\s|^)[^{w}#@&]+(?=[^0-9\s])|"
        # between non-digits and not a URL / e-mail / number character
        rf"(?<=[^0-9\s])[^{w}._~:/?#\[\]()@!$&*+,;=-]+(?=[^0-9\s])"
    )


_NON_SPACE = re.compile(r"\S+")


def _blank(match: re.Match[str]) -> str:
    return " " * (match.end() - match.start())


def _is_emoji(word: str) -> bool:
    return _EMOJI.fullmatch(word) is not None and not any(c.isalnum() for c in word)


def whitespace_tokenize(text: str) -> list[Token]:
    """Rasa's whitespace tokenization of ``text`` (before any ``token_pattern``)."""
    blanked = _punctuation_regex().sub(_blank, text)
    tokens = [
        Token(m.group(), m.start(), m.end())
        for m in _NON_SPACE.finditer(blanked)
        if not _is_emoji(m.group())
    ]
    if not tokens:
        return [Token(text, 0, len(text))]
    return tokens


class WhitespaceTokenizer(BaseTokenizer):
    """Splits on whitespace after removing punctuation around words (see the module doc).

    For a language whose words are not separated by spaces (``zh``, ``ja``, ``th``; and ``ko``,
    whose words carry their particles), config validation puts the language's tokenizer in this
    one's place (``nlu_engine.contract.languages``), where Rasa refuses the config;
    ``language_tokenizer: false`` keeps this one.
    """

    @dataclass(frozen=True, kw_only=True)
    class Config(BaseTokenizer.Config):
        language_tokenizer: bool = True

    config: Config

    def tokenize(self, message: Message, attribute: str) -> list[Token]:
        return whitespace_tokenize(message.get(attribute) or "")
