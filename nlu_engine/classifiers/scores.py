"""The intent scores a scorer leaves for the combiner (``classifiers/combiner.py``).

An intent classifier that can be one member of a combination (DIET) records, besides the ranking
it writes, its raw probabilities over all its intents on each message in ``Message.extra``:

* on a **training example** it held out (its calibration share), the prediction it made before
  it learned from that example: an honest, held-out prediction the combiner may fit its weights
  on;
* on a **parsed message**, its prediction for it.

Raw means before calibration: the combiner weighs the members' log probabilities and calibrates
what it makes once. Nothing here is ever stored in an archive.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nlu_engine.contract.message import Message

#: the key of ``Message.extra`` the scores are kept under: scorer name -> (intents, probabilities)
INTENT_SCORES = "intent_scores"


def record(message: Message, scorer: str, intents: Sequence[str], probabilities: np.ndarray) -> None:
    """Keep ``scorer``'s raw probabilities [N] over ``intents`` [N] on ``message``."""
    scores = message.extra.setdefault(INTENT_SCORES, {})
    scores[scorer] = (tuple(intents), np.asarray(probabilities, np.float64))


def scorers_on(messages: Sequence[Message]) -> list[str]:
    """The scorers that left scores on any of ``messages``, in the order first seen."""
    seen: dict[str, None] = {}
    for message in messages:
        for name in message.extra.get(INTENT_SCORES, {}):
            seen.setdefault(name, None)
    return list(seen)


def gather(messages: Sequence[Message], scorer: str, intents: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(probabilities [B, N] over ``intents``, a flag [B] for the messages ``scorer`` scored).
    An intent the scorer does not know gets nothing; rows of unscored messages are uniform."""
    column = {name: i for i, name in enumerate(intents)}
    out = np.full((len(messages), len(intents)), 1.0 / max(len(intents), 1))
    present = np.zeros(len(messages), bool)
    for row, message in enumerate(messages):
        entry = message.extra.get(INTENT_SCORES, {}).get(scorer)
        if entry is None:
            continue
        names, probabilities = entry
        out[row] = 0.0
        for name, p in zip(names, probabilities, strict=True):
            if name in column:
                out[row, column[name]] = p
        present[row] = True
    return out, present
