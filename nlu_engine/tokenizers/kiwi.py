"""KiwiTokenizer: Korean morphemes from Kiwi (kiwipiepy).

Korean puts spaces between words (eojeol), but a word carries its particles and endings:
``서울역에서`` is ``서울역`` + ``에서``, and an entity (``[서울역](station)``) is the stem. Kiwi's
morphological analysis (``kiwipiepy`` with its model ``kiwipiepy_model``, both Apache-2.0, the
``ko`` extra) splits the words into morphemes with their character offsets. A token is the
text's own characters at a morpheme's span (Kiwi's forms are dictionary forms: ``해`` is read as
``하`` + ``어``); morphemes sharing a syllable become one token.

The model loads once per process (a few seconds) and analyses in threads of its own (one here:
the pipeline's threads are the parallelism).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, ClassVar

from nlu_engine.tokenizers.segmenter import SegmentingTokenizer

_KIWI: dict[str, Any] = {}
_LOCK = threading.Lock()


def _kiwi() -> Any:
    """The process's Kiwi, built once (it is safe to call from several threads)."""
    with _LOCK:
        if "kiwi" not in _KIWI:
            from kiwipiepy import Kiwi

            _KIWI["kiwi"] = Kiwi(num_workers=0)
        return _KIWI["kiwi"]


class KiwiTokenizer(SegmentingTokenizer):
    """Splits Korean into morphemes with Kiwi (see the module doc)."""

    packages: ClassVar[tuple[str, ...]] = ("kiwipiepy", "kiwipiepy_model")
    extra: ClassVar[str] = "ko"

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        if "kiwi" not in _KIWI:
            self.check_packages()
        return ((t.start, t.start + t.len) for t in _kiwi().tokenize(text))
