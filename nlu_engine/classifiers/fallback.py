"""FallbackClassifier: predict ``nlu_fallback`` when the intent classifier is unsure.

A message falls back when its intent confidence is below ``threshold``, or when the top two
intents of its ranking are closer than ``ambiguity_threshold``. Its intent then becomes
``{"name": "nlu_fallback", "confidence": threshold}`` and the same entry is inserted at the
top of ``intent_ranking`` (Rasa 3 behaviour; the original ranking follows it). A message with
no intent prediction (confidence 0) falls back too. Nothing is learned or persisted.
"""

from __future__ import annotations

from dataclasses import dataclass

from nlu_engine.contract.component import INTENT, Component, param
from nlu_engine.contract.message import Message

FALLBACK_INTENT = "nlu_fallback"


class FallbackClassifier(Component):
    """Replaces low-confidence or ambiguous intent predictions by ``nlu_fallback``."""

    requires = (INTENT,)
    provides = (INTENT,)
    learns_from_data = False

    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        threshold: float = param(0.3, low=0.0, high=1.0)
        ambiguity_threshold: float = param(0.1, low=0.0, high=1.0)

    config: Config

    def should_fallback(self, message: Message) -> bool:
        """Whether the message's intent prediction is too unsure to keep."""
        if float(message.intent_confidence) < self.config.threshold:
            return True
        ranking = message.intent_ranking
        if len(ranking) >= 2:
            first = float(ranking[0].get("confidence", 1.0))
            second = float(ranking[1].get("confidence", 1.0))
            return first - second < self.config.ambiguity_threshold
        return False

    def process(self, messages: list[Message]) -> None:
        for message in messages:
            if not self.should_fallback(message):
                continue
            confidence = float(self.config.threshold)
            message.intent = FALLBACK_INTENT
            message.intent_confidence = confidence
            message.intent_response_key = None
            message.intent_ranking = [
                {"name": FALLBACK_INTENT, "confidence": confidence},
                *message.intent_ranking,
            ]


def undo_fallback_prediction(message: Message) -> None:
    """Restore the prediction the fallback replaced (Rasa's ``undo_fallback_prediction``)."""
    ranking = message.intent_ranking
    if not ranking or ranking[0].get("name") != FALLBACK_INTENT:
        return
    message.intent_ranking = ranking[1:]
    if message.intent_ranking:
        message.intent = message.intent_ranking[0]["name"]
        message.intent_confidence = float(message.intent_ranking[0]["confidence"])
    else:
        message.intent, message.intent_confidence = None, 0.0
