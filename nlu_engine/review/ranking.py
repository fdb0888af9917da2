"""What a review of a logged message helps most: how unsure the model was of it.

A message's priority adds four signals the log holds: the fallback fired (``nlu_fallback`` or no
intent), a low confidence, a small margin between the top two intents, and a high out-of-scope
score. A group of near-duplicates takes its most unsure member's priority, raised a little with
its size (one decision labels all of it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

FALLBACK = "nlu_fallback"
LOW_CONFIDENCE = 0.5
SMALL_MARGIN = 0.2
OUT_OF_SCOPE_LIKE = 0.5
WEIGHTS = {"fallback": 1.0, "confidence": 0.4, "margin": 0.3, "out_of_scope": 0.3}


def top_two(ranking: Any) -> tuple[float, float]:
    """The two highest confidences of a logged ranking, the fallback's entry left out."""
    scores = sorted((float(entry["confidence"]) for entry in ranking or ()
                     if isinstance(entry, dict) and entry.get("name") != FALLBACK
                     and isinstance(entry.get("confidence"), int | float)), reverse=True)
    scores += [0.0, 0.0]
    return scores[0], scores[1]


def priority(message: dict[str, Any]) -> tuple[float, list[str]]:
    """A logged message's priority (higher: review it sooner) and the reasons shown for it."""
    fallback = message.get("intent") in (None, "", FALLBACK)
    first, second = top_two(message.get("intent_ranking"))
    confidence = message.get("confidence")
    confidence = first if fallback or not isinstance(confidence, int | float) else float(confidence)
    margin = first - second
    out_of_scope = message.get("out_of_scope")
    out_of_scope = float(out_of_scope) if isinstance(out_of_scope, int | float) else 0.0
    score = (WEIGHTS["fallback"] * fallback + WEIGHTS["confidence"] * (1.0 - confidence)
             + WEIGHTS["margin"] * (1.0 - margin) + WEIGHTS["out_of_scope"] * out_of_scope)
    reasons = [name for name, hit in (("fallback", fallback),
                                      ("low confidence", confidence < LOW_CONFIDENCE),
                                      ("small margin", margin < SMALL_MARGIN),
                                      ("out-of-scope-like", out_of_scope >= OUT_OF_SCOPE_LIKE)) if hit]
    return score, reasons


def group_score(top: float, size: int) -> float:
    """The score a group of ``size`` messages whose most unsure one's priority is ``top`` is
    shown and ordered by: ``top * (1 + log2(size) / 4)``, to 4 places."""
    return round(top * (1.0 + math.log2(size) / 4), 4)


def group_priority(members: Sequence[dict[str, Any]]) -> tuple[float, list[str]]:
    """A group's priority (:func:`group_score`) and its most unsure member's reasons."""
    scored = [priority(member) for member in members]
    score, reasons = max(scored, key=lambda pair: pair[0])
    return group_score(score, len(members)), reasons
