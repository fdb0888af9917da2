"""The HTTP server, started for real (``nlu-engine serve``) on 127.0.0.1 and a free port.

Most tests use a logistic-regression model trained once per session on data/nlu.yml (no
TensorFlow); one test serves a tiny DIET model. Every request loop is bounded.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nlu_engine import __version__
from nlu_engine.assembly.model import Model, train
from nlu_engine.server.auth import Authenticator, decode_jwt, encode_jwt
from nlu_engine.server.batching import MicroBatcher, NoModelError
from nlu_engine.server.process import ServerProcess
from tests.extras import requires_extra

pytestmark = requires_extra("server")

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "nlu_engine" / "pipelines"
NLU_DATA = ROOT / "data" / "nlu.yml"
TOKEN = "s3cret-token"
JWT_SECRET = "jwt-secret-key"
ORIGIN = "http://app.example"
TEXTS = [
    "book a table for two in Berlin tomorrow",
    "what's the weather in paris",
    "hi there",
    "thanks, bye",
    "café crème ☕ à Zürich",
    "   ",
    "",
]
WORD_ONLY = {
    "language": "en",
    "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
    ],
}


# --- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two small logreg archives ('a': word + char n-grams; 'b': words only), no TensorFlow."""
    out = tmp_path_factory.mktemp("models")
    return {
        "a": train(PIPELINES / "logreg.yml", NLU_DATA, out=out, fixed_model_name="a", log=None),
        "b": train(WORD_ONLY, NLU_DATA, out=out, fixed_model_name="b", log=None),
    }


@pytest.fixture(scope="session")
def model_a(archives: dict[str, Path]) -> Model:
    return Model.load(archives["a"])


@pytest.fixture(scope="module")
def server(archives: dict[str, Path]) -> Any:
    with ServerProcess(["-m", str(archives["a"]), "--cors", ORIGIN]) as running:
        yield running


def http_client(url: str, timeout: float = 30) -> Any:
    """An ``httpx.Client`` on ``url`` (the server extra's; imported here, not at collection)."""
    import httpx

    return httpx.Client(base_url=url, timeout=timeout, trust_env=False)


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> Any:
    with http_client(server.url) as http:
        yield http


@pytest.fixture(scope="module")
def auth_server(archives: dict[str, Path]) -> Any:
    args = ["-m", str(archives["a"]), "--auth-token", TOKEN, "--jwt-secret", JWT_SECRET, "--access-log"]
    with ServerProcess(args) as running:
        yield running


