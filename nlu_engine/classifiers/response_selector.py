"""ResponseSelector: picks the response of a retrieval intent (``faq/ask_name``), as Rasa does.

Training examples of a retrieval intent carry ``intent`` ``faq`` and ``intent_response_key``
``faq/ask_name``; the responses come from a ``responses:`` section (``utter_faq/ask_name``).
The selector is DIET in its bag-of-features form (no transformer by default, two hidden layers
per side) trained on the response keys: text features on one side and, on the other, the
features of the key's tokens (``faq``, ``ask_name``; one-hot when no featurizer gives them).
With ``use_text_as_label`` the labels are the response texts instead, described by a bag of
their words.

It never touches ``intent`` or ``entities``; it writes ``message.response_selector`` in Rasa's
form, merged with what other selectors wrote::

    {"all_retrieval_intents": ["faq"],
     "default": {"response": {"responses": [{"text": "I'm a bot."}], "confidence": 0.93,
                              "intent_response_key": "faq/ask_name",
                              "utter_action": "utter_faq/ask_name"},
                 "ranking": [{"confidence": 0.93, "intent_response_key": "faq/ask_name"}, ...]}}

under ``retrieval_intent`` instead of ``default`` when that is set (the selector then trains on
that retrieval intent's examples only). Data without retrieval intents trains nothing and the
selector writes nothing.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from nlu_engine.classifiers.diet.component import DIETClassifier
from nlu_engine.classifiers.diet.encoding import text_features
from nlu_engine.classifiers.ranking import write_intent
from nlu_engine.contract.component import (
    FEATURES,
    RESPONSE,
    Component,
    FinetuneOptions,
    TrainableEncoder,
    param,
)
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import INTENT_RESPONSE_KEY, TEXT, Message
from nlu_engine.contract.training_data import TrainingData

logger = logging.getLogger(__name__)

DEFAULT_SELECTOR = "default"
RESPONSES_FILE = "responses.json"
SELECTOR_FILE = "selector.json"
#: dense and concat widths Rasa's ResponseSelector uses for an attribute not configured
DEFAULT_WIDTH = 512
_WORD = re.compile(r"\w+")


def utter_action(intent_response_key: str) -> str:
    """``faq/ask_name`` -> ``utter_faq/ask_name`` (the key of its responses)."""
    return f"utter_{intent_response_key}"


class ResponseSelector(DIETClassifier):
    """Rasa's ResponseSelector: DIET trained on retrieval-intent response keys.

    Hyperparameters: every DIETClassifier parameter, with Rasa's ResponseSelector defaults
    where they differ (hidden layers [256, 128] per side, no transformer, dense / concat widths
    512, ``scale_loss``, a constant learning rate, no input dropout, Rasa's L2 rule
    ``sparse_regularization: rasa``) and our DIET defaults
    otherwise (``epochs`` 20, more on small data, ``random_seed`` 42, a softmax over every
    response when there are more than ``number_of_negative_examples``), plus
    ``retrieval_intent`` and ``use_text_as_label``. Entity recognition is always off:
    ``entity_recognition`` and ``intent_classification`` accept only the values it uses.
    """

    provides = (RESPONSE,)
    requires = (FEATURES,)

    #: the label features: the tokens of ``faq/ask_name``
    label_attribute = INTENT_RESPONSE_KEY
    default_widths: ClassVar[dict[str, int]] = {"text": DEFAULT_WIDTH, "label": DEFAULT_WIDTH}
    in_scope_score = False  # the intent classifier says whether the message is in scope
    uses_sentence_head = False
    records_intent_scores = False  # its labels are responses, not intents

    @dataclass(frozen=True, kw_only=True)
    class Config(DIETClassifier.Config):
        """DIET's parameters with Rasa's ResponseSelector defaults (DIET's bounds and ``validate``
        still apply), then the selector's own two."""

        hidden_layers_sizes: dict[str, list[int]] = param({"text": [256, 128], "label": [256, 128]})
        transformer_size: int | None = None  # 256 when number_of_transformer_layers > 0
        number_of_transformer_layers: int = 0
        dense_dimension: dict[str, int] = param({"text": DEFAULT_WIDTH, "label": DEFAULT_WIDTH})
        concat_dimension: dict[str, int] = param({"text": DEFAULT_WIDTH, "label": DEFAULT_WIDTH})
        scale_loss: bool = True
        learning_rate_schedule: Literal["constant", "linear_decay"] = "constant"  # Rasa's
        # DIET's default: a softmax over every response when there are more than 20 of them
        use_all_labels_as_negatives: bool | Literal["auto"] = "auto"
        use_sparse_input_dropout: bool = False
        use_dense_input_dropout: bool = False
        # Rasa's trainer adds a weight's L2 gradient only where the loss's is positive: the
        # selectors learn faster so (Rasa's demo bot, BENCHMARKS.md); DIET keeps its whole-table L2
        sparse_regularization: Literal["all_rows", "touched_rows", "rasa"] = "rasa"
        # fixed: Rasa overrides other values silently, here they are refused
        intent_classification: Literal[True] = True
        entity_recognition: Literal[False] = False
        retrieval_intent: str | None = None
        use_text_as_label: bool = False

    config: Config

    def accept_trainable_encoder(self, encoder: TrainableEncoder) -> bool:
        """No: the selector trains on the retrieval intents' examples only; DIET fine-tunes."""
        return False

    # --- names ------------------------------------------------------------------------------
    @property
    def selector_key(self) -> str:
        """Where the prediction goes in ``response_selector``: the retrieval intent or default."""
        return self.config.retrieval_intent or DEFAULT_SELECTOR

    def _name(self) -> str:
        intent = self.config.retrieval_intent
        return f"ResponseSelector({intent})" if intent else "ResponseSelector"

    # --- labels -----------------------------------------------------------------------------
    def response_key_of(self, message: Message) -> str | None:
        """The example's ``faq/ask_name`` when this selector trains on it, else None."""
        key = message.intent_response_key
        if not key or "/" not in key:
            return None
        if self.config.retrieval_intent and key.split("/", 1)[0] != self.config.retrieval_intent:
            return None
        return key

    def label_of(self, message: Message) -> str | None:
        """The response key, or with ``use_text_as_label`` the key's response text."""
        key = self.response_key_of(message)
        if key is None or not self.config.use_text_as_label:
            return key
        return self._response_text(key)

    def _response_text(self, key: str) -> str:
        """The first response text of ``key`` (Rasa's training label), else the key itself."""
        for response in self.responses_.get(utter_action(key), []):
            if isinstance(response, dict) and isinstance(response.get("text"), str):
                return str(response["text"])
        return key

    def _key_of_label(self, label: str) -> str:
        """The response key a predicted label stands for (Rasa's ``_resolve_intent_response_key``)."""
        if not self.config.use_text_as_label:
            return label
        for action, responses in self.responses_.items():
            key = action.removeprefix("utter_")
            if key == label or any(
                isinstance(r, dict) and r.get("text") == label for r in responses
            ):
                return key
        return label

    def _label_features(self, examples: list[Message]) -> np.ndarray:
        """Response keys: their token features (DIET's rule). Response texts: bag of words."""
        if not self.config.use_text_as_label:
            return super()._label_features(examples)
        words = [[w.lower() for w in _WORD.findall(label)] for label in self.intents_]
        vocabulary = {w: i for i, w in enumerate(sorted({w for ws in words for w in ws}))}
        bags = np.zeros((len(self.intents_), len(vocabulary)), np.float32)
        for row, label_words in enumerate(words):
            for word in label_words:
                bags[row, vocabulary[word]] += 1.0
        self.label_blocks_ = None  # rebuilt from the texts on every training: cannot resume
        # one-hot columns keep texts with the same bag of words apart
        return np.concatenate([bags, np.eye(len(self.intents_), dtype=np.float32)], axis=1)

    def _warn_about_transformer(self) -> None:
        if self.config.number_of_transformer_layers <= 0:
            return
        name = self._name()
        if self.config.transformer_size is None:
            logger.warning(
                f"{name}: number_of_transformer_layers > 0 needs a transformer_size; "
                "using 256",
            )
        if any(self.config.hidden_layers_sizes.get(side) for side in ("text", "label")):
            logger.warning(
                f"{name}: with a transformer, hidden_layers_sizes "
                f"{self.config.hidden_layers_sizes} usually hurt; Rasa recommends "
                "{text: [], label: []}",
            )

    # --- training ---------------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        if self._prepare_labels(data):
            super().train(data)

    def finetune(self, data: TrainingData, previous: Component, options: FinetuneOptions) -> None:
        """DIET's fine-tuning over the response keys; nothing to do without retrieval intents."""
        if self._prepare_labels(data):
            super().finetune(data, previous, options)

    def data_fingerprint(self, data: TrainingData) -> str:
        """The examples and the responses section."""
        return TrainingData(messages=data.messages, responses=data.responses).fingerprint()

    def _prepare_labels(self, data: TrainingData) -> bool:
        """Retrieval intents and responses from ``data``; whether it has examples to train on."""
        self.all_retrieval_intents_ = sorted(
            {
                str(m.intent_response_key).split("/", 1)[0]
                for m in data.messages
                if m.intent_response_key and "/" in m.intent_response_key
            }
        )
        keys = sorted({k for m in data.messages if (k := self.response_key_of(m))})
        self.responses_ = {
            utter_action(k): copy.deepcopy(data.responses[utter_action(k)])
            for k in keys
            if data.responses.get(utter_action(k))
        }
        examples = [m for m in data.messages if self.label_of(m) and m.tokens.get(TEXT)]
        if not examples:
            self.intents_ = []
            if self.config.retrieval_intent:
                logger.warning(
                    f"{self._name()}: no training examples of retrieval intent "
                    f"'{self.config.retrieval_intent}' (retrieval intents in the data: "
                    f"{', '.join(self.all_retrieval_intents_) or 'none'}); nothing is trained",
                )
            return False
        missing = [k for k in keys if utter_action(k) not in self.responses_]
        if missing:
            shown = ", ".join(utter_action(k) for k in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            logger.warning(
                f"{self._name()}: no responses for {shown}{more}; add them under "
                "'responses:' in the data or domain (the key is returned as the response text)",
            )
        self._check_features(examples[0])
        self._warn_about_transformer()
        return True

    def _check_features(self, example: Message) -> None:
        origins = self.config.featurizers or None
        has = {
            kind: any(text_features(example, kind, sparse, origins) is not None for sparse in (True, False))
            for kind in ("sequence", "sentence")
        }
        if not (has["sequence"] or has["sentence"]):
            raise ConfigError(
                f"{self._name()}: the messages have no features; add a featurizer such as "
                "CountVectorsFeaturizer before ResponseSelector"
            )
        if self.config.number_of_transformer_layers == 0 and not has["sentence"]:
            raise ConfigError(
                f"{self._name()}: without a transformer (number_of_transformer_layers: 0) it "
                "reads sentence features, and no featurizer gives them; add "
                "CountVectorsFeaturizer or set number_of_transformer_layers"
            )

    # --- prediction -------------------------------------------------------------------------
    def process(self, messages: list[Message]) -> None:
        if not hasattr(self, "intents_"):
            raise RuntimeError("ResponseSelector must be trained or loaded before use.")
        if not self.intents_:
            return  # no retrieval intents in the training data
        todo = [m for m in messages if m.tokens.get(TEXT)]
        if not todo:
            return
        for message, result in zip(todo, self.predict_arrays(todo), strict=True):
            confidences = result.get("intent", np.ones(len(self.intents_)))
            confidences = self.calibration_.apply(confidences[None], None)[0]
            ranked = Message(text="")  # the shared ranking rule (top k, optional renormalising)
            write_intent(ranked, self.intents_, confidences, self.config.ranking_length,
                         self.config.renormalize_confidences)
            top = ranked.intent_ranking[0]
            key = self._key_of_label(top["name"])
            responses = self.responses_.get(utter_action(key)) or [{"text": key}]
            selector = dict(message.response_selector or {})
            selector["all_retrieval_intents"] = list(self.all_retrieval_intents_)
            selector[self.selector_key] = {
                "response": {
                    "responses": copy.deepcopy(responses),
                    "confidence": top["confidence"],
                    "intent_response_key": key,
                    "utter_action": utter_action(key),
                },
                "ranking": [
                    {"confidence": r["confidence"], "intent_response_key": self._key_of_label(r["name"])}
                    for r in ranked.intent_ranking
                ],
            }
            message.response_selector = selector

    # --- persistence ------------------------------------------------------------------------
    def persist(self, directory: Path) -> None:
        directory = Path(directory)
        trained = bool(self.intents_)
        state = {"all_retrieval_intents": self.all_retrieval_intents_, "trained": trained}
        (directory / SELECTOR_FILE).write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
        (directory / RESPONSES_FILE).write_text(
            json.dumps(self.responses_, ensure_ascii=False), encoding="utf-8"
        )
        if trained:
            super().persist(directory)

    @classmethod
    def load(cls, directory: Path, config: ResponseSelector.Config) -> ResponseSelector:
        directory = Path(directory)
        state = json.loads((directory / SELECTOR_FILE).read_text(encoding="utf-8"))
        responses = json.loads((directory / RESPONSES_FILE).read_text(encoding="utf-8"))
        component: Any
        if state["trained"]:
            component = super().load(directory, config)
        else:
            component = cls(config)
            component.intents_ = []
        component.all_retrieval_intents_ = [str(i) for i in state["all_retrieval_intents"]]
        component.responses_ = {str(k): list(v) for k, v in responses.items()}
        return component
