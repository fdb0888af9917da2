"""Request bodies are bounded while they stream: too large (declared or not) is a 413 and a closed
connection, too slow a 408; the server never reads the rest, and other clients are served.

A real ``serve`` process on loopback, spoken to over raw sockets (a client library would not send
a 1 GB Content-Length with a short body, or a byte at a time).
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nlu_engine.assembly.model import train
from nlu_engine.server.process import LOOPBACK, ServerProcess
from tests.extras import requires_extra

pytestmark = requires_extra("server")

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 100_000
HEADER_TIMEOUT = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> Iterator[ServerProcess]:
    out = tmp_path_factory.mktemp("models")
    archive = train(ROOT / "nlu_engine" / "pipelines" / "logreg.yml", tiny_data_path, out=out,
                    fixed_model_name="tiny", log=None)
    args = ["-m", str(archive), "--max-body-bytes", str(LIMIT), "--body-timeout", "1",
            "--header-timeout", str(HEADER_TIMEOUT), "--auth-token", "t0ken"]
    with ServerProcess(args) as running:
        yield running


def connect(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection((LOOPBACK, server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(path: str, length: str | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            f"{framing}\r\n\r\n").encode()


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], dict]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    header, _, body = data.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return int(lines[0].split()[1]), headers, json.loads(body)


def send_until_closed(sock: socket.socket, budget: int) -> int:
    """Keep sending body bytes; how many went before the server closed the connection."""
    sent = 0
    block = b" " * 65536
    try:
        while sent < budget:
            sent += sock.send(block)
    except OSError:  # reset or broken pipe: the server closed it
        return sent
    sock.settimeout(5)
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(65536) == b"", "the server kept the connection open"
    return sent


@pytest.mark.parametrize(
    "path", ["/model/parse?token=t0ken", "/model/parse", "/model/parse/batch?token=t0ken"]
)
def test_a_declared_huge_body_is_refused_unread(server: ServerProcess, path: str) -> None:
    with connect(server) as sock:
        sock.sendall(head(path, str(10**9)) + b'{"text": "')
        status, headers, body = read_response(sock)
        assert status == 413 and headers["connection"] == "close"
        assert body["code"] == 413 and str(LIMIT) in body["message"]
        assert send_until_closed(sock, 50_000_000) < 50_000_000


def test_an_undeclared_body_is_cut_at_the_limit(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(head("/model/parse?token=t0ken", None))
        chunk = b"%x\r\n%s\r\n" % (16384, b" " * 16384)
        sent = 0
        sock.settimeout(0.05)
        while True:  # stream chunks until the server answers
            sock.sendall(chunk)
            sent += 16384
            assert sent < 50 * LIMIT, "no answer after 50 times the limit"
            try:
                first = sock.recv(1, socket.MSG_PEEK)
            except TimeoutError:
                continue
            assert first
            break
        sock.settimeout(10)
        status, headers, body = read_response(sock)
        assert status == 413 and headers["connection"] == "close" and "limit" in body["message"]
        assert send_until_closed(sock, 50_000_000) < 50_000_000


def test_a_slow_body_times_out_while_others_are_served(server: ServerProcess) -> None:
    with connect(server) as slow, connect(server) as other:
        slow.sendall(head("/model/parse?token=t0ken", "100") + b'{"text"')
        other.sendall(head("/model/parse?token=t0ken", "15") + b'{"text": "hi"}\n')
        status, _, result = read_response(other)
        assert status == 200 and result["text"] == "hi"
        for _ in range(100):  # a byte at a time, far slower than the timeout allows
            try:
                slow.sendall(b" ")
            except OSError:
                break
            time.sleep(0.05)
            try:
                slow.settimeout(0.001)
                if slow.recv(1, socket.MSG_PEEK):
                    break
            except TimeoutError:
                pass
        slow.settimeout(10)
        status, headers, body = read_response(slow)
        assert status == 408 and headers["connection"] == "close" and body["code"] == 408
        assert "took longer than 1 s" in body["message"]


def test_headers_sent_a_byte_at_a_time_time_out_while_others_are_served(server: ServerProcess) -> None:
    request = head("/model/parse?token=t0ken", "15") + b'{"text": "hi"}\n'
    with connect(server) as slow, connect(server) as other:
        started = time.monotonic()
        answer = b""
        for byte in request[:-30]:  # bounded: far more time than the bound allows, never the end
            try:
                slow.sendall(bytes([byte]))
                slow.settimeout(0.1)
                answer = slow.recv(65536)  # nothing until the server gives up
                break
            except TimeoutError:
                continue
            except OSError:  # the server closed it between two bytes
                break
            finally:
                if time.monotonic() - started < HEADER_TIMEOUT - 0.5:  # the others are served meanwhile
                    other.sendall(request)
                    assert read_response(other)[0] == 200
        elapsed = time.monotonic() - started
        slow.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            while chunk := slow.recv(65536):
                answer += chunk
        assert HEADER_TIMEOUT - 0.5 < elapsed < HEADER_TIMEOUT + 3, elapsed
        status_line, _, body = answer.partition(b"\r\n\r\n")
        assert status_line.startswith(b"HTTP/1.1 408 ") and b"connection: close" in status_line
        assert json.loads(body)["code"] == 408 and b"--header-timeout" in body
        # the whole answer was read up to the close: the server closed the connection
        other.sendall(request)
        assert read_response(other)[0] == 200  # a connection of the normal client, kept alive


def test_an_unauthenticated_body_is_not_read_either(server: ServerProcess) -> None:
    with connect(server) as sock:
        sock.sendall(head("/model", "1000000000").replace(b"POST", b"PUT") + b"{")
        status, headers, _ = read_response(sock)
        assert status == 401 and headers["connection"] == "close"
        assert send_until_closed(sock, 50_000_000) < 50_000_000



@pytest.mark.parametrize("seconds", [0, -1, float("nan"), 7200])
def test_a_header_timeout_out_of_range_is_refused_in_one_line(seconds: float) -> None:
    from nlu_engine.contract.errors import NLUError
    from nlu_engine.server.run import serve

    with pytest.raises(NLUError, match=r"^--header-timeout must be a positive number of seconds") as error:
        serve(model="no-such-folder", header_timeout=seconds)
    assert "\n" not in str(error.value)
