"""KeywordIntentClassifier: an intent whose example text occurs as a whole word in the message.

Keyword matching gives a match, not probabilities, so nothing can be calibrated: with
``calibration`` on (the default of every intent classifier) it says so once at training, and
its archive marks its confidences uncalibrated (``calibration.json``, ``examples`` 0, with the
reason in its notes).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from nlu_engine.classifiers.calibration import Calibration
from nlu_engine.contract.component import IntentClassifier
from nlu_engine.contract.errors import NOTICE
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData

logger = logging.getLogger(__name__)


class KeywordIntentClassifier(IntentClassifier):
    """Rasa's keyword matcher: one matching intent gives confidence 1.0, none or several None."""

    @dataclass(frozen=True, kw_only=True)
    class Config(IntentClassifier.Config):
        case_sensitive: bool = True

    config: Config
    #: a match is not a probability: there is nothing to calibrate
    calibrates = False
    #: no match keeps what an earlier classifier predicted
    replaces_ranking = False
    #: what the archive says of its confidences
    UNCALIBRATED = Calibration(notes={"uncalibrated": "keyword matching gives no probabilities"})

    def train(self, data: TrainingData) -> None:
        if self.config.calibration:
            logger.log(NOTICE, "%s: keyword matching gives a match, not probabilities; its "
                       "confidences (1.0 on a match) are not calibrated", self.component_name())
        self.keywords_: dict[str, str] = {}
        for message in data.intent_examples:
            previous = self.keywords_.get(message.text)
            if previous is not None and previous != message.intent:
                logger.warning(
                    f"KeywordIntentClassifier: '{message.text}' is an example of both "
                    f"'{previous}' and '{message.intent}'; keeping '{message.intent}'",
                )
            self.keywords_[message.text] = str(message.intent)
        self._compile()

    def _compile(self) -> None:
        flags = 0 if self.config.case_sensitive else re.IGNORECASE
        self._patterns = [
            (re.compile(r"\b" + re.escape(keyword) + r"\b", flags), intent)
            for keyword, intent in self.keywords_.items()
        ]

    def process(self, messages: list[Message]) -> None:
        for message in messages:
            hits = {intent for pattern, intent in self._patterns if pattern.search(message.text)}
            # As in Rasa: a match always sets the intent; no match (or an ambiguous one) keeps
            # what an earlier classifier predicted, and the ranking is left as it is.
            if len(hits) == 1:
                message.intent, message.intent_confidence = hits.pop(), 1.0
            elif message.intent is None:
                message.intent_confidence = 0.0

    def persist(self, directory: Path) -> None:
        (directory / "keywords.json").write_text(json.dumps(self.keywords_, ensure_ascii=False))
        self.UNCALIBRATED.persist(directory)

    @classmethod
    def load(cls, directory: Path, config: KeywordIntentClassifier.Config) -> KeywordIntentClassifier:
        component = cls(config)
        keywords = json.loads((directory / "keywords.json").read_text(encoding="utf-8"))
        if not isinstance(keywords, dict):
            raise ValueError("keywords.json must be a mapping")
        component.keywords_ = {str(k): str(v) for k, v in keywords.items()}
        component._compile()
        return component
