"""JiebaTokenizer: Rasa's tokenizer for Chinese, segmenting words with jieba.

Tokens are jieba's words with their character offsets (``jieba.tokenize``, HMM on, as in Rasa).
Unlike Rasa, words made only of whitespace are not tokens (Rasa issue #7910), and an empty or
blank text is one token holding it, as for WhitespaceTokenizer. Labels are split as by every
tokenizer (``intent_tokenization_flag``), and ``token_pattern`` applies.

``dictionary_path`` names a folder of jieba user dictionaries (one ``word [freq] [tag]`` a line,
UTF-8). Training reads every file in it, in name order; the model archive stores their text, and a
loaded model segments with the stored text, never with the folder. jieba keeps its default
segmenter in module state, so each component segments with its own ``jieba.Tokenizer``: one
model's user words never change how another model in the same process segments. A component
without user dictionaries shares one read-only segmenter with the others like it.
``jieba.enable_paddle()`` is never called (it installs a package at run time).

``split_annotated_words`` (not in Rasa; on by default): training learns, from the entity
annotations that start or end inside a jieba word, where to cut that word (jieba reads
``今天天气`` as one word, while ``[今天](date)`` is annotated), and the tokenizer cuts it there
in every text it segments, so parsing sees the tokens training saw and can find the entity with
its exact span. Without it, such a word is split in the training examples only
(``nlu_engine.training_data.alignment``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.tokenizers.segmenter import SegmentingTokenizer

logger = logging.getLogger(__name__)

DICTIONARIES_FILE = "user_dictionaries.json"

_SHARED: dict[str, Any] = {}
_LOCK = threading.Lock()


def _new_segmenter() -> Any:
    """A jieba segmenter of its own, with jieba's default dictionary loaded."""
    import jieba

    jieba.setLogLevel(logging.WARNING)  # jieba logs "Building prefix dict..." at DEBUG to stderr
    segmenter = jieba.Tokenizer()
    segmenter.initialize()
    return segmenter


def _shared_segmenter() -> Any:
    """The one segmenter without user words, shared by every component that adds none."""
    with _LOCK:
        if "default" not in _SHARED:
            _SHARED["default"] = _new_segmenter()
        return _SHARED["default"]


def read_dictionaries(folder: str) -> list[tuple[str, str]]:
    """``(file name, text)`` of every file in ``folder``, in name order; a missing folder or a
    file that is not UTF-8 text is a one-line ConfigError naming it."""
    path = Path(folder)
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        raise ConfigError(
            f"JiebaTokenizer: dictionary_path '{folder}' {what}; give a folder of jieba user "
            "dictionaries (UTF-8 text, one 'word [freq] [tag]' a line)"
        )
    dictionaries = []
    for file in sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")):
        try:
            text = file.read_bytes().decode("utf-8").lstrip("\ufeff")
        except UnicodeDecodeError as error:
            raise ConfigError(
                f"JiebaTokenizer: user dictionary '{file}' is not UTF-8 text (byte {error.start}); "
                "save it as UTF-8"
            ) from None
        dictionaries.append((file.name, text))
    return dictionaries


class JiebaTokenizer(SegmentingTokenizer):
    """Segments Chinese with jieba (and its user dictionaries from ``dictionary_path``)."""

    packages: ClassVar[tuple[str, ...]] = ("jieba",)
    extra: ClassVar[str] = "zh"

    @dataclass(frozen=True, kw_only=True)
    class Config(SegmentingTokenizer.Config):
        dictionary_path: str | None = None

    config: Config

    def train(self, data: TrainingData) -> None:
        path = self.config.dictionary_path
        self.dictionaries_: list[tuple[str, str]] = read_dictionaries(path) if path else []
        self._segmenter = None
        super().train(data)

    def data_fingerprint(self, data: TrainingData) -> str:
        """The user dictionaries' text and the word splits the annotations teach: fine-tuning
        keeps the tokenizer while neither changes."""
        path = self.config.dictionary_path
        if not path and not self.config.split_annotated_words:
            return ""
        probe = type(self)(self.config)
        probe.dictionaries_ = read_dictionaries(path) if path else []
        digest = hashlib.sha256()
        for name, text in probe.dictionaries_:
            digest.update(f"{name}\0{text}\0".encode())
        splits = probe.learn_splits(data)[0] if self.config.split_annotated_words else {}
        digest.update(json.dumps(splits, ensure_ascii=False, sort_keys=True).encode())
        return digest.hexdigest()

    def segmenter(self) -> Any:
        """This component's jieba segmenter: its own when it has user words, else the shared one."""
        segmenter = getattr(self, "_segmenter", None)
        if segmenter is None:
            self.check_packages()
            dictionaries = getattr(self, "dictionaries_", [])
            if not dictionaries:
                segmenter = _shared_segmenter()
            else:
                import io

                segmenter = _new_segmenter()
                for _, text in dictionaries:
                    segmenter.load_userdict(io.StringIO(text))
            self._segmenter = segmenter
        return segmenter

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        return ((start, end) for _, start, end in self.segmenter().tokenize(text))

    def persist(self, directory: Path) -> None:
        super().persist(directory)
        entries = [{"name": name, "text": text} for name, text in getattr(self, "dictionaries_", [])]
        with open(Path(directory) / DICTIONARIES_FILE, "w", encoding="utf-8") as f:
            json.dump(entries, f, ensure_ascii=False, indent=1)

    @classmethod
    def load(cls, directory: Path, config: JiebaTokenizer.Config) -> JiebaTokenizer:  # type: ignore[override]
        tokenizer = super().load(directory, config)
        assert isinstance(tokenizer, JiebaTokenizer)
        file = Path(directory) / DICTIONARIES_FILE
        try:
            entries = json.loads(file.read_text(encoding="utf-8")) if file.exists() else []
            tokenizer.dictionaries_ = [(str(e["name"]), str(e["text"])) for e in entries]
        except (ValueError, TypeError, KeyError) as error:
            raise ArchiveError(f"{file}: not a list of user dictionaries ({error})") from None
        tokenizer._segmenter = None
        return tokenizer
