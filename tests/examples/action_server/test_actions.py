"""The rasa-sdk action server of examples/action_server, run by rasa-sdk's ActionExecutor on
trackers whose messages are real nlu_engine parse output (the travel assistant's data, trained
with the CRF pipeline: no TensorFlow, deterministic)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from nlu_engine.assembly.model import Model, train
from tests.extras import requires_extra

# rasa_sdk, and the example's actions that import it, are imported inside the tests
pytestmark = requires_extra("actions")

ROOT = Path(__file__).resolve().parents[3]
PROJECT = ROOT / "examples" / "travel_assistant"
DOMAIN = yaml.safe_load((PROJECT / "domain.yml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("travel")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(PROJECT)  # the lookup files are relative to the project, as in Rasa
        return train("crf", "data", out=out, fixed_model_name="travel", log=None, domain="domain.yml")


@pytest.fixture(scope="module")
def model(model_path: Path) -> Model:
    return Model.load(model_path)


@pytest.fixture
def in_process(model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NLU_ENGINE_MODEL", str(model_path))


def tracker_state(parse: dict[str, Any], slots: dict[str, Any] | None = None,
                  form: str | None = None) -> dict[str, Any]:
    """What Rasa sends the action server: the tracker with the parse as the latest message; in a
    form, the slot candidates Rasa extracted follow the user event (as Rasa's FormAction does)."""
    slots = dict(slots or {})
    events: list[dict[str, Any]] = [
        {"event": "action", "name": "action_listen"},
        {"event": "user", "text": parse["text"], "parse_data": parse},
    ]
    events += [{"event": "slot", "name": name, "value": value} for name, value in slots.items()
               if name != "requested_slot"]
    return {"sender_id": "traveller", "slots": slots, "latest_message": copy.deepcopy(parse),
            "events": events, "paused": False, "followup_action": None,
            "active_loop": {"name": form} if form else {}, "latest_action_name": "action_listen"}


def run_action(name: str, state: dict[str, Any]) -> dict[str, Any]:
    from rasa_sdk.executor import ActionExecutor

    from examples.action_server import actions

    executor = ActionExecutor()
    executor.register_package(actions)
    call = {"next_action": name, "sender_id": state["sender_id"], "tracker": state,
            "domain": DOMAIN, "version": "3.6.21"}
    result = asyncio.run(executor.run(call))
    assert result is not None
    return result.model_dump() if hasattr(result, "model_dump") else dict(result)


def slot_events(result: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e["value"] for e in result["events"] if e["event"] == "slot"}


def test_our_parse_is_a_valid_latest_message(model: Model) -> None:
    from rasa_sdk import Tracker

    parse = model.parse("I want to fly from Berlin to Lisbon")
    tracker = Tracker.from_dict(tracker_state(parse))
    by_role = {role: list(tracker.get_latest_entity_values("city", entity_role=role))
               for role in ("departure", "destination")}
    assert by_role == {role: [e["value"] for e in parse["entities"]
                              if e["entity"] == "city" and e.get("role") == role]
                       for role in ("departure", "destination")}
    assert by_role["departure"] and by_role["destination"], parse["entities"]
    assert tracker.get_intent_of_latest_message() == parse["intent"]["name"]
    assert tracker.latest_message["intent_ranking"][0] == parse["intent"]


def test_the_fallback_intent_is_skipped_as_rasa_sdk_does(model: Model) -> None:
    from rasa_sdk import Tracker

    parse = model.parse("uh maybe somewhere like Vienna I guess")
    assert parse["intent"]["name"] == "nlu_fallback"  # the config's FallbackClassifier
    tracker = Tracker.from_dict(tracker_state(parse))
    assert tracker.get_intent_of_latest_message() == parse["intent_ranking"][1]["name"]
    assert tracker.get_intent_of_latest_message(skip_fallback_intent=False) == "nlu_fallback"


def test_the_form_pulls_a_city_out_of_a_free_text_answer(model: Model, in_process: None) -> None:
    from examples.action_server import actions

    answer = "uh, somewhere warm like Lisbon I guess"
    cities = actions.cities_in(model.parse(answer))
    assert cities, "the model finds no city in the answer"
    # Rasa's from_text mapping fills the slot with the whole answer; the validation narrows it
    state = tracker_state(model.parse(answer), {"destination": answer, "requested_slot": "destination"},
                          form="flight_form")
    result = run_action("validate_flight_form", state)
    assert slot_events(result)["destination"] == cities[0]
    assert result["responses"] == []


def test_an_answer_without_a_city_is_asked_again(model: Model, in_process: None) -> None:
    from examples.action_server import actions

    answer = "no idea honestly"
    assert actions.cities_in(model.parse(answer)) == []
    state = tracker_state(model.parse(answer), {"destination": answer, "requested_slot": "destination"},
                          form="flight_form")
    result = run_action("validate_flight_form", state)
    assert slot_events(result)["destination"] is None
    assert "didn't catch a city" in result["responses"][0]["text"]


def test_the_summary_reads_roles_and_groups(model: Model) -> None:
    text = "fly from Berlin to Lisbon and a double room with breakfast and a single room with parking"
    parse = model.parse(text)
    result = run_action("action_trip_summary", tracker_state(parse))
    entities = parse["entities"]
    role = {e["role"]: e["value"] for e in entities if e["entity"] == "city" and e.get("role")}
    assert slot_events(result) == {"departure": role.get("departure"), "destination": role.get("destination")}
    said = result["responses"][0]["text"]
    assert f"from {role['departure']} to {role['destination']}" in said
    groups = sorted({e["group"] for e in entities if e.get("group")})
    assert groups, "the model finds no grouped room entities"
    for group in groups:  # each group's room types and extras are said together
        members = [e["value"] for e in entities if e.get("group") == group]
        clause = next(c for c in said.split(", ") if members[0] in c)
        assert all(member in clause for member in members), (group, members, said)


@requires_extra("server", "uvicorn")
def test_the_action_server_can_ask_a_running_nlu_engine_server(
    model_path: Path, model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    from examples.action_server import actions
    from nlu_engine.server.process import ServerProcess

    with ServerProcess(["-m", str(model_path), "--auth-token", "t0k"]) as server:
        monkeypatch.delenv("NLU_ENGINE_MODEL", raising=False)
        monkeypatch.setenv("NLU_ENGINE_URL", server.url)
        monkeypatch.setenv("NLU_ENGINE_TOKEN", "t0k")
        text = "somewhere like Vienna"
        assert actions.parse(text) == model.parse(text)
