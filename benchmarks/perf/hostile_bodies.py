"""Hostile request bodies against a real ``nlu-engine serve``: a 1 GB body (declared, and chunked
without a length), one sent a byte a second, and 100,000-character messages.

    .venv/bin/python -m benchmarks.perf.hostile_bodies [--archive A.tar.gz] [--gigabytes 1] \
        [--slow-seconds 40] [--json out.json]

For each: the answer (status and message), how long it took, how many bytes the client got to
send before the server closed the connection, the server's RSS before and after (VmRSS, and
VmHWM, its peak), and whether a second client was served meanwhile (a parse every 0.2 s: its
errors and slowest answer). The long messages go to a server with the default limits (413) and to
one started with ``--max-text-chars 100000`` (parse or 400), each with a time. Without
``--archive`` a small logistic-regression archive is trained on data/nlu.yml. Loopback only;
every loop is bounded by a byte count or a time.
"""

from __future__ import annotations

import argparse
import json
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ROOT, emit_json
from nlu_engine.server.process import LOOPBACK, ServerProcess

BLOCK = b" " * 65536


def memory(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of ``pid`` in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = round(int(value.split()[0]) / 1024, 1)
    return fields


def read_answer(sock: socket.socket, timeout: float) -> tuple[int, str]:
    """Status and body of the response on ``sock`` (0 and a note when none came)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    except OSError as error:
        return 0, f"no answer ({type(error).__name__})"
    if not head.startswith(b"HTTP/"):
        return 0, "no answer"
    return int(head.split()[1]), body.decode("utf-8", "replace")


class Prober(threading.Thread):
    """Another client: a parse every 0.2 s on its own connection while a hostile one runs."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.stop = threading.Event()
        self.answers = 0
        self.errors = 0
        self.slowest = 0.0

    def run(self) -> None:
        import http.client

        while not self.stop.is_set():
            began = time.perf_counter()
            try:
                connection = http.client.HTTPConnection(LOOPBACK, self.port, timeout=30)
                connection.request("POST", "/model/parse", json.dumps({"text": "hi there"}),
                                   {"Content-Type": "application/json"})
                ok = connection.getresponse().status == 200
                connection.close()
            except (OSError, http.client.HTTPException):
                ok = False
            self.answers += ok
            self.errors += not ok
            self.slowest = max(self.slowest, time.perf_counter() - began)
            self.stop.wait(0.2)

    def report(self) -> dict[str, Any]:
        self.stop.set()
        self.join(35)
        return {"answers": self.answers, "errors": self.errors, "slowest_ms": round(1000 * self.slowest, 1)}


def hostile(server: ServerProcess, send: Any) -> dict[str, Any]:
    """Run ``send(sock)`` (which returns the answer and the bytes sent) with a prober beside it."""
    assert server.process is not None
    before = memory(server.process.pid)
    prober = Prober(server.port)
    prober.start()
    began = time.perf_counter()
    with socket.create_connection((LOOPBACK, server.port), timeout=30) as sock:
        status, message, sent = send(sock)
    seconds = time.perf_counter() - began
    after = memory(server.process.pid)
    return {"status": status, "message": message[:160], "seconds": round(seconds, 2),
            "bytes_sent": sent, "rss_before_mb": before["VmRSS"], "rss_after_mb": after["VmRSS"],
            "peak_rss_mb": after["VmHWM"], "other_client": prober.report()}


def send_body(total: int, chunked: bool) -> Any:
    """A POST of ``total`` bytes, declared or chunked, sent until the server answers or closes."""

    def send(sock: socket.socket) -> tuple[int, str, int]:
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
        sock.sendall(f"POST /model/parse HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"{framing}\r\n\r\n".encode())
        block = b"%x\r\n%s\r\n" % (len(BLOCK), BLOCK) if chunked else BLOCK
        sent = 0
        sock.settimeout(30)
        try:
            while sent < total:
                sock.sendall(block)
                sent += len(BLOCK)
                sock.setblocking(False)
                try:
                    if sock.recv(1, socket.MSG_PEEK):  # an answer: stop sending
                        break
                except BlockingIOError:
                    pass
                finally:
                    sock.setblocking(True)
                    sock.settimeout(30)
        except OSError:
            pass  # closed by the server
        status, message = read_answer(sock, 30)
        return status, message, sent

    return send


def send_slowly(seconds: float) -> Any:
    """A 1,000-byte body declared, sent a byte a second for at most ``seconds``."""

    def send(sock: socket.socket) -> tuple[int, str, int]:
        sock.sendall(b"POST /model/parse HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n")
        sent = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                sock.sendall(b" ")
            except OSError:
                break
            sent += 1
            sock.settimeout(1.0)
            try:
                if sock.recv(1, socket.MSG_PEEK):
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        status, message = read_answer(sock, 5)
        return status, message, sent

    return send


def long_message(server: ServerProcess, text: str) -> dict[str, Any]:
    """One message through the server: status, the start of the answer and the seconds."""
    import http.client

    began = time.perf_counter()
    connection = http.client.HTTPConnection(LOOPBACK, server.port, timeout=300)
    connection.request("POST", "/model/parse", json.dumps({"text": text}),
                       {"Content-Type": "application/json"})
    response = connection.getresponse()
    body = response.read().decode("utf-8", "replace")
    connection.close()
    assert server.process is not None
    return {"status": response.status, "answer": body[:120], "seconds": round(time.perf_counter() - began, 3),
            "peak_rss_mb": memory(server.process.pid)["VmHWM"]}


LONG = {"100,000 characters of words": ("lorem ipsum dolor sit amet " * 4000)[:100_000],
        "one 100,000-character token": "x" * 100_000}


def run(archive: str | None, gigabytes: float, slow_seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="nlu-hostile-") as folder:
        if archive is None:
            from nlu_engine.assembly.model import train

            archive = str(train(ROOT / "nlu_engine" / "pipelines" / "logreg.yml", ROOT / "data" / "nlu.yml",
                                out=Path(folder), fixed_model_name="hostile", log=None))
        total = int(gigabytes * 1_000_000_000)
        result: dict[str, Any] = {"archive": Path(archive).name}
        with ServerProcess(["-m", archive, "--log-level", "warning"]) as server:
            result["declared_body"] = hostile(server, send_body(total, chunked=False))
            result["chunked_body"] = hostile(server, send_body(total, chunked=True))
            result["slow_body"] = hostile(server, send_slowly(slow_seconds))
            result["long_default_limit"] = {name: long_message(server, text) for name, text in LONG.items()}
        with ServerProcess(["-m", archive, "--log-level", "warning", "--max-text-chars", "100000"]) as server:
            result["long_raised_limit"] = {name: long_message(server, text) for name, text in LONG.items()}
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", default=None, help="model archive (default: a small one trained here)")
    parser.add_argument("--gigabytes", type=float, default=1.0, help="size of the large bodies (default: 1)")
    parser.add_argument("--slow-seconds", type=float, default=40,
                        help="how long to keep sending the slow body (default: 40; the server's "
                             "--body-timeout is 30)")
    parser.add_argument("--json", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    emit_json(run(args.archive, args.gigabytes, args.slow_seconds), args.json)


if __name__ == "__main__":
    main()
