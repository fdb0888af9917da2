"""PyThaiNLPTokenizer: Thai words from PyThaiNLP's dictionary-based ``newmm`` segmenter.

Thai writes words without spaces (spaces end phrases and sentences). PyThaiNLP (Apache-2.0, the
``th`` extra) segments with its word list by maximal matching (``newmm``, its default engine,
pure Python with no model to download); its words are pieces of the text, so each one's offset
is found after the previous one's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from nlu_engine.tokenizers.segmenter import SegmentingTokenizer


class PyThaiNLPTokenizer(SegmentingTokenizer):
    """Splits Thai into words with PyThaiNLP's ``newmm`` (see the module doc)."""

    packages: ClassVar[tuple[str, ...]] = ("pythainlp",)
    extra: ClassVar[str] = "th"

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        self.check_packages()
        from pythainlp.tokenize import word_tokenize

        offset = 0
        for word in word_tokenize(text, engine="newmm", keep_whitespace=False):
            start = text.find(word, offset)
            if start < 0:  # not a piece of the text (never seen): skip it, keep the others exact
                continue
            offset = start + len(word)
            yield start, offset
