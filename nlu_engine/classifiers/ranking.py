"""Intent ranking shared by every intent classifier (Rasa's ``rank_and_mask``)."""

from __future__ import annotations

import numpy as np

from nlu_engine.contract.message import Message


def write_intent(
    message: Message,
    names: list[str],
    confidences: np.ndarray,
    ranking_length: int = 10,
    renormalize: bool = False,
) -> None:
    """Set ``intent``, ``intent_confidence`` and the top ``ranking_length`` ranking (0 = all).

    Without ``renormalize`` the confidences outside the top k are dropped and the rest are kept
    as they are (so the ranking need not sum to 1), as Rasa does.
    """
    order = np.argsort(-confidences, kind="stable")
    if 0 < ranking_length < len(order):
        order = order[:ranking_length]
    kept = confidences[order].astype(np.float64)
    if renormalize and kept.sum() > 0:
        kept = kept / kept.sum()
    ranking = [
        {"name": names[i], "confidence": float(c)} for i, c in zip(order, kept, strict=True)
    ]
    message.intent_ranking = ranking
    if ranking:
        message.intent = ranking[0]["name"]
        message.intent_confidence = ranking[0]["confidence"]
    else:
        message.intent, message.intent_confidence = None, 0.0
