"""SudachiTokenizer: Japanese words from SudachiPy's morphological analysis.

Japanese does not put spaces between words; Sudachi (Works Applications, Apache-2.0) splits the
text with its dictionary ``sudachidict-core`` (Apache-2.0), both from PyPI (the ``ja`` extra).
Chosen over fugashi with unidic-lite (issue 49; figures in the README's "Languages"): Sudachi
gives each word's character offsets itself, while MeCab's surfaces must be searched for in the
text and a NUL character ends MeCab's input (the words after it were lost); fugashi is about
twice as fast, both are far below a millisecond a message.

``split_mode`` is Sudachi's unit: ``C`` (the default) keeps named things whole (``東京駅``,
``新幹線``), ``A`` the shortest units (``東京`` ``駅``), ``B`` between. Surfaces are the text's
own characters (Sudachi's normalized forms are not used). Sudachi refuses inputs over 49,149
bytes: longer texts are segmented in pieces (``SegmentingTokenizer.max_chars``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from nlu_engine.tokenizers.segmenter import SegmentingTokenizer

#: Sudachi's input limit is 49,149 bytes; a character is at most 4 bytes in UTF-8
_MAX_CHARS = 49149 // 4
_DICTIONARY: dict[str, Any] = {}
_LOCK = threading.Lock()


def _dictionary() -> Any:
    """sudachidict-core, loaded once per process (its tokenizers are made per thread)."""
    with _LOCK:
        if "core" not in _DICTIONARY:
            from sudachipy import Dictionary

            _DICTIONARY["core"] = Dictionary(dict="core")
        return _DICTIONARY["core"]


class SudachiTokenizer(SegmentingTokenizer):
    """Splits Japanese into words with SudachiPy and sudachidict-core (see the module doc)."""

    packages: ClassVar[tuple[str, ...]] = ("sudachipy", "sudachidict_core")
    extra: ClassVar[str] = "ja"
    max_chars: ClassVar[int | None] = _MAX_CHARS

    @dataclass(frozen=True, kw_only=True)
    class Config(SegmentingTokenizer.Config):
        split_mode: Literal["A", "B", "C"] = "C"

    config: Config

    def _tokenizer(self) -> Any:
        """A Sudachi tokenizer of this thread (Sudachi's are not shared between threads)."""
        local = self.__dict__.setdefault("_local", threading.local())
        tokenizer = getattr(local, "tokenizer", None)
        if tokenizer is None:
            self.check_packages()
            tokenizer = _dictionary().tokenizer(mode=self.config.split_mode)
            local.tokenizer = tokenizer
        return tokenizer

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        return ((m.begin(), m.end()) for m in self._tokenizer().tokenize(text))
