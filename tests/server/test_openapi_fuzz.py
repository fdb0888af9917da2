"""Schemathesis against the served OpenAPI document: every operation, valid and invalid requests,
with a token and with a JWT. Every answer must be documented (status, content type, schema),
never a 500; a secured operation must refuse a request without its credentials.

The app runs in-process (ASGI). The default budget is short and seeded (``make test``);
``make fuzz-http`` sets ``NLU_ENGINE_FUZZ_HTTP_EXAMPLES`` for a long run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from nlu_engine.assembly.model import Model, train
from nlu_engine.server.auth import encode_jwt
from nlu_engine.server.openapi import openapi_document
from tests.extras import requires_extra

pytestmark = [requires_extra("server"), requires_extra("dev", "schemathesis")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("NLU_ENGINE_FUZZ_HTTP_EXAMPLES", "12"))
TOKEN = "t0ken-fuzz"
JWT_SECRET = "jwt-fuzz-secret"
# invalid requests only where there is something to get wrong (parameters or a body); the modes
# are schemathesis' GenerationMode values, named here so that collection imports no schemathesis
CASES = [(path, method.upper(), mode) for path, item in openapi_document()["paths"].items()
         for method, operation in item.items()
         for mode in ("positive", "negative")
         if mode == "positive" or {"parameters", "requestBody"} & set(operation)]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Model:
    out = tmp_path_factory.mktemp("models")
    archive = train(ROOT / "nlu_engine" / "pipelines" / "logreg.yml", tiny_data_path, out=out,
                    fixed_model_name="tiny", log=None)
    return Model.load(archive)


@pytest.fixture  # schemathesis' pytest plugin ends an app's lifespan after each test
def served(model: Model) -> Iterator[dict[str, tuple[Any, Any, dict[str, str]]]]:
    """Per auth mode: the app, its loaded schema and the credentials to send."""
    import schemathesis

    from nlu_engine.server.app import create_app

    apps = {
        "token": (create_app(model=model, auth_token=TOKEN, max_text_chars=200, max_batch_texts=8),
                  {"Authorization": f"Bearer {TOKEN}"}),
        "jwt": (create_app(model=model, jwt_secret=JWT_SECRET, max_text_chars=200, max_batch_texts=8),
                {"Authorization": f"Bearer {encode_jwt({'user': 'fuzz'}, JWT_SECRET)}"}),
    }
    served = {}
    for mode, (app, headers) in apps.items():
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)
        # the credentials are the ones given, so that the auth check can tell a valid one (sent)
        # from a missing or invalid one (which it sends on its own, expecting 401)
        schema.config.generation.update(with_security_parameters=False)
        # a text or list over the server's limit is refused with 413 (Payload Too Large)
        rejection = schema.config.checks.negative_data_rejection
        rejection.expected_statuses = [*rejection.expected_statuses, "413"]
        served[mode] = (app, schema, headers)
    yield served


@pytest.mark.parametrize("auth", ["token", "jwt"])
@pytest.mark.parametrize(("path", "method", "generation"), CASES)
def test_every_answer_is_documented(served: dict[str, Any], model: Model, path: str, method: str,
                                    auth: str, generation: str) -> None:
    from schemathesis.generation.modes import GenerationMode

    app, schema, headers = served[auth]
    operation = schema[path][method]
    sent = []

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(operation.as_strategy(generation_mode=GenerationMode(generation)))
    def run(case: Any) -> None:
        app.state.nlu.model = model  # a DELETE /model case unloads it
        sent.append(case.call_and_validate(headers=headers).status_code)

    run()
    assert sent  # the count: `make fuzz-http` prints it (-rP)
    print(f"{method} {path} ({auth}, {generation}): {len(sent)} requests, statuses {sorted(set(sent))}")
