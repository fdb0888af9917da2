"""Messages that name their intent: ``/greet``, ``/inform{"city": "Paris"}``, ``/deny@0.7``.

Rasa's buttons send their payload as the user's message, and users type ``/restart``. Rasa's NLU
answers such a message with the intent it names (confidence 1.0, or the ``@`` value) and the
entities of its JSON object, instead of what the model predicts (``RegexMessageHandler``, built
on ``YAMLStoryReader.unpack_regex_message``). When Rasa's dialogue server uses an NLU server,
these messages come to ``/model/parse`` like any other, so the engine answers them the same way.

As in Rasa: the intent must be known (the model's intents, the domain's and Rasa's default
intents), or the message is parsed as text; entity types the domain does not list are dropped
when a domain is known; a value list gives one entity per value; every entity spans the JSON
object; a confidence above 1 is 1, one that is not a number is 0.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection
from typing import Any

logger = logging.getLogger(__name__)

INTENT_MESSAGE_PREFIX = "/"
EXTRACTOR = "RegexMessageHandler"
# Rasa's pattern: /<intent>[@<confidence>][{<json>}]<rest>
PATTERN = re.compile(r"^/(?P<intent>[^{@]+)(?P<confidence>@[0-9.]+)?(?P<entities>{.+})?(?P<rest>.*)")


def unpack_intent_message(
    text: str, intents: Collection[str], entities: Collection[str] | None = None
) -> dict[str, Any] | None:
    """The parse result of a ``/intent...`` message, or None for any other text.

    ``intents``: the intents such a message may name; ``entities``: the entity types it may set
    (None: any).
    """
    user_text = text.strip()
    if not user_text.startswith(INTENT_MESSAGE_PREFIX):
        return None
    match = PATTERN.match(user_text)
    if match is None:
        return None
    intent = match.group("intent").strip()
    if intent not in intents:
        logger.warning(f"'{user_text[:80]}' names intent '{intent[:40]}', which the model does not "
                       "know; it is parsed as text")
        return None
    if match.group("rest"):
        logger.warning(f"'{user_text[:80]}': ignored what follows the intent, confidence and "
                       "entities ({match.group('rest')[:40]!r})")
    confidence = _confidence(match.group("confidence"))
    found = _entities(match, entities)
    return {
        "text": user_text,
        "intent": {"name": intent, "confidence": confidence},
        "intent_ranking": [{"name": intent, "confidence": confidence}],
        "entities": found,
    }


def _confidence(raw: str | None) -> float:
    if raw is None:
        return 1.0
    try:
        return min(1.0, float(raw[1:]))
    except ValueError:
        return 0.0


def _entities(match: re.Match[str], allowed: Collection[str] | None) -> list[dict[str, Any]]:
    raw = match.group("entities")
    if raw is None:
        return []
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        logger.warning(f"'{match.string[:80]}': the entities are not a JSON object; left out")
        return []
    start, end = match.start("entities"), match.end("entities")
    found = []
    for entity_type, values in parsed.items():
        if allowed is not None and entity_type not in allowed:
            logger.warning(f"'{match.string[:80]}': entity '{str(entity_type)[:40]}' is not in the "
                           "domain; left out")
            continue
        for value in values if isinstance(values, list) else [values]:
            found.append({"entity": entity_type, "value": value, "start": start, "end": end,
                          "extractor": EXTRACTOR})
    return found
