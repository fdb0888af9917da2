"""The review API: a decision for a group (entities carried to the near-duplicates), 409 for a
stale one, undo; the token, the Host and Origin checks, and no request reaching a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nlu_engine.contract.errors import NLUError
from tests.extras import requires_extra

pytestmark = requires_extra("server", "starlette", "httpx", "sqlalchemy")
HOST = "127.0.0.1:5006"


def client(project: dict[str, Path], token: str | None = None, hosts: Any = frozenset({HOST})) -> Any:
    from starlette.testclient import TestClient

    from nlu_engine.review.app import ReviewSettings, create_app

    app = create_app(ReviewSettings(db=str(project["db"]), data=project["data"], token=token, hosts=hosts))
    return TestClient(app, base_url=f"http://{HOST}")


def targets(group: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": m["id"], "version": m["version"]} for m in group["messages"]]


def test_one_decision_labels_a_group_and_carries_the_edited_entities(project: dict) -> None:
    api = client(project)
    groups = api.get("/api/inbox").json()["groups"]
    first = groups[0]
    assert [m["text"] for m in first["messages"]] == ["where is my order", "Where is my order?",
                                                      "where is my order ??"]
    assert first["reasons"] == ["fallback", "low confidence", "small margin"]
    edited = [{"entity": "thing", "start": 12, "end": 17}]  # "order" of the first
    answer = api.post("/api/decide", json={"intent": "check_order", "messages": targets(first),
                                           "entities": edited, "entities_of": first["messages"][0]["id"]})
    assert answer.status_code == 200 and answer.json()["written"] == 3
    written = (project["data"] / "reviewed.yml").read_text(encoding="utf-8")
    for line in ("- where is my [order](thing)", "- Where is my [order](thing)?",
                 "- where is my [order](thing) ??"):
        assert line in written
    assert api.get("/api/inbox").json()["total"] == len(groups) - 1
    # the same versions again: someone else's decision stands, 409
    again = api.post("/api/decide", json={"intent": "greet", "messages": targets(first)})
    assert again.status_code == 409 and set(again.json()["current"]) == {m["id"] for m in first["messages"]}
    undone = api.post("/api/undo", json={"messages": [{"id": k, "version": v} for k, v in
                                                      answer.json()["versions"].items()]})
    assert undone.status_code == 200 and not (project["data"] / "reviewed.yml").exists()
    assert api.get("/api/inbox").json()["groups"][0]["id"] == first["id"]


@pytest.mark.parametrize(("body", "status"), [
    ({"intent": "has space", "messages": "x"}, 400),
    ({"intent": "ok", "messages": []}, 400),
    ({"intent": "ok", "messages": [{"id": "nope", "version": 0}]}, 404),
    ({"intent": "two\nlines", "messages": [{"id": "nope", "version": 0}]}, 400),
    ({"intent": "ok", "messages": [{"id": "a", "version": -1}]}, 400),
    ({"intent": "ok", "messages": [{"id": "a", "version": 0}, {"id": "a", "version": 0}]}, 400),
])
def test_bad_decisions_are_one_line_4xx(project: dict, body: dict, status: int) -> None:
    answer = client(project).post("/api/decide", json=body)
    assert answer.status_code == status and "\n" not in answer.json()["error"]


def test_with_a_token_no_api_request_works_without_it(project: dict) -> None:
    api = client(project, token="s3cret", hosts=None)
    assert api.get("/").status_code == 200  # the page itself holds no data
    first = client(project).get("/api/inbox").json()["groups"][0]
    for method, path, body in (("GET", "/api/inbox", None), ("GET", "/api/state", None),
                               ("POST", "/api/decide", {"intent": "greet", "messages": targets(first)}),
                               ("POST", "/api/undo", {"messages": targets(first)}),
                               ("POST", "/api/train", {})):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            assert api.request(method, path, json=body, headers=headers).status_code == 401
    assert not (project["data"] / "reviewed.yml").exists()
    ok = api.post("/api/decide", json={"intent": "greet", "messages": targets(first)},
                  headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


def test_other_hosts_other_origins_and_form_posts_are_refused(project: dict) -> None:
    api = client(project)
    first = api.get("/api/inbox").json()["groups"][0]
    body = {"intent": "greet", "messages": targets(first)}
    assert api.get("/api/inbox", headers={"Host": "evil.example:5006"}).status_code == 403
    assert api.post("/api/decide", json=body, headers={"Origin": "http://evil.example"}).status_code == 403
    form = api.post("/api/decide", content=b'{"intent": "greet"}', headers={"Content-Type": "text/plain"})
    assert form.status_code == 415
    assert api.post("/api/decide", content=b"x" * 1_000_001,
                    headers={"Content-Type": "application/json"}).status_code == 413
    broken = api.post("/api/decide", content=b"{not json", headers={"Content-Type": "application/json"})
    assert broken.status_code == 400
    assert not (project["data"] / "reviewed.yml").exists()
    assert api.post("/api/decide", json=body, headers={"Origin": f"http://{HOST}"}).status_code == 200


def test_no_request_reaches_a_file_and_the_page_forbids_inline_script(project: dict) -> None:
    api = client(project)
    for path in ("/../nlu.yml", "/static/review.js", "/review.js/../app.py", "/%2e%2e/data/nlu.yml",
                 "/data/nlu.yml", "/api/../../log.db", "/index.html"):
        answer = api.get(path)
        assert answer.status_code == 404, path
        assert b"greet" not in answer.content
    page = api.get("/")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    assert api.get("/review.js").headers["content-type"].startswith("text/javascript")


def test_the_train_button_needs_a_model(project: dict) -> None:
    answer = client(project).post("/api/train", json={})
    assert answer.status_code == 409 and "--model" in answer.json()["error"]


def test_a_review_file_the_review_did_not_write_stops_the_start(project: dict) -> None:
    (project["data"] / "reviewed.yml").write_text("version: '3.1'\nnlu: []\n", encoding="utf-8")
    with pytest.raises(NLUError, match="was not written by nlu-engine review"):
        client(project)
