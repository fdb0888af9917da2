"""What the tokenizers of unspaced writing share: exact offsets, learned word splits, the package.

A word segmenter (jieba, Sudachi, Kiwi, PyThaiNLP) subclasses :class:`SegmentingTokenizer` and
gives :meth:`SegmentingTokenizer.spans`: the character spans of the words its library finds. The
base makes tokens of them that index the text exactly (a token's text is always
``text[start:end]``), whatever the library does:

* the library sees the text with lone surrogates replaced by ``?`` (one character each, so
  offsets do not move): the libraries encode their input as UTF-8 or UTF-16 and would fail;
* a text longer than the library takes (``max_chars``) is cut at a line break or a space, else
  at a character, and segmented piece by piece;
* spans made only of whitespace are dropped; spans that overlap (Kiwi gives the two morphemes of
  a contracted syllable the same span) become one token; an empty or blank text is one token
  holding it, as for WhitespaceTokenizer.

``split_annotated_words`` (on by default): training learns, from the entity annotations that
start or end inside a word, where to cut that word, and the tokenizer cuts it there in every
text it segments, so parsing sees the tokens training saw
(``nlu_engine.training_data.alignment``).

The library is imported inside :meth:`SegmentingTokenizer.spans` (never at module level); when
it is missing, :func:`require_package` is the one-line error naming the extra that installs it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.message import Message, Token
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.tokenizers.base import BaseTokenizer
from nlu_engine.training_data.alignment import apply_word_splits, learn_word_splits

logger = logging.getLogger(__name__)

SPLITS_FILE = "word_splits.json"
_SURROGATES = re.compile("[\ud800-\udfff]")
#: where a long text is best cut: after a line break, else after a space
_BREAKS = ("\n", " ", "\u3000", "\t")


def require_package(component: str, module: str, extra: str) -> None:
    """A one-line ConfigError naming what to install when ``module`` cannot be imported."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(
            f"{component} needs the package '{module}', which is not installed; install it with "
            f"`pip install 'nlu-engine[{extra}]'` (`make install` does)"
        )


def chunks(text: str, max_chars: int | None) -> Iterator[tuple[int, str]]:
    """``(offset, piece)`` of ``text`` in pieces of at most ``max_chars`` characters, cut after a
    line break or a space where the piece has one."""
    if max_chars is None or len(text) <= max_chars:
        yield 0, text
        return
    start = 0
    while start < len(text):
        end = min(start + max_chars, len(text))
        if end < len(text):
            cut = max(text.rfind(b, start + 1, end) for b in _BREAKS)
            end = cut + 1 if cut > start else end
        yield start, text[start:end]
        start = end


def spans_to_tokens(spans: Iterable[tuple[int, int]], text: str) -> list[Token]:
    """Tokens of ``text`` at ``spans``: blank spans dropped, overlapping ones joined."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if start >= end or not text[start:end].strip():
            continue
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [Token(text[start:end], start, end) for start, end in merged]


class SegmentingTokenizer(BaseTokenizer):
    """A tokenizer whose library finds the words (see the module doc)."""

    learns_from_data = True  # the word splits the annotations teach (``split_annotated_words``)
    #: the modules the library (and its dictionary) are imported as, and the setup.py extra
    #: that installs them
    packages: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str] = ""
    #: the longest text the library segments at once (None: any)
    max_chars: ClassVar[int | None] = None

    @dataclass(frozen=True, kw_only=True)
    class Config(BaseTokenizer.Config):
        split_annotated_words: bool = True

    config: Config

    @classmethod
    def check_packages(cls) -> None:
        """A one-line ConfigError naming the extra to install when a package is missing."""
        for module in cls.packages:
            require_package(cls.__name__, module, cls.extra)

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        """The character spans of the library's words in ``text`` (no lone surrogates in it)."""
        raise NotImplementedError

    def words(self, text: str) -> list[Token]:
        """The library's words of ``text`` with exact offsets (before the learned splits)."""
        clean = _SURROGATES.sub("?", text)
        spans = [(offset + start, offset + end)
                 for offset, piece in chunks(clean, self.max_chars) if piece.strip()
                 for start, end in self.spans(piece)]
        return spans_to_tokens(spans, text)

    def tokenize(self, message: Message, attribute: str) -> list[Token]:
        text = message.get(attribute) or ""
        tokens = apply_word_splits(self.words(text), getattr(self, "word_splits_", {}), text)
        return tokens or [Token(text, 0, len(text))]

    def train(self, data: TrainingData) -> None:
        self.check_packages()
        self.word_splits_: dict[str, list[int]] = {}
        if self.config.split_annotated_words:
            self.word_splits_, notice = self.learn_splits(data)
            if notice:
                logger.warning(f"{self.component_name()}: {notice}")

    def learn_splits(self, data: TrainingData) -> tuple[dict[str, list[int]], str | None]:
        """The cuts the annotations teach, and a notice counting them (see the module doc)."""
        examples = []
        for message in data.messages:
            if message.entities and isinstance(message.text, str):
                examples.append((message.text, self.words(message.text), message.entities))
        return learn_word_splits(examples)

    def data_fingerprint(self, data: TrainingData) -> str:
        """The word splits the annotations teach: fine-tuning keeps the tokenizer while they do
        not change."""
        if not self.config.split_annotated_words:
            return ""
        splits = type(self)(self.config).learn_splits(data)[0]
        return hashlib.sha256(json.dumps(splits, ensure_ascii=False, sort_keys=True).encode()).hexdigest()

    def persist(self, directory: Path) -> None:
        with open(Path(directory) / SPLITS_FILE, "w", encoding="utf-8") as f:
            json.dump(getattr(self, "word_splits_", {}), f, ensure_ascii=False, indent=1)

    @classmethod
    def load(cls, directory: Path, config: SegmentingTokenizer.Config) -> SegmentingTokenizer:
        tokenizer = cls(config)
        file = Path(directory) / SPLITS_FILE
        try:
            splits = json.loads(file.read_text(encoding="utf-8")) if file.exists() else {}
            tokenizer.word_splits_ = {str(w): [int(c) for c in cuts] for w, cuts in splits.items()}
        except (ValueError, TypeError, AttributeError) as error:
            raise ArchiveError(f"{file}: not a map of words to cut offsets ({error})") from None
        return tokenizer

