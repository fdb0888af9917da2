"""CRFEntityExtractor: linear-chain conditional random fields over hand-made token features.

Rasa's extractor, trained with CRFsuite (``python-crfsuite``, what ``sklearn-crfsuite`` wraps):
L-BFGS with ``L1_c`` / ``L2_c`` regularisation, ``max_iterations``, all possible transitions.

Features. ``features`` is a list of an odd number of lists — the tokens before, the token
itself, the tokens after — each naming the features of the token at that position: ``low``
(lower-cased text), ``title``, ``upper``, ``digit``, ``prefix5``, ``prefix2``, ``suffix5``,
``suffix3``, ``suffix2``, ``suffix1``, ``bias``, ``pos``, ``pos2`` (``token.data["pos"]``, from a
spaCy tokenizer), ``pattern`` (the ``token.data["pattern"]`` flags a RegexFeaturizer sets),
``text_dense_features`` (the dense sequence features, from ``featurizers`` or all) and
``entity``. A feature is named ``"<position>:<name>"`` (``"-1:low"``); a window that runs off
the sentence adds ``BOS`` / ``EOS``, as Rasa does.

Tags. Entity types are tagged BILOU (``BILOU_flag``). When the data annotates roles or groups,
a separate CRF is trained for each, with the entity tag as an extra feature (the gold tag in
training, the predicted one at inference), so a role is predicted from its context and entity
type rather than from the word alone.

Prediction. Each token's tag is the one with the highest marginal probability; its confidence
is that marginal, summed over the B-/I-/L-/U- variants of the winning type with BILOU. Tags are
repaired and merged into entities with Rasa's rules (``nlu_engine.training_data.bilou``), split
at commas when ``split_entities_by_comma``; entities carry ``confidence_entity`` (and
``role`` / ``confidence_role``, ``group`` / ``confidence_group``) and
``extractor: "CRFEntityExtractor"``.

Persistence: one CRFsuite model file per CRF (``entity.crfsuite``, ``role.crfsuite``,
``group.crfsuite``; CRFsuite's own binary format, plain data) and ``crf.json``. The files are
read into memory at load time (``Tagger.open_inmemory``), so the folder may be removed after.
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nlu_engine.contract.component import TOKENS, EntityExtractor, param
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import TEXT, Message, Token
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.extractors.entity_chooser import HELD_OUT_ENTITIES, held_out_examples, record_held_out
from nlu_engine.training_data import bilou

logger = logging.getLogger(__name__)

EXTRACTOR_NAME = "CRFEntityExtractor"
STATE_FILE = "crf.json"
TAG_NAMES: tuple[bilou.TagName, ...] = ("entity", "role", "group")
DENSE = "text_dense_features"

CRFFeature = Literal[
    "low", "title", "upper", "digit", "prefix5", "prefix2", "suffix5", "suffix3", "suffix2",
    "suffix1", "bias", "pos", "pos2", "pattern", "text_dense_features", "entity",
]
DEFAULT_FEATURES: list[list[str]] = [
    ["low", "title", "upper"],
    ["low", "bias", "prefix5", "prefix2", "suffix5", "suffix3", "suffix2", "upper", "title", "digit",
     "pattern"],
    ["low", "title", "upper"],
]


class CRFEntityExtractor(EntityExtractor):
    """Entities (and their roles and groups) from CRFs over lexical token features."""

    requires = (TOKENS,)

    @dataclass(frozen=True, kw_only=True)
    class Config(EntityExtractor.Config):
        BILOU_flag: bool = True
        split_entities_by_comma: bool | dict[str, bool] = True
        features: list[list[CRFFeature]] = param(DEFAULT_FEATURES)
        max_iterations: int = param(50, low=1)
        L1_c: float = param(0.1, low=0)
        L2_c: float = param(0.1, low=0)
        featurizers: list[str] = param([])

        def validate(self) -> None:
            super().validate()
            if len(self.features) % 2 != 1:
                raise ConfigError(
                    "'features' needs an odd number of lists (tokens before, the token itself, "
                    "tokens after), e.g. [[low], [low, bias, suffix3], [low]]"
                )

    config: Config

    def reads_features_from(self, origin: str) -> bool:
        """Only with ``text_dense_features`` among its features, from ``featurizers`` (or all)."""
        wanted = {f for window in self.config.features for f in window}
        return DENSE in wanted and (not self.config.featurizers or origin in self.config.featurizers)

    # --- features ---------------------------------------------------------------------------
    def _token_values(self, message: Message) -> list[dict[str, Any]]:
        """Each token's own feature values (before windowing)."""
        tokens: list[Token] = message.tokens.get(TEXT, [])
        wanted = {f for window in self.config.features for f in window}
        dense = None
        if DENSE in wanted:
            origins = self.config.featurizers or None
            dense = message.features_for(TEXT, "sequence", sparse=False, origins=origins)
            if dense is not None and len(dense) != len(tokens):
                logger.warning(
                    f"{EXTRACTOR_NAME}: {len(dense)} dense feature rows for "
                    f"{len(tokens)} tokens in '{message.text}'; dense features are not used",
                )
                dense = None
        values = []
        for i, token in enumerate(tokens):
            text = token.text
            pos = token.data.get("pos")
            own: dict[str, Any] = {
                "low": text.lower(),
                "title": text.istitle(),
                "upper": text.isupper(),
                "digit": text.isdigit(),
                "prefix5": text[:5],
                "prefix2": text[:2],
                "suffix5": text[-5:],
                "suffix3": text[-3:],
                "suffix2": text[-2:],
                "suffix1": text[-1:],
                "bias": "bias",
                "pos": pos,
                "pos2": pos[:2] if pos is not None else None,
                "pattern": dict(token.data.get("pattern") or {}),
            }
            if dense is not None:
                own[DENSE] = {DENSE: {str(j): float(v) for j, v in enumerate(dense[i])}}
            values.append(own)
        return values

    def _sequence_features(
        self, values: list[dict[str, Any]], entity_tags: list[str] | None
    ) -> list[dict[str, Any]]:
        """CRFsuite feature dicts for each token, with the window and (for role and group
        CRFs) the entity tags."""
        half = len(self.config.features) // 2
        count = len(values)
        sequence = []
        for index in range(count):
            features: dict[str, Any] = {}
            for offset in range(-half, half + 1):
                other = index + offset
                if other >= count:
                    features["EOS"] = True
                    continue
                if other < 0:
                    features["BOS"] = True
                    continue
                names = list(self.config.features[offset + half])
                if entity_tags is not None:
                    names.append("entity")
                prefix = str(offset)
                for name in names:
                    if name == "pattern":
                        for pattern, matched in values[other]["pattern"].items():
                            features[f"{prefix}:pattern:{pattern}"] = bool(matched)
                    elif name == "entity":
                        if entity_tags is not None:
                            features[f"{prefix}:entity"] = entity_tags[other]
                    else:
                        value = values[other].get(name)
                        if value is not None:
                            features[f"{prefix}:{name}"] = value
            sequence.append(features)
        return sequence

    # --- training ---------------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        """Learn from every example; first, when an extractor before it recorded held-out
        entities (``entity_chooser``), learn from the rest and record its own for those examples,
        so that an ``EntityChooser`` can compare them."""
        examples = [m for m in data.messages if m.tokens.get(TEXT)]
        held = held_out_examples(examples)
        if held and len(held) < len(examples) and any(m.entities for m in examples):
            rest = [m for m in examples if not m.extra.get(HELD_OUT_ENTITIES)]
            self._train_on(rest, data)
            for message in held:
                record_held_out(message, EXTRACTOR_NAME, self._extract(message))
        self._train_on(examples, data)

    def _train_on(self, examples: list[Message], data: TrainingData) -> None:
        """Fit the CRFs (entity, and role and group when ``data`` has them) on ``examples``."""
        self.order_: list[str] = []
        self.models_: dict[str, bytes] = {}
        self._taggers: dict[str, Any] = {}
        self.trailing_punctuation_: dict[str, str] = {}
        if not any(m.entities for m in examples):
            return
        self._report_misaligned(examples)
        if self.config.BILOU_flag:
            self.trailing_punctuation_ = bilou.trailing_punctuation(
                (m.text, m.tokens[TEXT], m.entities) for m in examples
            )
        self.order_ = [
            name
            for name, present in zip(
                TAG_NAMES, (data.entity_types, data.roles, data.groups), strict=True
            )
            if present
        ]
        values = [self._token_values(m) for m in examples]
        bilou_flag = self.config.BILOU_flag
        gold = {
            name: [bilou.entity_tags(m.tokens[TEXT], m.entities, name, bilou_flag) for m in examples]
            for name in self.order_
        }
        for name in self.order_:
            entity_tags = gold["entity"] if name != "entity" else None
            xs = [
                self._sequence_features(v, entity_tags[i] if entity_tags is not None else None)
                for i, v in enumerate(values)
            ]
            self.models_[name] = self._fit(xs, gold[name])
        self._open_taggers()

    def _fit(self, xs: list[list[dict[str, Any]]], ys: list[list[str]]) -> bytes:
        import pycrfsuite

        trainer = pycrfsuite.Trainer(
            algorithm="lbfgs",
            params={
                "c1": float(self.config.L1_c),
                "c2": float(self.config.L2_c),
                "max_iterations": int(self.config.max_iterations),
                "feature.possible_transitions": True,
            },
            verbose=False,
        )
        for x, y in zip(xs, ys, strict=True):
            trainer.append(x, y)
        with tempfile.TemporaryDirectory(prefix="nlu-crf-") as tmp:
            path = Path(tmp) / "model.crfsuite"
            trainer.train(str(path))
            return path.read_bytes()

    def _open_taggers(self) -> None:
        import pycrfsuite

        self._taggers = {}
        for name in self.order_:
            tagger = pycrfsuite.Tagger()
            # CRFsuite reads the buffer in place: self.models_ keeps the bytes alive
            tagger.open_inmemory(self.models_[name])
            self._taggers[name] = tagger

    def _report_misaligned(self, examples: list[Message]) -> None:
        notice = bilou.misaligned_notice(EXTRACTOR_NAME, examples) if self.config.BILOU_flag else None
        if notice:
            logger.warning(notice)

    # --- inference --------------------------------------------------------------------------
    def _marginals(self, name: str, features: list[dict[str, Any]]) -> list[dict[str, float]]:
        tagger = self._taggers[name]
        labels = tagger.labels()
        tagger.set(features)
        return [{label: tagger.marginal(label, i) for label in labels} for i in range(len(features))]

    def _most_likely(self, marginals: list[dict[str, float]]) -> tuple[list[str], list[float]]:
        tags, confidences = [], []
        for token in marginals:
            tag = max(token, key=lambda label: token[label])
            tags.append(tag)
            if self.config.BILOU_flag:
                kind = bilou.tag_without_prefix(tag)
                confidences.append(sum(p for t, p in token.items() if bilou.tag_without_prefix(t) == kind))
            else:
                confidences.append(token[tag])
        return tags, confidences

    def predict_tags(self, message: Message) -> tuple[dict[str, list[str]], dict[str, list[float]]]:
        """Per CRF (``entity``, ``role``, ``group``): one tag and one confidence per token."""
        values = self._token_values(message)
        tags: dict[str, list[str]] = {}
        confidences: dict[str, list[float]] = {}
        for name in self.order_:
            entity_tags = tags.get("entity") if name != "entity" else None
            marginals = self._marginals(name, self._sequence_features(values, entity_tags))
            predicted, scores = self._most_likely(marginals)
            tags[name], confidences[name] = predicted, scores
        if self.config.BILOU_flag:  # repair each sequence (the entity tags were used raw above, as in Rasa)
            for name in self.order_:
                repaired, scores = bilou.ensure_consistent_bilou(tags[name], confidences[name])
                tags[name], confidences[name] = repaired, scores if scores is not None else []
        return tags, confidences

    def process(self, messages: list[Message]) -> None:
        if not hasattr(self, "order_"):
            raise RuntimeError(f"{EXTRACTOR_NAME} must be trained or loaded before use.")
        if not self.order_:
            return
        for message in messages:
            if message.tokens.get(TEXT):
                message.entities.extend(self._extract(message))

    def _extract(self, message: Message) -> list[dict[str, Any]]:
        """The entities of one tokenized message."""
        tags, confidences = self.predict_tags(message)
        return bilou.spans_to_entities(
            message.text,
            message.tokens[TEXT],
            tags,
            confidences,
            extractor=EXTRACTOR_NAME,
            split_entities_by_comma=self.config.split_entities_by_comma,
            bilou=self.config.BILOU_flag,
            trailing=self.trailing_punctuation_,
        )

    # --- persistence ------------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        order = getattr(self, "order_", [])
        for name in order:
            (Path(directory) / f"{name}.crfsuite").write_bytes(self.models_[name])
        labels = {name: list(self._taggers[name].labels()) for name in order}
        state = {
            "order": order,
            "labels": labels,
            "trailing_punctuation": getattr(self, "trailing_punctuation_", {}),
        }
        (Path(directory) / STATE_FILE).write_text(json.dumps(state, indent=1))

    @classmethod
    def load(cls, directory: Path, config: CRFEntityExtractor.Config) -> CRFEntityExtractor:
        extractor = cls(config)
        state = json.loads((Path(directory) / STATE_FILE).read_text(encoding="utf-8"))
        order = [str(name) for name in state.get("order", [])]
        unknown = [name for name in order if name not in TAG_NAMES]
        if unknown:
            raise ValueError(f"{STATE_FILE}: unknown CRF names {unknown}")
        extractor.order_ = order
        extractor.trailing_punctuation_ = bilou.stored_trailing_punctuation(
            state.get("trailing_punctuation"), STATE_FILE
        )
        extractor.models_ = {name: (Path(directory) / f"{name}.crfsuite").read_bytes() for name in order}
        extractor._open_taggers()
        return extractor

