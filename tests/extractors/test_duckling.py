"""DucklingEntityExtractor against a local server answering in Duckling's documented format."""

from __future__ import annotations

import datetime
import logging
import socket
import time
from pathlib import Path

import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.contract.message import Message
from nlu_engine.extractors.duckling import RETRY_SECONDS, DucklingEntityExtractor, rasa_entities
from tests.extractors.duckling_stub import TOMORROW, WEEKEND, DucklingStub
from tests.extras import requires_extra


@pytest.fixture
def stub(duckling_server: DucklingStub, monkeypatch: pytest.MonkeyPatch) -> DucklingStub:
    monkeypatch.delenv("RASA_DUCKLING_HTTP_URL", raising=False)
    duckling_server.status, duckling_server.garbage = 200, False
    duckling_server.requests.clear()
    return duckling_server


def parse(extractor: DucklingEntityExtractor, *texts: str) -> list[list[dict]]:
    messages = [Message(text=text) for text in texts]
    extractor.process(messages)
    return [m.entities for m in messages]


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_entities_come_in_rasas_format(stub: DucklingStub) -> None:
    extractor = DucklingEntityExtractor(url=stub.url)
    [entities] = parse(extractor, "two tickets for tomorrow")
    number, when = entities
    assert number == {"start": 0, "end": 3, "text": "two", "value": 2, "confidence": 1.0,
                      "additional_info": {"value": 2, "type": "value"}, "entity": "number",
                      "extractor": "DucklingEntityExtractor"}
    assert when["entity"] == "time" and when["value"] == TOMORROW and when["text"] == "tomorrow"
    assert when["additional_info"]["grain"] == "day" and (when["start"], when["end"]) == (16, 24)


def test_an_interval_value_is_from_and_to(stub: DucklingStub) -> None:
    [[entity]] = parse(DucklingEntityExtractor(url=stub.url), "free this weekend")
    assert entity["value"] == {"to": WEEKEND[1], "from": WEEKEND[0]}
    assert entity["additional_info"]["type"] == "interval"


def test_the_request_is_rasas(stub: DucklingStub) -> None:
    extractor = DucklingEntityExtractor(url=stub.url + "/ignored/path", dimensions=["number"],
                                        timezone="Europe/Berlin")
    before = int(time.time()) * 1000
    parse(extractor, "call me tomorrow at 5")
    [request] = stub.requests
    assert request["path"] == "/parse"  # as Rasa: urljoin(url, "/parse")
    assert request["content_type"].startswith("application/x-www-form-urlencoded")
    assert request["text"] == "call me tomorrow at 5" and request["locale"] == "en_EN"
    assert request["tz"] == "Europe/Berlin" and request["dims"] == '["number"]'
    assert before <= int(request["reftime"]) <= int(time.time()) * 1000


def test_defaults_send_no_timezone_and_null_dims(stub: DucklingStub) -> None:
    extractor = DucklingEntityExtractor(url=stub.url, locale="de_DE")
    parse(extractor, "zwei")
    [request] = stub.requests
    assert "tz" not in request and request["dims"] == "null" and request["locale"] == "de_DE"


def test_dimensions_filter_what_comes_back(stub: DucklingStub) -> None:
    [entities] = parse(DucklingEntityExtractor(url=stub.url, dimensions=["time"]), "two tomorrow")
    assert [e["entity"] for e in entities] == ["time"]


