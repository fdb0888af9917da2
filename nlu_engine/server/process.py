"""Run ``nlu-engine serve`` as a child process on a free loopback port.

Tests and benchmarks start a real server with it (the server tests, ``benchmarks/perf``'s
``serve_benchmark`` and ``scaling``, ``benchmarks/rasa/rasa_dialogue_e2e``); nothing else in the
package uses it: ``with ServerProcess(["-m", model]) as server: server.url``. Only loopback
addresses are used, waits are bounded, and the child is stopped by its own pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import IO

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """``with ServerProcess(["-m", model]) as server: server.url`` — started and ready, then stopped."""

    def __init__(
        self,
        args: list[str],
        ready_path: str = "/version",
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = list(args)
        self.ready_path = ready_path
        self.timeout = timeout
        self.env = env
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.ready_seconds = 0.0
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> ServerProcess:
        for _attempt in range(3):  # another process may grab the free port before the child binds it
            self.port = free_port()
            self._log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open for log(); closed by GC)
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1", **(self.env or {})}
            command = [sys.executable, "-m", "nlu_engine.cli.main", "serve", "--host", LOOPBACK,
                       "--port", str(self.port), *self.args]
            self.started_at = time.perf_counter()
            self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env)
            if self._wait_ready():
                self.ready_seconds = time.perf_counter() - self.started_at
                return self
            if "address already in use" not in self.log():
                break
            self.stop()
        log = self.log()
        self.stop()
        raise RuntimeError(f"server did not become ready within {self.timeout:.0f} s; its log:\n{log}")

    def _wait_ready(self) -> bool:
        deadline = time.perf_counter() + self.timeout
        while time.perf_counter() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.02)
        return False

    def log(self) -> str:
        """Everything the server wrote so far (stdout and stderr)."""
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful), then SIGKILL after ``timeout``; returns the exit code."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        return process.returncode

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