def assert_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == "failure" and body["code"] == status and body["message"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    return body


# --- Rasa's endpoints -----------------------------------------------------------------------------
def test_hello_version_health(client: Any) -> None:
    hello = client.get("/")
    assert hello.status_code == 200 and hello.text == f"Hello from nlu_engine: {__version__}"
    assert client.get("/version").json() == {"version": __version__, "minimum_compatible_version": "0.1.0"}
    assert client.get("/health").json() == {"status": "ok", "model_loaded": True}


def test_status_names_the_model(client: Any, model_a: Model, server: ServerProcess) -> None:
    status = client.get("/status").json()
    assert status["model_file"] == "a.tar.gz"
    assert status["model_id"] == model_a.model_id
    assert status["num_active_training_jobs"] == 0
    assert status["pipeline"][-1] == "LogisticRegressionClassifier"
    assert server.process is not None
    assert status["worker_id"] == f"{socket.gethostname()}:{server.process.pid}"


def test_parse_is_identical_to_model_parse(client: Any, model_a: Model) -> None:
    for text in TEXTS:
        response = client.post("/model/parse", json={"text": text, "message_id": "m-1"})
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        assert response.json() == model_a.parse(text)
    # raw bytes are UTF-8 JSON, floats round-trip exactly
    raw = client.post("/model/parse", content=json.dumps({"text": "café"}).encode()).content
    assert json.loads(raw.decode("utf-8")) == model_a.parse("café")


def test_empty_and_whitespace_messages_parse_as_the_python_api(client: Any, model_a: Model) -> None:
    empty = model_a.parse("")
    assert empty["text"] == "" and empty["entities"] == []
    for text in ("", "   ", "\n\t "):
        assert client.post("/model/parse", json={"text": text}).json() == empty == model_a.parse(text)
    assert client.post("/model/parse/batch", json=["", " ", "hi", "\t"]).json() == [
        empty, empty, model_a.parse("hi"), empty]


def test_parse_batch(client: Any, model_a: Model) -> None:
    expected = model_a.parse_batch(TEXTS)
    as_list = client.post("/model/parse/batch", json=TEXTS)
    assert as_list.status_code == 200 and as_list.json() == expected
    as_object = client.post("/model/parse/batch", json={"texts": TEXTS})
    assert as_object.json() == expected
    assert client.post("/model/parse/batch", json=[]).json() == []
    many = [f"hello number {i}" for i in range(150)]  # more than one micro-batch
    assert client.post("/model/parse/batch", json=many).json() == model_a.parse_batch(many)
    mixed = ["book a table " * (i % 7 * 25) + str(i) for i in range(40)]  # up to 1,950 characters
    assert client.post("/model/parse/batch", json=mixed).json() == model_a.parse_batch(mixed)


def test_openapi_document_matches_the_routes(client: Any) -> None:
    from nlu_engine.server.app import create_app

    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.") and doc["info"]["version"] == __version__
    documented = {(path, method.upper()) for path, item in doc["paths"].items() for method in item}
    app = create_app()
    served = {
        (route.path, method)
        for route in app.routes
        for method in (route.methods or set())  # type: ignore[attr-defined]
        if method != "HEAD"
    }
    assert documented == served
    # every $ref resolves
    refs = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            refs.update(v for k, v in node.items() if k == "$ref")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    assert refs and all(ref.split("/")[-1] in doc["components"]["schemas"] for ref in refs)


def test_cors(client: Any) -> None:
    preflight = client.options(
        "/model/parse",
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"},
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    simple = client.post("/model/parse", json={"text": "hi"}, headers={"Origin": ORIGIN})
    assert simple.headers["access-control-allow-origin"] == ORIGIN
    other = client.post("/model/parse", json={"text": "hi"}, headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in other.headers


# --- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (b'{"text": "unterminated', 400, "not valid JSON"),
        (b"", 400, "empty request body"),
        (b"\xff\xfe{}", 400, "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "not valid JSON"),
        (b'["text"]', 400, "JSON object"),
        (b'{"message_id": "1"}', 400, "No text message"),
        (b'{"text": null}', 400, "must be a string"),
        (b'{"text": 42}', 400, "must be a string"),
        (b'{"text": ["a", "b"]}', 400, "must be a string"),
        (b'{"text": "hi", "time": true}', 400, "'time' must be the message's time in seconds"),
        (b'{"text": "hi", "time": "soon"}', 400, "or an ISO 8601 date-time"),
        (json.dumps({"text": "x" * 2_001}).encode(), 413, "limit is 2000"),
        (b'{"text": "\\ud800 lone surrogate"}', 400, "not valid Unicode"),
        (json.dumps({"text": "x" * 1_100_000}).encode(), 413, "limit"),
    ],
)
def test_bad_parse_requests(client: Any, body: bytes, status: int, words: str) -> None:
    response = client.post("/model/parse", content=body, headers={"Content-Type": "application/json"})
    assert words in assert_error(response, status)["message"]


def test_body_limit_without_content_length(client: Any) -> None:
    def chunks() -> Any:
        for _ in range(40):
            yield b" " * 50_000  # 2 MB, chunked: no Content-Length to reject up front

    response = client.post("/model/parse", content=chunks())
    assert_error(response, 413)


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"texts": "not a list"}, 400),
        ([1, 2], 400),
        (["ok", None], 400),
        ("just a string", 400),
        (["x"] * 1001, 413),
    ],
)
def test_bad_batch_requests(client: Any, body: Any, status: int) -> None:
    assert_error(client.post("/model/parse/batch", json=body), status)


def test_unknown_routes_methods_and_emulation(client: Any) -> None:
    assert_error(client.get("/no/such/endpoint"), 404)
    assert_error(client.get("/model/parse"), 405)
    assert_error(client.post("/model/parse?emulation_mode=LUIS", json={"text": "hi"}), 400)
    assert client.post("/model/parse?emulation_mode=rasa", json={"text": "hi"}).status_code == 200


def test_client_errors_leave_no_traceback_in_the_log(client: Any, server: ServerProcess) -> None:
    for body in (b"{", b"null", b'{"text": 1}', b"\x00\x01"):
        client.post("/model/parse", content=body)
    client.put("/model", json={"model_file": "../../etc/passwd.tar.gz"})
    assert client.get("/health").status_code == 200  # still alive
    log = server.log()
    assert "Traceback" not in log and "Exception in ASGI" not in log


