"""What every tokenizer shares: label splitting, ``token_pattern`` and the batch loop.

The one base of tokenizers, built-in and custom: a concrete tokenizer subclasses
:class:`BaseTokenizer`, which holds the four common
hyperparameters (``intent_tokenization_flag``, ``intent_split_symbol``, ``token_pattern``,
``prefix_separator_symbol``) in its ``Config``, and implements :meth:`BaseTokenizer.tokenize`
for free text. Labels (``intent``, ``intent_response_key``) are never tokenized as text: they
are kept whole, or split on ``intent_split_symbol`` when ``intent_tokenization_flag`` is set.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from nlu_engine.contract.component import TOKENS, Component
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import (
    INTENT,
    INTENT_RESPONSE_KEY,
    RESPONSE_IDENTIFIER_DELIMITER,
    TEXT_ATTRIBUTES,
    Message,
    Token,
)


def words_to_tokens(words: list[str], text: str) -> list[Token]:
    """Tokens for ``words`` found left to right in ``text`` (Rasa's running-index offsets)."""
    tokens = []
    offset = 0
    for word in words:
        start = text.find(word, offset)
        if start < 0:  # not a substring (should not happen): place it after the previous token
            start = offset
        offset = start + len(word)
        tokens.append(Token(word, start, offset))
    return tokens


def split_label(
    name: str,
    split: bool,
    split_symbol: str,
    prefix_separator: str | None = None,
    split_response_key: bool = False,
) -> list[str]:
    """The words of a label name.

    ``"mood_great"`` stays whole unless ``split`` (then ``["mood", "great"]`` for ``"_"``).
    With ``prefix_separator="!"``, ``"main!greet"`` gives the prefix as its own word(s) first.
    ``split_response_key`` (Rasa's rule for ``intent_response_key``) always splits
    ``"faq/ask_name"`` into the intent and the response key; otherwise a retrieval intent is
    split on ``/`` only when ``split`` is set.
    """
    parts = [name]
    if prefix_separator and prefix_separator in name:
        prefix, rest = name.split(prefix_separator, 1)
        parts = [prefix, rest]

    words: list[str] = []
    for part in parts:
        pieces = [part]
        if (split or split_response_key) and RESPONSE_IDENTIFIER_DELIMITER in part:
            pieces = part.split(RESPONSE_IDENTIFIER_DELIMITER, 1)
        for piece in pieces:
            words.extend(piece.split(split_symbol) if split and split_symbol else [piece])
    words = [w for w in words if w]
    return words or [name]


@functools.cache
def compile_token_pattern(pattern: str) -> re.Pattern[str]:
    """``token_pattern`` compiled once; an invalid regex is a ConfigError naming it."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ConfigError(
            f"token_pattern '{pattern}' is not a valid regular expression: {exc}"
        ) from None


def apply_token_pattern(tokens: list[Token], pattern: str | None) -> list[Token]:
    """Re-split each token into the pattern's matches, keeping character offsets.

    Like Rasa (which uses ``findall``): a pattern with one group keeps that group's text;
    empty matches are dropped; a token without any match is kept unchanged.
    """
    if not pattern:
        return tokens
    regex = compile_token_pattern(pattern)
    group = 1 if regex.groups == 1 else 0
    result: list[Token] = []
    for token in tokens:
        pieces = []
        for match in regex.finditer(token.text):
            start, end = match.span(group)
            if start < end:
                pieces.append(
                    Token(
                        token.text[start:end],
                        token.start + start,
                        token.start + end,
                        lemma=token.lemma,
                        data=dict(token.data),
                    )
                )
        result.extend(pieces or [token])
    return result


class BaseTokenizer(Component):
    """Tokenizes ``text`` and ``response`` with :meth:`tokenize`, splits label names.

    Every tokenizer shares Rasa's tokenizer parameters, declared here; a subclass with more
    parameters subclasses this ``Config``.
    """

    provides = (TOKENS,)
    processes_training_data = True
    learns_from_data = False

    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        intent_tokenization_flag: bool = False
        intent_split_symbol: str = "_"
        token_pattern: str | None = None
        prefix_separator_symbol: str | None = None

        def validate(self) -> None:
            super().validate()
            if self.token_pattern:
                compile_token_pattern(self.token_pattern)

    config: Config

    def tokenize(self, message: Message, attribute: str) -> list[Token]:
        """Tokens of a free-text attribute (before ``token_pattern`` is applied)."""
        raise NotImplementedError

    def split_name(self, name: str, attribute: str = INTENT) -> list[Token]:
        """Tokens of a label: whole, or split on the split symbol (see :func:`split_label`)."""
        words = split_label(
            name,
            self.config.intent_tokenization_flag,
            self.config.intent_split_symbol,
            self.config.prefix_separator_symbol,
            split_response_key=attribute == INTENT_RESPONSE_KEY,
        )
        return words_to_tokens(words, name)

    def process(self, messages: list[Message]) -> None:
        for message in messages:
            for attribute in TEXT_ATTRIBUTES:
                if isinstance(message.get(attribute), str):
                    tokens = self.tokenize(message, attribute)
                    message.tokens[attribute] = apply_token_pattern(tokens, self.config.token_pattern)
            if message.intent:
                message.tokens[INTENT] = self.split_name(message.intent, INTENT)
            if message.intent_response_key:
                message.tokens[INTENT_RESPONSE_KEY] = self.split_name(
                    message.intent_response_key, INTENT_RESPONSE_KEY
                )
