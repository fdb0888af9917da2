"""A custom component: marks opinion words as ``sentiment`` entities.

Use it in a config.yml by its import path (run nlu-engine from the folder that holds
``examples/``, or install your package)::

    pipeline:
      - name: WhitespaceTokenizer
      - name: CountVectorsFeaturizer
      - name: LogisticRegressionClassifier
      - name: examples.custom_components.sentiment.SentimentAnalyzer
        negative_words: [awful, slow, rude]

"the food was not good" then gets ``{"entity": "sentiment", "value": "negative", ...}`` on
"good" (a negation word just before flips the polarity).

It shows the whole component contract in a few lines:

- hyperparameters are the fields of a nested ``Config``, a frozen dataclass: a type and a
  default each, bounds with ``param(..., low=, high=)`` and checks between fields in
  ``validate``; the config.yml is validated against it before anything trains, and the
  component reads them as ``self.config.<name>``;
- ``requires`` / ``provides`` let the pipeline check the order when it is built;
- ``train`` learns state into attributes ending in ``_``: here, the words the training data
  annotates as ``sentiment`` entities are added to the lexicon;
- ``process`` handles a batch and only adds what it provides (entities);
- ``persist`` writes JSON into its own folder and ``load`` reads it back: no pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from nlu_engine.contract.component import ENTITIES, TOKENS, EntityExtractor, param
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.training_data import TrainingData

ENTITY = "sentiment"
LEXICON_FILE = "lexicon.json"
Polarity = Literal["positive", "negative"]
FLIP: dict[str, Polarity] = {"positive": "negative", "negative": "positive"}


class SentimentAnalyzer(EntityExtractor):
    """Lexicon-based sentiment: each opinion word becomes a ``sentiment`` entity."""

    requires: ClassVar[tuple[str, ...]] = (TOKENS,)
    provides: ClassVar[tuple[str, ...]] = (ENTITIES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(EntityExtractor.Config):
        positive_words: list[str] = param(["good", "great", "excellent", "love", "nice", "awesome"])
        negative_words: list[str] = param(["bad", "terrible", "awful", "hate", "poor", "horrible"])
        negations: list[str] = param(["not", "never", "no", "don't", "isn't", "wasn't"])
        negation_window: int = param(1, low=0, high=5)
        learn_from_data: bool = True

        def validate(self) -> None:
            super().validate()
            both = {w.lower() for w in self.positive_words} & {w.lower() for w in self.negative_words}
            if both:
                raise ConfigError(
                    f"positive_words and negative_words share {', '.join(sorted(both))}; "
                    "keep each word in one list"
                )

    config: Config

    def train(self, data: TrainingData) -> None:
        lexicon: dict[str, Polarity] = {w.lower(): "positive" for w in self.config.positive_words}
        lexicon.update({w.lower(): "negative" for w in self.config.negative_words})
        if self.config.learn_from_data:
            for message in data.messages:
                for entity in message.entities:
                    if entity["entity"] == ENTITY and entity.get("value") in FLIP:
                        word = message.text[entity["start"] : entity["end"]].lower()
                        lexicon[word] = entity["value"]
        self.lexicon_ = dict(sorted(lexicon.items()))

    def process(self, messages: list[Message]) -> None:
        negations = {w.lower() for w in self.config.negations}
        for message in messages:
            tokens = message.tokens.get(TEXT, [])
            for i, token in enumerate(tokens):
                polarity = self.lexicon_.get(token.text.lower())
                if polarity is None:
                    continue
                before = tokens[max(0, i - self.config.negation_window) : i]
                if any(t.text.lower() in negations for t in before):
                    polarity = FLIP[polarity]
                message.entities.append(
                    {
                        "entity": ENTITY,
                        "start": token.start,
                        "end": token.end,
                        "value": polarity,
                        "confidence_entity": 1.0,
                        "extractor": self.component_name(),
                    }
                )

    def persist(self, directory: Path) -> None:
        (directory / LEXICON_FILE).write_text(json.dumps(self.lexicon_, ensure_ascii=False, indent=1))

    @classmethod
    def load(cls, directory: Path, config: SentimentAnalyzer.Config) -> SentimentAnalyzer:
        component = cls(config)
        lexicon = json.loads((directory / LEXICON_FILE).read_text(encoding="utf-8"))
        if not isinstance(lexicon, dict) or not set(lexicon.values()) <= set(FLIP):
            raise ValueError(f"{LEXICON_FILE} must map words to 'positive' or 'negative'")
        component.lexicon_ = {str(word): polarity for word, polarity in lexicon.items()}
        return component