# --- load ----------------------------------------------------------------------------------------------
def test_concurrent_load_has_no_errors(server: ServerProcess, model_a: Model) -> None:
    clients, per_client = 8, 50
    expected = {text: model_a.parse(text) for text in TEXTS}
    failures: list[str] = []
    done = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + 60

    def worker(offset: int) -> None:
        import httpx

        with http_client(server.url) as http:
            for i in range(per_client):
                if time.monotonic() > deadline:
                    failures.append("deadline")
                    return
                text = TEXTS[(offset + i) % len(TEXTS)]
                try:
                    response = http.post("/model/parse", json={"text": text})
                    ok = response.status_code == 200 and response.json() == expected[text]
                except httpx.HTTPError as error:
                    ok, response = False, error
                with lock:
                    done[0] += 1
                    if not ok:
                        failures.append(repr(response))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert failures == []
    assert done[0] == clients * per_client
    with http_client(server.url) as http:
        batching = http.get("/status").json()["batching"]
    assert batching["requests"] >= clients * per_client
    assert 1 <= batching["largest_batch"] <= 64


# --- auth -------------------------------------------------------------------------------------------
def test_auth_open_endpoints(auth_server: ServerProcess) -> None:
    with http_client(auth_server.url) as http:
        for path in ("/", "/version", "/health", "/openapi.json"):
            assert http.get(path).status_code == 200, path


def test_auth_required_endpoints(auth_server: ServerProcess) -> None:
    now = int(time.time())
    good_jwt = encode_jwt({"user": {"username": "bot", "role": "admin"}, "exp": now + 600}, JWT_SECRET)
    expired = encode_jwt({"user": {"username": "bot"}, "exp": now - 10}, JWT_SECRET)
    wrong_key = encode_jwt({"user": {"username": "bot"}}, "another-secret")
    with http_client(auth_server.url) as http:
        protected = [
            ("GET", "/status", None),
            ("POST", "/model/parse", {"text": "hi"}),
            ("POST", "/model/parse/batch", ["hi"]),
            ("PUT", "/model", {"model_file": "a.tar.gz"}),
            ("DELETE", "/model", None),
        ]
        for method, path, body in protected:
            body_401 = assert_error(http.request(method, path, json=body), 401)
            assert body_401["reason"] == "NotAuthenticated"
            assert_error(http.request(method, path + "?token=wrong", json=body), 401)
            for bad in ("wrong", expired, wrong_key):
                headers = {"Authorization": f"Bearer {bad}"}
                assert_error(http.request(method, path, json=body, headers=headers), 401)
        assert http.get("/status", params={"token": TOKEN}).status_code == 200
        assert http.post("/model/parse", params={"token": TOKEN}, json={"text": "hi"}).status_code == 200
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert http.post("/model/parse", headers=headers, json={"text": "hi"}).status_code == 200
        headers = {"Authorization": f"Bearer {good_jwt}"}
        assert http.post("/model/parse/batch", headers=headers, json=["hi"]).status_code == 200
        assert http.get("/status", headers=headers).json()["model_file"] == "a.tar.gz"
        # a JWT is not a token: it is only accepted as a Bearer header
        assert_error(http.get("/status", params={"token": good_jwt}), 401)
        log = auth_server.log()
        assert "Traceback" not in log
        assert '"GET /status?token=*** HTTP/1.1" 200' in log and TOKEN not in log  # access log redacted


def test_jwt_verification() -> None:
    payload = {"sub": "bot", "exp": 2_000_000_000}
    token = encode_jwt(payload, "k")
    assert decode_jwt(token, "k", now=1_900_000_000) == payload
    assert decode_jwt(token, "k", now=2_000_000_001) is None  # expired
    assert decode_jwt(token, "other") is None
    header, body, signature = token.split(".")
    assert decode_jwt(f"{header}.{body}.{signature[:-2]}xx", "k") is None  # tampered signature
    import base64

    none_header = base64.urlsafe_b64encode(b'{"alg":"none","typ":"JWT"}').rstrip(b"=").decode()
    assert decode_jwt(f"{none_header}.{body}.", "k") is None  # alg none refused
    assert decode_jwt(encode_jwt({"nbf": 2_000_000_000}, "k"), "k", now=1_900_000_000) is None
    for garbage in ("", "a.b", "a.b.c", "!!.!!.!!", "x" * 10_000):
        assert decode_jwt(garbage, "k") is None
    assert Authenticator().check(None, None)  # no auth configured
    auth = Authenticator(token="tök")
    assert auth.check("tök", None) and auth.check(None, "Bearer tök") and auth.check(None, "bearer tök")
    assert not auth.check("tok", None) and not auth.check(None, "Basic tök") and not auth.check(None, None)


