"""Start a local Ray, or connect to a cluster (``--ray-address``), for the length of a command.

A wrong address is a one-line error within :data:`PROBE_SECONDS`: Ray's own connection keeps
retrying for minutes when nothing answers, and waits forever on a port that answers but is not
Ray (a dashboard port, say). So the address is first tried over TCP, then by a short-lived
``ray.init`` in a child process that is stopped after the deadline; only then does this process
connect.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator

from nlu_engine.contract.errors import NLUError
from nlu_engine.distributed import require_ray

PROBE_SECONDS = 20.0
TCP_SECONDS = 5.0
ADDRESS_HELP = "give the head node's address: host:6379, ray://host:10001, or auto"
PROBE = ("import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False, logging_level='ERROR'); "
         "ray.shutdown()")


def split_address(address: str) -> tuple[str, int]:
    """(host, port) of ``host:port`` or ``ray://host:port``."""
    rest = address.removeprefix("ray://")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise NLUError(f"--ray-address {address!r} is not host:port; {ADDRESS_HELP}")
    return host, int(port)


def check_address(address: str, probe_seconds: float = PROBE_SECONDS) -> None:
    """A one-line error unless a Ray cluster answers at ``address`` within ``probe_seconds``."""
    host, port = split_address(address)
    try:
        socket.create_connection((host, port), timeout=TCP_SECONDS).close()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise NLUError(f"--ray-address {address}: nothing answers at {host}:{port} ({reason}); "
                       f"{ADDRESS_HELP}") from None
    env = {**os.environ, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
    try:
        probe = subprocess.run([sys.executable, "-c", PROBE, address], capture_output=True, text=True,
                               timeout=probe_seconds, env=env)
    except subprocess.TimeoutExpired:
        raise NLUError(f"--ray-address {address}: {host}:{port} answers but no Ray cluster connected "
                       f"within {probe_seconds:.0f} s; {ADDRESS_HELP}") from None
    if probe.returncode != 0:
        lines = [line for line in probe.stderr.splitlines() if line.strip()]
        reason = lines[-1][:300] if lines else f"exit code {probe.returncode}"
        raise NLUError(f"--ray-address {address}: could not connect ({reason}); {ADDRESS_HELP}")


def quiet_ray() -> None:
    """Ray's informational messages off the terminal (they stay in Ray's session logs): the
    command prints its own progress, and Ray's errors reach it as exceptions."""
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")
    warnings.filterwarnings("ignore", category=UserWarning, module=r"ray\.data\.")
    logging.getLogger("ray").setLevel(logging.ERROR)
    import ray.data  # noqa: F401 - configures its loggers on import; quieten them after

    for handler in logging.getLogger("ray.data").handlers:
        # Ray Data's own console handler only: not its session files, nor a handler someone
        # else attached (a test runner's capture)
        kind = type(handler)
        if kind.__module__.startswith("ray.") and "File" not in kind.__name__:
            handler.setLevel(logging.ERROR)


@contextlib.contextmanager
def connect(address: str | None = None, num_cpus: int | None = None) -> Iterator[None]:
    """Ray for the block: the cluster at ``address`` (``auto``: the one running on this machine),
    else a new local Ray with ``num_cpus`` CPUs (default: all), shut down afterwards. A Ray the
    caller already started is used as it is and left running."""
    require_ray()
    import ray

    if ray.is_initialized():
        yield
        return
    quiet_ray()
    if address and address != "auto":
        check_address(address)
    options: dict[str, object] = {"log_to_driver": False, "logging_level": logging.ERROR}
    if not address:
        options.update(num_cpus=num_cpus, include_dashboard=False)
    try:
        ray.init(address=address, **options)
    except ConnectionError as error:
        reason = str(error).splitlines()[0][:300] if str(error) else type(error).__name__
        raise NLUError(f"--ray-address {address}: {reason}; {ADDRESS_HELP}") from None
    try:
        yield
    finally:
        ray.shutdown()
