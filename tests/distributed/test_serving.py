"""The HTTP app as a Ray Serve deployment with two replicas, on a local Ray."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.model import Model
from nlu_engine.contract.errors import NLUError
from nlu_engine.server.process import free_port
from tests.extras import requires_extra

pytestmark = [requires_extra("distributed", "ray", "fastapi"), requires_extra("server", "httpx")]


@pytest.fixture(scope="module")
def deployed(ray_local: Any, logreg_archive: Path) -> Iterator[str]:
    from ray import serve

    from nlu_engine.distributed.serving import run

    port = free_port()
    run(logreg_archive, replicas=2, port=port, cpus_per_replica=0.5, auth_token="secret")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()


@pytest.mark.slow  # Ray Serve's controller and proxy take a while to start
def test_replicas_answer_as_the_model_does(deployed: str, logreg_archive: Path) -> None:
    model = Model.load(logreg_archive)
    headers = {"Authorization": "Bearer secret"}
    import httpx

    with httpx.Client(base_url=deployed, trust_env=False, timeout=30, headers=headers) as http:
        for text in ["hi there", "book a table for two in Berlin"]:
            assert http.post("/model/parse", json={"text": text}).json() == model.parse(text)
        workers = set()
        for _ in range(30):
            status = http.get("/status").json()
            assert status["model_file"] == logreg_archive.name
            workers.add(status["worker_id"])
        assert len(workers) == 2 and all(w.startswith("ray-serve:") for w in workers)
        assert http.get("/status", headers={"Authorization": ""}).status_code == 401
        assert http.put("/model", json={"model_file": logreg_archive.name}).status_code == 409


def test_replicas_must_be_positive(logreg_archive: Path) -> None:
    from nlu_engine.distributed.serving import deployment

    with pytest.raises(NLUError, match="at least 1"):
        deployment(logreg_archive, replicas=0)