# --- model reload ----------------------------------------------------------------------------------
def test_no_model_then_reload_while_serving(archives: dict[str, Path], tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (tmp_path / "outside.tar.gz").write_bytes(archives["a"].read_bytes())
    with ServerProcess(["-m", str(models)], ready_path="/version") as server, http_client(server.url) as http:
        # started without a model: 503 until PUT /model
        assert_error(http.post("/model/parse", json={"text": "hi"}), 503)
        assert_error(http.post("/model/parse/batch", json=["hi"]), 503)
        assert_error(http.get("/status"), 503)
        assert http.get("/health").status_code == 503
        shutil.copy(archives["a"], models / "a.tar.gz")
        shutil.copy(archives["b"], models / "b.tar.gz")
        (models / "broken.tar.gz").write_bytes(b"not a tarball")
        (models / "notes.txt").write_text("x")

        # names that are not archives inside the models folder are refused
        for name, status in [
            ("../outside.tar.gz", 400),
            (str(tmp_path / "outside.tar.gz"), 400),
            ("/etc/passwd", 400),
            ("http://example.com/model.tar.gz", 400),
            ("notes.txt", 400),
            ("missing.tar.gz", 404),
            ("broken.tar.gz", 400),
            (42, 400),
        ]:
            assert_error(http.put("/model", json={"model_file": name}), status)
        assert_error(http.put("/model", json={"model_file": "a.tar.gz", "model_server": {"url": "x"}}), 400)
        assert_error(http.put("/model", content=b"{"), 400)

        assert http.put("/model", json={"model_file": "a.tar.gz"}).status_code == 204
        assert http.get("/status").json()["model_file"] == "a.tar.gz"
        assert http.post("/model/parse", json={"text": "hi"}).status_code == 200

        # swap a -> b -> a while 4 clients keep parsing: every request is answered
        errors: list[str] = []
        answered = [0]
        stop = threading.Event()

        def hammer() -> None:
            with http_client(server.url) as own:
                for _ in range(2000):  # bounded; normally stopped by the event much earlier
                    if stop.is_set():
                        return
                    response = own.post("/model/parse", json={"text": "book a table in Berlin"})
                    if response.status_code != 200 or response.json()["intent"]["name"] is None:
                        errors.append(f"{response.status_code} {response.text[:200]}")
                    answered[0] += 1

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while answered[0] == 0 and not errors and time.monotonic() < deadline:
            time.sleep(0.01)  # on a busy machine the clients may start late: swap while they ask
        try:
            for name in ("b.tar.gz", "a.tar.gz", "b.tar.gz"):
                assert http.put("/model", json={"model_file": name}).status_code == 204
                assert http.get("/status").json()["model_file"] == name
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
        assert errors == [] and answered[0] > 0
        status = http.get("/status").json()
        assert status["model_file"] == "b.tar.gz" and "CountVectorsFeaturizer" in status["pipeline"]
        assert len(status["pipeline"]) == 3  # b: words only

        # a failed load keeps the current model
        assert_error(http.put("/model", json={"model_file": "broken.tar.gz"}), 400)
        assert http.get("/status").json()["model_file"] == "b.tar.gz"

        assert http.delete("/model").status_code == 204
        assert_error(http.post("/model/parse", json={"text": "hi"}), 503)
        assert "Traceback" not in server.log()


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"PPid:\t{pid}\n" in (entry / "status").read_text():
                found.add(int(entry.name))
        except OSError:  # it ended meanwhile
            continue
    return found


def test_several_workers(archives: dict[str, Path], model_a: Model) -> None:
    with ServerProcess(["-m", str(archives["a"]), "--workers", "2"], ready_path="/status") as server, \
            http_client(server.url) as http:
        for text in TEXTS[:3]:
            assert http.post("/model/parse", json={"text": text}).json() == model_a.parse(text)
        assert_error(http.delete("/model"), 409)
        assert server.process is not None
        answered = {http.get("/status").json()["worker_id"] for _ in range(5)}
        assert answered and {int(w.rpartition(":")[2]) for w in answered} <= children(server.process.pid)
        latencies = []
        for _ in range(30):  # with Nagle's algorithm on, each would wait ~40 ms for a delayed ACK
            start = time.perf_counter()
            assert http.post("/model/parse", json={"text": "hi"}).status_code == 200
            latencies.append(time.perf_counter() - start)
        assert sorted(latencies)[15] < 0.025


def test_workers_listening_socket_has_nagle_off() -> None:
    import socket

    from nlu_engine.server.run import NoDelayConfig

    config = NoDelayConfig("nlu_engine.server.run:app_from_environment", host="127.0.0.1", port=0)
    sock = config.bind_socket()
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()


def test_start_errors_are_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"garbage")
    for model in (tmp_path / "missing.tar.gz", broken):
        result = subprocess.run(
            [sys.executable, "-m", "nlu_engine.cli.main", "serve", "-m", str(model), "--port", "0"],
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 1
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
        assert str(model.name) in result.stderr


def test_cli_help_lists_serve_and_run() -> None:
    result = subprocess.run([sys.executable, "-m", "nlu_engine.cli.main", "run", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for flag in ("--model", "--port", "--auth-token", "--jwt-secret", "--cors", "--workers",
                 "--max-body-bytes", "--enable-api"):
        assert flag in result.stdout


# --- DIET through the server -----------------------------------------------------------------------
def test_diet_model_through_the_server(tmp_path_factory: pytest.TempPathFactory) -> None:
    out = tmp_path_factory.mktemp("diet")
    archive = train(PIPELINES / "diet.yml", NLU_DATA, out=out, fixed_model_name="diet",
                    overrides=["DIETClassifier.epochs=1", "ResponseSelector.epochs=1"], log=None)
    model = Model.load(archive)
    with ServerProcess(["-m", str(archive)], ready_path="/status", timeout=120) as server, \
            http_client(server.url, timeout=60) as http:
        assert "DIETClassifier" in http.get("/status").json()["pipeline"]
        for text in TEXTS[:4]:
            served = http.post("/model/parse", json={"text": text}).json()
            local = model.parse(text)
            assert served["intent"]["name"] == local["intent"]["name"]
            assert served["entities"] == local["entities"]
            assert served["intent"]["confidence"] == pytest.approx(local["intent"]["confidence"], abs=1e-5)
            assert served.keys() == local.keys()
        batch = http.post("/model/parse/batch", json=TEXTS[:4]).json()
        assert [r["intent"]["name"] for r in batch] == [model.parse(t)["intent"]["name"] for t in TEXTS[:4]]


# --- the micro-batcher in process ------------------------------------------------------------------
class FakeModel:
    def __init__(self, delay: float = 0.005, fail: bool = False) -> None:
        self.batches: list[int] = []
        self.delay = delay
        self.fail = fail

    def parse_batch(self, texts: list[str]) -> list[dict[str, Any]]:
        time.sleep(self.delay)  # runs on the worker thread, not the event loop
        self.batches.append(len(texts))
        if self.fail:
            raise RuntimeError("boom")
        return [{"text": text} for text in texts]


def test_micro_batcher_groups_concurrent_requests() -> None:
    model = FakeModel()
    batcher = MicroBatcher(lambda: model, max_batch=8, max_wait=0.001)

    async def run() -> list[dict[str, Any]]:
        first = await batcher.parse("alone")  # a lone request runs at once, in a batch of 1
        assert first == {"text": "alone"}
        return await asyncio.gather(*(batcher.parse(f"t{i}") for i in range(30)))

    results = asyncio.run(run())
    batcher.close()
    assert results == [{"text": f"t{i}"} for i in range(30)]
    assert model.batches[0] == 1
    assert sum(model.batches) == 31 and max(model.batches) == 8 and len(model.batches) < 31


def test_micro_batcher_bounds_the_padded_cost() -> None:
    model = FakeModel(delay=0.001)
    batcher = MicroBatcher(lambda: model, max_batch=64, max_wait=0.001, max_cost=100**2)
    long_texts = ["x" * 100] * 3 + ["y" * 50] * 8 + ["z"] * 70

    async def run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        together = await asyncio.gather(*(batcher.parse(t) for t in long_texts))
        return together, await batcher.parse_many(long_texts[::-1])

    together, many = asyncio.run(run())
    batcher.close()
    assert together == [{"text": t} for t in long_texts]
    assert many == [{"text": t} for t in long_texts[::-1]]  # in the client's order
    assert model.batches.count(1) >= 6  # each 100-character text alone, twice
    assert max(model.batches) <= 64 and sum(model.batches) == 2 * len(long_texts)


def test_micro_batcher_errors_reach_every_request() -> None:
    failing = FakeModel(fail=True)
    batcher = MicroBatcher(lambda: failing)
    empty = MicroBatcher(lambda: None)

    async def run() -> None:
        outcomes = await asyncio.gather(*(batcher.parse("x") for _ in range(5)), return_exceptions=True)
        assert all(isinstance(o, RuntimeError) for o in outcomes)
        assert await batcher.parse_many([]) == []
        with pytest.raises(NoModelError):
            await empty.parse("x")
        with pytest.raises(NoModelError):
            await empty.parse_many(["x"])

    asyncio.run(run())
    batcher.close()
    empty.close()
