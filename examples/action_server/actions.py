"""Custom actions of the travel assistant (``examples/travel_assistant``), on rasa-sdk.

Rasa's dialogue server calls them through rasa-sdk's action server::

    rasa run actions --actions examples.action_server.actions     # port 5055

* ``validate_flight_form`` (a ``FormValidationAction``): the form asks "Where would you like to
  fly to?" and the ``destination`` slot takes the whole free-text answer (a ``from_text``
  mapping). The validation asks an nlu_engine model for the ``city`` entity in that answer, so
  "uh, somewhere warm like Lisbon I guess" fills the slot with "Lisbon".
* ``action_trip_summary``: reads the roles and groups of the latest message's entities (cities
  as ``departure`` / ``destination``, hotel rooms grouped with their extras), sets the
  ``departure`` and ``destination`` slots and says what it understood.

The model: ``$NLU_ENGINE_MODEL`` (an archive, loaded in this process with ``nlu_engine.load``),
else the server at ``$NLU_ENGINE_URL`` (default ``http://localhost:5005``, the one Rasa's
dialogue server uses), with ``$NLU_ENGINE_TOKEN`` in the JSON body when it needs a token.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Callable
from functools import cache
from typing import Any

from rasa_sdk import Action, FormValidationAction, Tracker
from rasa_sdk.events import SlotSet
from rasa_sdk.executor import CollectingDispatcher
from rasa_sdk.types import DomainDict

DEFAULT_URL = "http://localhost:5005"


@cache
def _local_parser(path: str) -> Callable[[str], dict[str, Any]]:
    import nlu_engine

    return nlu_engine.load(path).parse


def parse(text: str) -> dict[str, Any]:
    """nlu_engine's parse of ``text``: in process with ``$NLU_ENGINE_MODEL``, else over HTTP."""
    model = os.environ.get("NLU_ENGINE_MODEL")
    if model:
        return _local_parser(model)(text)
    url = os.environ.get("NLU_ENGINE_URL", DEFAULT_URL).rstrip("/") + "/model/parse"
    body = json.dumps({"text": text, "token": os.environ.get("NLU_ENGINE_TOKEN")}).encode("utf-8")
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def cities_in(result: dict[str, Any]) -> list[str]:
    """The ``city`` values of a parse result, destinations first (then cities without a role)."""
    cities = [e for e in result.get("entities", []) if e.get("entity") == "city"]
    order = {"destination": 0, None: 1}
    return [str(e["value"]) for e in sorted(cities, key=lambda e: order.get(e.get("role"), 2))]


class ValidateFlightForm(FormValidationAction):
    """Pulls the city out of a free-text answer to "Where would you like to fly to?"."""

    def name(self) -> str:
        return "validate_flight_form"

    def validate_destination(
        self, slot_value: Any, dispatcher: CollectingDispatcher, tracker: Tracker, domain: DomainDict
    ) -> dict[str, Any]:
        # the answer's own entities first (Rasa's from_entity mapping), else ask the model
        found = next(tracker.get_latest_entity_values("city", entity_role="destination"), None)
        if found is None and isinstance(slot_value, str) and slot_value.strip():
            found = next(iter(cities_in(parse(slot_value))), None)
        if found is None:
            dispatcher.utter_message(text="Sorry, I didn't catch a city. Where would you like to fly to?")
            return {"destination": None}
        return {"destination": found}


class ActionTripSummary(Action):
    """Says what the latest message asked for, from its entities' roles and groups."""

    def name(self) -> str:
        return "action_trip_summary"

    def run(
        self, dispatcher: CollectingDispatcher, tracker: Tracker, domain: DomainDict
    ) -> list[dict[str, Any]]:
        departure = next(tracker.get_latest_entity_values("city", entity_role="departure"), None)
        destination = next(tracker.get_latest_entity_values("city", entity_role="destination"), None)
        city = next(tracker.get_latest_entity_values("city"), None)  # a city without a role
        parts = []
        if departure or destination:
            parts.append(f"a flight from {departure or 'anywhere'} to {destination or 'anywhere'}")
        for group in room_groups(tracker):
            rooms = list(tracker.get_latest_entity_values("room_type", entity_group=group))
            extras = list(tracker.get_latest_entity_values("extra", entity_group=group))
            room = " and ".join(rooms) or "a"
            parts.append(f"{room} room" + (f" with {' and '.join(extras)}" if extras else ""))
        if city:
            parts.append(f"in {city}")
        intent = tracker.get_intent_of_latest_message()
        verb = "Booking" if intent in ("book_hotel", "book_flight") else "You mentioned"
        dispatcher.utter_message(text=f"{verb}: {', '.join(parts) or 'nothing I can book yet'}.")
        return [SlotSet("departure", departure), SlotSet("destination", destination)]


def room_groups(tracker: Tracker) -> list[str]:
    """The groups of the latest message's room entities, in the order they come."""
    groups: list[str] = []
    for entity in tracker.latest_message.get("entities", []):
        group = entity.get("group")
        if entity.get("entity") in ("room_type", "extra") and group is not None and group not in groups:
            groups.append(str(group))
    return groups
