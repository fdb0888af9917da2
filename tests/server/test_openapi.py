"""The OpenAPI document says what the server does: accepted shapes, limits, open endpoints.

The README and ``serve --help`` say the same about which endpoints need no token.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nlu_engine.assembly.model import train
from nlu_engine.server.openapi import openapi_document
from tests.extras import requires_extra
from tests.server.asgi import app_client

pytestmark = requires_extra("server")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
OPEN = ["/", "/version", "/health", "/openapi.json"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Path:
    folder = tmp_path_factory.mktemp("models")
    train(PROJECT_ROOT / "nlu_engine" / "pipelines" / "logreg.yml", tiny_data_path, out=folder,
          fixed_model_name="good", log=None)
    (folder / "notes.txt").write_text("not a model")
    return folder


def schema_accepts_model_file(name: str) -> bool:
    schema = openapi_document()["components"]["schemas"]["ModelRequest"]["properties"]["model_file"]
    return len(name) >= schema["minLength"] and re.search(schema["pattern"], name) is not None


@pytest.mark.parametrize(
    "name, status",
    [("", 400), ("   ", 400), ("good", 400), ("notes.txt", 400), ("http://example.com/m.tar.gz", 400),
     ("a\x00.tar.gz", 400), ("good.tar.gz", 204), ("missing.tar.gz", 404),
     # found by schemathesis: paths out of the folder matched the documented pattern
     ("../good.tar.gz", 400), ("/\x06.tar.gz", 400), ("sub/../../good.tar.gz", 400)],
)
def test_model_file_schema_matches_the_server(models: Path, name: str, status: int) -> None:
    with app_client(models / "good.tar.gz", models) as client:
        response = client.put("/model", json={"model_file": name})
    assert response.status_code == status, response.text
    assert schema_accepts_model_file(name) == (status != 400)


def test_text_and_batch_limits_are_the_servers(models: Path) -> None:
    with app_client(models / "good.tar.gz", models, max_text_chars=10, max_batch_texts=3) as client:
        doc = client.get("/openapi.json").json()
        assert client.post("/model/parse", json={"text": "x" * 10}).status_code == 200
        assert client.post("/model/parse", json={"text": "x" * 11}).status_code == 413
        assert client.post("/model/parse/batch", json=["a", "b", "c"]).status_code == 200
        assert client.post("/model/parse/batch", json=["a", "b", "c", "d"]).status_code == 413
    text = doc["components"]["schemas"]["ParseRequest"]["properties"]["text"]
    assert text["maxLength"] == 10
    batch = doc["paths"]["/model/parse/batch"]["post"]["requestBody"]["content"]["application/json"]
    as_list, as_object = batch["schema"]["oneOf"]
    assert as_list["maxItems"] == 3 and as_list["items"]["maxLength"] == 10
    assert as_object["properties"]["texts"] == as_list


def test_open_endpoints_are_the_documented_ones(models: Path) -> None:
    doc = openapi_document()
    documented_open = sorted(path for path, item in doc["paths"].items()
                             if not any("security" in operation for operation in item.values()))
    assert documented_open == sorted(OPEN)
    with app_client(models / "good.tar.gz", models, auth_token="t0ken") as client:
        for path in OPEN:
            assert client.get(path).status_code == 200, path
        for path, item in doc["paths"].items():
            for method in item:
                if path not in OPEN:
                    response = client.request(method.upper(), path)
                    assert response.status_code == 401, (method, path)


def test_readme_and_serve_help_name_the_same_open_endpoints() -> None:
    readme = " ".join((PROJECT_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "every endpoint but `/`, `/version`, `/health` and `/openapi.json` needs" in readme
    result = subprocess.run([sys.executable, "-m", "nlu_engine", "serve", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    help_text = " ".join(result.stdout.split())
    assert "every endpoint but /, /version, /health and /openapi.json" in help_text
    assert "every endpoint but /, /version, /health and /openapi.json" in " ".join(
        openapi_document()["info"]["description"].split())


def test_delete_model_is_documented() -> None:
    readme = " ".join((PROJECT_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "`DELETE /model` unloads the model" in readme
    delete = openapi_document()["paths"]["/model"]["delete"]
    assert set(delete["responses"]) >= {"204", "401", "409"}


# found by schemathesis (tests/server/test_openapi_fuzz.py): a huge integer time was a 500, a
# far-future float reached the components, a schema-valid date-time or emulation_mode was a 400
@pytest.mark.parametrize(
    ("time", "status"),
    [(1700000000, 200), ("1700000000.5", 200), ("2024-05-01T10:00:00z", 200),
     ("2024-05-01T10:00:00+02:00", 200), (None, 200), (10**400, 400), (1e300, 400),
     ("1e400", 400), ("nan", 400), (-10**12, 400), ("soon", 400), (True, 400), ([1], 400)],
)
def test_time_range_is_the_documented_one(models: Path, time: object, status: int) -> None:
    with app_client(models / "good.tar.gz", models) as client:
        response = client.post("/model/parse", json={"text": "hi", "time": time})
    assert response.status_code == status, response.text
    if status == 400:
        assert "'time' must be" in response.json()["message"]


@pytest.mark.parametrize(("mode", "status"), [("", 200), ("rasa", 200), ("RASA", 200), ("luis", 400)])
def test_emulation_mode_schema_matches_the_server(models: Path, mode: str, status: int) -> None:
    parameter = openapi_document()["paths"]["/model/parse"]["post"]["parameters"][0]
    assert (re.search(parameter["schema"]["pattern"], mode) is not None) == (status == 200)
    with app_client(models / "good.tar.gz", models) as client:
        response = client.post("/model/parse", params={"emulation_mode": mode}, json={"text": "hi"})
    assert response.status_code == status, response.text
