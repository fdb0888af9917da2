"""The ASGI app in process: the allow list on PUT /model and at startup, and 405 with Allow.

The real server (``nlu-engine serve`` in a child process) is tested in ``test_server.py``.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.model import train
from tests.extras import requires_extra
from tests.hostile_texts import HOSTILE_TEXTS
from tests.server.asgi import app_client

pytestmark = requires_extra("server")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOGREG = PROJECT_ROOT / "nlu_engine" / "pipelines" / "logreg.yml"
SENTIMENT = "examples.custom_components.sentiment.SentimentAnalyzer"
CANARY_MODULE = """\
from pathlib import Path

Path(__file__).with_name("canary.txt").write_text("imported")


class Evil:
    pass
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Path:
    """good.tar.gz (registered components only), custom.tar.gz (the example custom component)
    and evil.tar.gz (good's manifest naming evilmod.Evil first)."""
    folder = tmp_path_factory.mktemp("models")
    good = train(LOGREG, tiny_data_path, out=folder, fixed_model_name="good", log=None)
    custom = {
        "language": "en",
        "pipeline": [{"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
                     {"name": "LogisticRegressionClassifier"}, {"name": SENTIMENT}],
    }
    train(custom, tiny_data_path, out=folder, fixed_model_name="custom", log=None)
    with tarfile.open(good, "r:gz") as source, tarfile.open(folder / "evil.tar.gz", "w:gz") as out:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None  # type: ignore[union-attr]
            if member.name == "manifest.json":
                manifest: dict[str, Any] = json.loads(data or b"{}")
                manifest["pipeline"][0]["name"] = "evilmod.Evil"
                data = json.dumps(manifest).encode()
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    return folder


@pytest.fixture
def canary_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The working directory holds evilmod.py, which writes canary.txt when imported."""
    (tmp_path / "evilmod.py").write_text(CANARY_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield tmp_path
    sys.modules.pop("evilmod", None)


def test_put_model_does_not_import_a_module_from_the_working_directory(
    models: Path, canary_dir: Path
) -> None:
    with app_client(models / "good.tar.gz", models) as client:
        response = client.put("/model", json={"model_file": "evil.tar.gz"})
        assert response.status_code == 400
        message = response.json()["message"]
        assert "'evilmod.Evil'" in message and "--allow-component evilmod.Evil" in message
        status = client.get("/status").json()
        assert status["model_file"] == "good.tar.gz", "the old model stays"
        assert status["runtime"] == "float32"  # the archive's
        assert client.post("/model/parse", json={"text": "hello there"}).status_code == 200
    assert not (canary_dir / "canary.txt").exists()
    assert "evilmod" not in sys.modules


def test_put_model_loads_a_custom_component_the_server_allows(
    models: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    with app_client(models / "good.tar.gz", models) as client:
        refused = client.put("/model", json={"model_file": "custom.tar.gz"})
        assert refused.status_code == 400 and f"--allow-component {SENTIMENT}" in refused.json()["message"]
    with app_client(models / "good.tar.gz", models, allow_components=[SENTIMENT]) as client:
        assert client.put("/model", json={"model_file": "custom.tar.gz"}).status_code == 204
        result = client.post("/model/parse", json={"text": "the crew was superb"}).json()
        assert result["text"] == "the crew was superb"
        assert client.get("/status").json()["pipeline"][-1] == SENTIMENT


def test_serve_runtime_is_every_loaded_models_and_status_says_it(models: Path) -> None:
    with app_client(models / "good.tar.gz", models, runtime="int8") as client:
        assert client.get("/status").json()["runtime"] == "int8"
        assert client.put("/model", json={"model_file": "good.tar.gz"}).status_code == 204
        assert client.get("/status").json()["runtime"] == "int8"


def test_startup_with_a_refused_archive_runs_without_a_model(models: Path, canary_dir: Path) -> None:
    with app_client(models / "evil.tar.gz", models) as client:
        assert client.get("/health").status_code == 503
        assert client.post("/model/parse", json={"text": "hi"}).status_code == 503
        assert client.put("/model", json={"model_file": "good.tar.gz"}).status_code == 204
    assert not (canary_dir / "canary.txt").exists()


def test_workers_get_the_allow_list(models: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nlu_engine.server.run import ENV_SETTINGS, app_from_environment

    settings = {"model_path": None, "models_dir": str(models), "allow_components": [SENTIMENT]}
    monkeypatch.setenv(ENV_SETTINGS, json.dumps(settings))
    assert app_from_environment().state.nlu.allow_components == frozenset({SENTIMENT})


@pytest.mark.parametrize(
    "method, path, allow",
    [("GET", "/model/parse", "POST"), ("PUT", "/model/parse/batch", "POST"),
     ("GET", "/model", "DELETE, PUT"), ("POST", "/", "GET, HEAD"), ("DELETE", "/status", "GET, HEAD"),
     ("POST", "/openapi.json", "GET, HEAD")],
)
def test_405_lists_the_allowed_methods(models: Path, method: str, path: str, allow: str) -> None:
    with app_client(models / "good.tar.gz", models) as client:
        response = client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    body = response.json()
    assert body["code"] == 405 and body["reason"] == "MethodNotAllowed" and allow in body["message"]


def test_405_comes_before_authentication(models: Path) -> None:
    with app_client(models / "good.tar.gz", models, auth_token="t") as client:
        response = client.get("/model/parse")
    assert response.status_code == 405 and response.headers["allow"] == "POST"


MIXED_NLU = """version: "3.1"
nlu:
- intent: go
  examples: |
    - 我想去[Berlin](city)看看
    - 我想去[北京](city)
    - fly to [Paris](city) please
    - [巴黎](city)怎么样
    - take me to [Zürich](city)
- intent: play
  examples: |
    - 播放[Taylor Swift](artist)的歌
    - play [周杰伦](artist)
    - play some [Adele](artist)
    - 放一首[Adele](artist)
"""
MIXED_MESSAGES = ["我想去Berlin看看", "play Taylor Swift\u200d👍🏽", "fly to Pa\u0301ris",
                  "\u202efly to Paris", "播放Adele\x00的歌", "to Zürich\x0c please", "播放周杰伦 and Adele"]


@pytest.fixture(scope="module")
def crf_models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """CRF entities (no TensorFlow) after the whitespace tokenizer on the example assistant, and
    after the Jieba tokenizer on Chinese with Latin words."""
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "nlu.yml").write_text(MIXED_NLU, encoding="utf-8")
    steps = [{"name": "CountVectorsFeaturizer"}, {"name": "LogisticRegressionClassifier"},
             {"name": "CRFEntityExtractor"}, {"name": "EntitySynonymMapper"}]
    english = {"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"}, *steps]}
    data = PROJECT_ROOT / "data" / "nlu.yml"
    archives = [train(english, data, out=folder, fixed_model_name="en", log=None)]
    if importlib.util.find_spec("jieba") is not None:  # the zh extra; the rest runs without it
        chinese = {"language": "zh", "pipeline": [{"name": "JiebaTokenizer"}, *steps]}
        archives.append(train(chinese, folder / "nlu.yml", out=folder, fixed_model_name="zh", log=None))
    return archives


@requires_extra("crf")
def test_text_that_breaks_tokenizers_parses_with_exact_offsets(crf_models: list[Path]) -> None:
    texts = [t for t in HOSTILE_TEXTS if "\ud800" not in t] + MIXED_MESSAGES
    found = 0
    for archive in crf_models:
        with app_client(archive) as client:
            batch = client.post("/model/parse/batch", json={"texts": texts})
            assert batch.status_code == 200
            for text, result in zip(texts, batch.json(), strict=True):
                alone = client.post("/model/parse", json={"text": text}).json()
                assert alone["intent"]["name"] == result["intent"]["name"]
                assert alone["entities"] == result["entities"]
                parsed = result["text"]
                assert parsed == text.strip()  # parsed as Rasa's UserMessage strips it
                assert all(parsed[start:end].strip() for start, end in result["text_tokens"]) or not parsed
                for entity in result["entities"]:
                    synonym = "EntitySynonymMapper" in entity.get("processors", [])
                    assert synonym or parsed[entity["start"]:entity["end"]] == entity["value"], entity
                found += len(result["entities"])
            # a lone surrogate cannot be UTF-8: a clear 400, not a crash
            lone = client.post("/model/parse", content=b'{"text": "a\\ud800b"}',
                               headers={"Content-Type": "application/json"})
            assert lone.status_code == 400 and "lone surrogate" in lone.json()["message"]
    assert found  # the offsets above were checked on entities
