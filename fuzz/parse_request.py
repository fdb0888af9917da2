"""Fuzz target ``parse_request``: the body of ``POST /model/parse`` (and, by the first byte,
of ``/model/parse/batch``), through the app as it serves (starlette's TestClient, in process).

The answer is a 200 with strict JSON whose entity offsets fit its text, or a 4xx with Rasa's
error JSON: never a 500. The model is a logreg archive of ``data/nlu.yml`` (made as the ``archive``
target makes its seed)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.testclient import TestClient

from fuzz.archive import seed_archive
from fuzz.harness import DATASETS, ROOT
from nlu_engine.server.app import create_app  # imported here, where atheris instruments it

ENDPOINTS = ("/model/parse", "/model/parse/batch")
_client: Any = None


def client() -> Any:
    global _client
    if _client is None:
        _client = TestClient(create_app(seed_archive(ROOT / "data" / "nlu.yml"), max_text_chars=2000,
                                        max_batch_texts=16))
        _client.__enter__()
    return _client


def seeds() -> Iterable[bytes]:
    texts = [line.strip()[2:] for line in (ROOT / "data" / "nlu.yml").read_text().splitlines()
             if line.strip().startswith("- ")][:20]
    snips = DATASETS / "SNIPS" / "test.md"
    if snips.is_file():
        texts += [line[2:] for line in snips.read_text().splitlines()[:60] if line.startswith("- ")]
    for i, text in enumerate(texts):
        yield b"\x00" + json.dumps({"text": text, "message_id": str(i)}).encode()
        yield b"\x00" + json.dumps({"text": text, "time": "2024-01-01T10:00:00", "sender_id": "x"}).encode()
    yield b"\x01" + json.dumps(texts[:5]).encode()
    yield b"\x01" + json.dumps({"texts": texts[5:9], "token": "t"}).encode()
    client()  # the model is trained before the fuzzer's clock starts


def _fits(result: Any) -> bool:
    text = result["text"]
    return all(isinstance(e["start"], int) and isinstance(e["end"], int)
               and 0 <= e["start"] <= e["end"] <= len(text) for e in result["entities"])


def test_one_input(raw: bytes) -> None:
    if not raw:
        return
    response = client().post(ENDPOINTS[raw[0] % 2], content=raw[1:],
                              headers={"Content-Type": "application/json"})
    assert response.status_code in (200, 400, 413), (response.status_code, response.text[:300])
    body = json.loads(response.content, parse_constant=lambda name: (_ for _ in ()).throw(
        AssertionError(f"{name} in the answer")))
    if response.status_code != 200:
        assert body["status"] == "failure" and "\n" not in body["message"]
        return
    results = body if isinstance(body, list) else [body]
    assert all(_fits(result) for result in results), results
