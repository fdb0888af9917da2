"""Rasa's dialogue server as the client of ``nlu-engine serve``.

With ``nlu: url: ... token: ...`` in ``endpoints.yml``, Rasa 3.6 parses every user message
through ``RasaNLUHttpInterpreter``: an aiohttp POST of ``{"token", "text", "message_id"}`` to
``<url>/model/parse`` (the token in the JSON body), the JSON of a 200 answer as the parse data,
and for any other status an empty intent. :func:`rasa_http_parse` is that request, as Rasa's
code makes it; the checks after it read what Rasa's ``MessageProcessor`` reads.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.server.process import ServerProcess
from tests.extras import requires_extra

# aiohttp: the client Rasa's interpreter uses (the dev extra's, as the other test-only clients)
pytestmark = [requires_extra("server"), requires_extra("dev", "aiohttp")]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "rasa-nlu-token"
# Rasa's fallback parse when the NLU server does not answer 200 (http_interpreter.py)
RASA_DEFAULT = {"intent": {"name": "", "confidence": 0.0}, "entities": [], "text": ""}


async def rasa_http_parse(url: str, token: str | None, text: str, message_id: str) -> dict[str, Any]:
    """``RasaNLUHttpInterpreter.parse`` of Rasa 3.6 (rasa/core/http_interpreter.py)."""
    import aiohttp  # outside the try: a missing aiohttp is no fallback

    params = {"token": token, "text": text, "message_id": message_id}
    url = url + "model/parse" if url.endswith("/") else url + "/model/parse"
    try:
        async with aiohttp.ClientSession() as session, session.post(url, json=params) as resp:
            if resp.status == 200:
                return await resp.json()  # type: ignore[no-any-return]
            return RASA_DEFAULT
    except Exception:  # Rasa catches everything and falls back
        return RASA_DEFAULT


def rasa_parse(url: str, token: str | None, text: str) -> dict[str, Any]:
    return asyncio.run(rasa_http_parse(url, token, text, "conversation-1"))


@pytest.fixture(scope="module")
def crf_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SVM intents and CRF entities with roles and groups, on the example assistant (no TensorFlow)."""
    out = tmp_path_factory.mktemp("crf")
    return train("crf", ROOT / "data" / "nlu.yml", out=out, fixed_model_name="crf", log=None)


@pytest.fixture(scope="module")
def open_server(crf_model: Path) -> Any:
    with ServerProcess(["-m", str(crf_model)]) as running:
        yield running


@pytest.fixture(scope="module")
def token_server(crf_model: Path) -> Any:
    with ServerProcess(["-m", str(crf_model), "--auth-token", TOKEN, "--access-log"]) as running:
        yield running


def test_rasas_request_without_a_token(open_server: ServerProcess, crf_model: Path) -> None:
    model = Model.load(crf_model)
    text = "fly from Berlin to Paris tomorrow"
    parse_data = rasa_parse(open_server.url, None, text)
    assert parse_data == model.parse(text)
    # what Rasa's MessageProcessor and UserUttered read
    assert parse_data["intent"]["name"] == "book_flight" and parse_data["text"] == text
    cities = {e["role"]: e["value"] for e in parse_data["entities"] if e["entity"] == "city"}
    assert cities == {"departure": "Berlin", "destination": "Paris"}
    assert rasa_parse(open_server.url + "/", None, text) == parse_data  # a trailing slash, as Rasa joins


def test_rasas_request_with_the_token_in_the_body(token_server: ServerProcess, crf_model: Path) -> None:
    text = "I want a large pepperoni"
    parse_data = rasa_parse(token_server.url, TOKEN, text)
    assert parse_data == Model.load(crf_model).parse(text)
    assert parse_data["intent"]["name"] == "order_pizza"
    # without the token, or with another, Rasa gets no 200 and falls back to an empty intent
    assert rasa_parse(token_server.url, None, text) == RASA_DEFAULT
    assert rasa_parse(token_server.url, "wrong", text) == RASA_DEFAULT
    log = token_server.log()
    assert TOKEN not in log and "Traceback" not in log


def test_the_body_token_is_one_of_three_ways(token_server: ServerProcess) -> None:
    import httpx

    with httpx.Client(base_url=token_server.url, trust_env=False, timeout=30) as http:
        ok = [
            http.post("/model/parse", json={"text": "hi", "token": TOKEN}),
            http.post("/model/parse", params={"token": TOKEN}, json={"text": "hi"}),
            http.post("/model/parse", headers={"Authorization": f"Bearer {TOKEN}"}, json={"text": "hi"}),
            http.post("/model/parse/batch", json={"texts": ["hi", "bye"], "token": TOKEN}),
        ]
        assert [r.status_code for r in ok] == [200, 200, 200, 200]
        assert [r["intent"]["name"] for r in ok[3].json()] == ["greet", "goodbye"]
        refused = [
            http.post("/model/parse", json={"text": "hi", "token": "wrong"}),
            http.post("/model/parse", json={"text": "hi", "token": None}),
            http.post("/model/parse", json={"text": "hi", "token": 42}),
            http.post("/model/parse", content=b'{"text": "hi", "token": "\\ud800"}'),  # a lone surrogate
            http.post("/model/parse", content=b"not json", headers={"Content-Type": "application/json"}),
            http.post("/model/parse/batch", json=["hi"]),  # a list has no place for a token
            http.get("/status", params={"text": "hi", "token": "wrong"}),
        ]
        for response in refused:
            assert response.status_code == 401, response.text
            assert response.json()["reason"] == "NotAuthenticated"
        assert "JSON body" in refused[0].json()["message"]
        # the body token opens the parse endpoints only
        assert http.request("DELETE", "/model", json={"token": TOKEN}).status_code == 401


def test_every_failure_is_a_status_rasa_treats_as_one(open_server: ServerProcess) -> None:
    import httpx

    with httpx.Client(base_url=open_server.url, trust_env=False, timeout=30) as http:
        failures = [
            http.post("/model/parse", json={"token": None, "message_id": "x"}),  # no text
            http.post("/model/parse", json={"text": None, "token": None}),
            http.post("/model/parse", json={"text": "x" * 5_000, "token": None}),
        ]
    assert [r.status_code for r in failures] == [400, 400, 413]
    assert rasa_parse(open_server.url, None, "x" * 5_000) == RASA_DEFAULT


def test_button_payloads_and_intent_messages(open_server: ServerProcess) -> None:
    """Rasa sends a button's payload (``/intent{...}``) to the NLU server like any message."""
    plain = rasa_parse(open_server.url, None, "/greet")
    assert plain == {"text": "/greet", "intent": {"name": "greet", "confidence": 1.0},
                     "intent_ranking": [{"name": "greet", "confidence": 1.0}], "entities": []}
    payload = '/book_flight@0.8{"city": ["Rome", "Oslo"]}'
    with_entities = rasa_parse(open_server.url, None, payload)
    span = (payload.index("{"), len(payload))  # every entity spans the JSON object, as in Rasa
    assert with_entities["intent"] == {"name": "book_flight", "confidence": 0.8}
    assert [(e["entity"], e["value"], e["start"], e["end"]) for e in with_entities["entities"]] == [
        ("city", "Rome", span[0], span[1]), ("city", "Oslo", span[0], span[1])]
    assert rasa_parse(open_server.url, None, "/restart")["intent"]["name"] == "restart"
    # an intent the model does not know: the text is parsed as text
    unknown = rasa_parse(open_server.url, None, "/no_such_intent")
    assert unknown["intent"]["name"] != "no_such_intent" and "text_tokens" in unknown