def test_the_environment_variable_wins_over_url(stub: DucklingStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RASA_DUCKLING_HTTP_URL", stub.url)
    [entities] = parse(DucklingEntityExtractor(url=closed_port_url()), "three")
    assert [e["value"] for e in entities] == [3]


def test_a_batch_keeps_its_order(stub: DucklingStub) -> None:
    texts = [f"{n} dollars" for n in range(1, 30)]
    results = parse(DucklingEntityExtractor(url=stub.url), *texts)
    assert [r[0]["value"] for r in results] == list(range(1, 30))
    assert {r[0]["entity"] for r in results} == {"amount-of-money"}


@pytest.mark.parametrize("failure", ["unreachable", "status", "garbage"])
def test_a_failing_server_warns_once_and_parsing_continues(
    failure: str, stub: DucklingStub, caplog: pytest.LogCaptureFixture
) -> None:
    url = closed_port_url() if failure == "unreachable" else stub.url
    stub.status = 500 if failure == "status" else 200
    stub.garbage = failure == "garbage"
    extractor = DucklingEntityExtractor(url=url, timeout=1)
    messages = [Message(text="two", entities=[{"entity": "x", "start": 0, "end": 3, "value": "two"}]),
                Message(text="three")]
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        extractor.process(messages)
        extractor.process([Message(text="four")])
    assert [m.entities for m in messages] == [[{"entity": "x", "start": 0, "end": 3, "value": "two"}], []]
    warnings = [r.getMessage() for r in caplog.records if "DucklingEntityExtractor" in r.getMessage()]
    assert len(warnings) == 1 and "parsing continues" in warnings[0] and "\n" not in warnings[0]
    # while it rests, the server is not asked again (the first batch went out in parallel)
    assert "four" not in [r["text"] for r in stub.requests]


def test_the_server_is_asked_again_after_a_rest(stub: DucklingStub, monkeypatch: pytest.MonkeyPatch) -> None:
    extractor = DucklingEntityExtractor(url=stub.url)
    stub.status = 503
    assert parse(extractor, "two") == [[]]
    stub.status = 200
    assert parse(extractor, "two") == [[]]  # resting
    clock = time.monotonic() + RETRY_SECONDS + 1
    monkeypatch.setattr("nlu_engine.extractors.duckling.time.monotonic", lambda: clock)
    assert [e["value"] for e in parse(extractor, "two")[0]] == [2]


def test_without_url_it_warns_once_and_extracts_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("RASA_DUCKLING_HTTP_URL", raising=False)
    extractor = DucklingEntityExtractor()
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        assert parse(extractor, "two", "three") == [[], []]
        assert parse(extractor, "four") == [[]]
    assert len([r for r in caplog.records if "no `url`" in r.getMessage()]) == 1


def test_rasa_entities_reads_text_when_body_is_missing() -> None:
    [entity] = rasa_entities([{"start": 0, "end": 1, "text": "5", "dim": "number",
                               "value": {"value": 5, "type": "value"}}])
    assert entity["text"] == "5" and entity["value"] == 5


def test_in_a_pipeline_its_entities_reach_the_parse_and_the_archive_is_config_only(
    stub: DucklingStub, tmp_path: Path, tiny_data_path: Path
) -> None:
    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
        {"name": "DucklingEntityExtractor", "url": stub.url, "dimensions": ["number", "time"]},
    ]}
    archive = train(config, tiny_data_path, out=tmp_path, fixed_model_name="duckling", log=None)
    result = Model.load(archive).parse("book a flight for two tomorrow")
    assert [(e["entity"], e["value"]) for e in result["entities"]] == [("number", 2), ("time", TOMORROW)]
    assert all(e["extractor"] == "DucklingEntityExtractor" for e in result["entities"])


# --- the reference time ----------------------------------------------------------------------
NEW_YEAR_2024 = 1704067200  # 2024-01-01T00:00:00Z, in seconds


def test_a_message_with_a_time_sends_it_as_reftime_and_the_others_send_now(stub: DucklingStub) -> None:
    extractor = DucklingEntityExtractor(url=stub.url)
    messages = [Message(text="today", time=NEW_YEAR_2024 + 0.25), Message(text="two today"),
                Message(text="today one", time=NEW_YEAR_2024 - 86400)]
    before = int(time.time()) * 1000
    extractor.process(messages)
    sent = {r["text"]: int(r["reftime"]) for r in stub.requests}
    assert sent["today"] == NEW_YEAR_2024 * 1000 + 250  # Rasa: the message's time in ms
    assert sent["today one"] == (NEW_YEAR_2024 - 86400) * 1000
    assert before <= sent["two today"] <= int(time.time()) * 1000
    days = [[e["value"] for e in m.entities if e["entity"] == "time"] for m in messages]
    assert days[0] == ["2024-01-01T00:00:00.000Z"] and days[2] == ["2023-12-31T00:00:00.000Z"]


def test_model_parse_passes_the_time(stub: DucklingStub, tmp_path: Path, tiny_data_path: Path) -> None:
    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
        {"name": "DucklingEntityExtractor", "url": stub.url, "dimensions": ["time"]},
    ]}
    model = Model.load(train(config, tiny_data_path, out=tmp_path, fixed_model_name="d", log=None))
    assert [e["value"] for e in model.parse("book today", time=NEW_YEAR_2024)["entities"]] == [
        "2024-01-01T00:00:00.000Z"]
    results = model.parse_batch(["today", "today"], times=[NEW_YEAR_2024 - 1, None])
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    assert [r["entities"][0]["value"][:10] for r in results] == ["2023-12-31", today]


@requires_extra("server", "httpx", "uvicorn")
def test_the_time_field_of_model_parse_reaches_duckling(
    stub: DucklingStub, tmp_path: Path, tiny_data_path: Path
) -> None:
    import httpx

    from nlu_engine.server.process import ServerProcess

    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
        {"name": "DucklingEntityExtractor", "url": stub.url, "dimensions": ["time"]},
    ]}
    archive = train(config, tiny_data_path, out=tmp_path, fixed_model_name="d", log=None)
    with ServerProcess(["-m", str(archive)]) as server, httpx.Client(base_url=server.url,
                                                                      timeout=30) as client:
        def day(body: dict) -> str:
            response = client.post("/model/parse", json=body)
            assert response.status_code == 200, response.text
            return str(response.json()["entities"][0]["value"])[:10]

        assert day({"text": "today", "time": NEW_YEAR_2024}) == "2024-01-01"
        assert day({"text": "today", "time": str(NEW_YEAR_2024 - 1)}) == "2023-12-31"
        assert day({"text": "today", "time": "2023-06-01T12:00:00+02:00"}) == "2023-06-01"
        assert day({"text": "today"}) == datetime.datetime.now(datetime.UTC).date().isoformat()
        bad = client.post("/model/parse", json={"text": "today", "time": "last tuesday"})
        assert bad.status_code == 400 and "'time' must be" in bad.json()["message"]
