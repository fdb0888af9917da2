"""Start the server with uvicorn: resolve and load the model first, so that a bad ``-m`` is a
one-line error before anything listens, then serve until SIGINT/SIGTERM.

With ``--workers N > 1`` uvicorn starts N processes that each load the model (settings travel
in the ``NLU_ENGINE_SERVE`` environment variable to :func:`app_from_environment`); ``PUT /model``
then reaches every worker through a shared swap file (:mod:`nlu_engine.server.swaps`), and
``DELETE /model`` is refused (a worker without a model would answer 503 beside the others).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn

from nlu_engine.contract.errors import NLUError
from nlu_engine.contract.threads import blas_thread_environment
from nlu_engine.server.header_timeout import HEADER_TIMEOUT, HeaderTimeoutProtocol

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.server.message_log import LogSettings

ENV_SETTINGS = "NLU_ENGINE_SERVE"
logger = logging.getLogger("nlu_engine.server")


class NoDelayConfig(uvicorn.Config):
    """uvicorn's config, whose shared listening socket (``--workers``) has Nagle's algorithm off,
    and whose connections' request headers must complete within ``header_timeout`` seconds
    (``--header-timeout``; :mod:`nlu_engine.server.header_timeout`).

    uvicorn binds that socket with protocol 0, so asyncio does not set TCP_NODELAY on accepted
    connections, and each response then waits for the client's delayed-ACK timer. Accepted
    sockets inherit the option from the listening socket on Linux.
    """

    def __init__(self, app: Any, header_timeout: float = HEADER_TIMEOUT, **kwargs: Any) -> None:
        super().__init__(app, http=HeaderTimeoutProtocol, **kwargs)
        self.header_timeout = header_timeout

    def bind_socket(self) -> socket.socket:
        sock = super().bind_socket()
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


class RedactToken(logging.Filter):
    """Hide ``?token=`` values in access-log lines."""

    PATTERN = re.compile(r"(?<=[?&]token=)[^&\s\"]*")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                self.PATTERN.sub("***", arg) if isinstance(arg, str) else arg for arg in record.args
            )
        return True


def log_config(level: str = "info") -> dict[str, Any]:
    """One plain line per record on stderr, for uvicorn and nlu_engine alike."""
    handler = {"class": "logging.StreamHandler", "formatter": "plain", "stream": "ext://sys.stderr"}
    access = {**handler, "filters": ["redact_token"]}
    level = level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)-7s %(message)s"}},
        "filters": {"redact_token": {"()": "nlu_engine.server.run.RedactToken"}},
        "handlers": {"default": handler, "access": access},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": level, "propagate": False},
            "uvicorn.access": {"handlers": ["access"], "level": level, "propagate": False},
            "nlu_engine": {"handlers": ["default"], "level": level, "propagate": False},
        },
    }


def resolve_model(model: str | Path) -> tuple[Path | None, Path]:
    """(archive to load or None, models folder) for ``-m``: an archive, or a folder (newest)."""
    from nlu_engine.assembly.persistence import newest_archive

    path = Path(model)
    if path.is_dir():
        archives = list(path.glob("*.tar.gz"))
        return (newest_archive(path) if archives else None), path
    if path.is_file():
        return path, path.parent
    raise NLUError(f"model '{model}' not found: give an archive (.tar.gz) or a folder of archives")


def set_tensorflow_threads(threads: int | None) -> None:
    """TensorFlow's thread pools, set before it is imported (``TF_NUM_*_THREADS``).

    One intra-op thread by default: a parse is a handful of small ops, for which TensorFlow's
    thread hand-offs cost more than they save, and the other cores stay free for the HTTP loop.
    An explicit environment setting wins over the default.
    """
    if threads is not None:
        if threads < 1:
            raise NLUError("--tf-threads must be at least 1")
        os.environ["TF_NUM_INTRAOP_THREADS"] = str(threads)
        os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    else:
        os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
        os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")


def check_archive(path: Path, allow_components: frozenset[str] = frozenset()) -> None:
    """Validate an archive (members and manifest) without importing the pipeline's libraries."""
    from nlu_engine.assembly.persistence import extract_archive

    with tempfile.TemporaryDirectory(prefix="nlu-check-") as tmp:
        extract_archive(path, Path(tmp), allow_components)


def _check_limits(workers: int, max_body: int, max_text_chars: int, max_batch: int,
                  batch_wait: float, port: int, body_timeout: float = 30.0,
                  header_timeout: float = HEADER_TIMEOUT) -> None:
    """One line for a serving limit out of range, before anything loads."""
    if workers < 1:
        raise NLUError("--workers must be at least 1")
    if max_body < 1:
        raise NLUError("--max-body-bytes must be positive")
    if max_text_chars < 1:
        raise NLUError("--max-text-chars must be positive")
    if not body_timeout > 0:
        raise NLUError("--body-timeout must be a positive number of seconds")
    if not 0 < header_timeout <= 3600:
        raise NLUError("--header-timeout must be a positive number of seconds (at most 3600)")
    if max_batch < 1 or not 0 <= batch_wait <= 1:
        raise NLUError("--max-batch must be at least 1 and --batch-wait-ms between 0 and 1000")
    if not 0 <= port <= 65535:
        raise NLUError(f"--port {port} is not a TCP port (0-65535)")


def serve(
    model: str | Path = "models",
    host: str = "127.0.0.1",
    port: int = 5005,
    auth_token: str | None = None,
    jwt_secret: str | None = None,
    cors: list[str] | None = None,
    workers: int = 1,
    max_body: int = 1_000_000,
    max_text_chars: int = 2_000,
    body_timeout: float = 30.0,
    header_timeout: float = HEADER_TIMEOUT,
    max_batch: int = 64,
    batch_wait: float = 0.0015,
    tf_threads: int | None = None,
    access_log: bool = False,
    log_level: str = "info",
    allow_components: list[str] | None = None,
    message_log: LogSettings | None = None,
    runtime: str | None = None,
) -> None:
    """Load the model and serve the API until interrupted.

    ``allow_components``: the custom component classes a model may import, at startup and on
    ``PUT /model`` alike. ``message_log``: record every parse (``--log-messages``); its database
    is opened and checked here, so one that is not a log is a one-line error before anything
    listens. ``runtime``: the parse runtime, overriding each archive's (``--runtime``).
    """
    import logging.config

    from nlu_engine.assembly.registry import allowed_components
    from nlu_engine.nn.onnx_runtime import check_runtime
    from nlu_engine.server.app import create_app, load_model

    if runtime is not None:
        check_runtime(runtime, "--runtime")
    _check_limits(workers, max_body, max_text_chars, max_batch, batch_wait, port, body_timeout,
                  header_timeout)
    allowed = allowed_components(allow_components)
    set_tensorflow_threads(tf_threads)
    logging.config.dictConfig(log_config(log_level))
    archive, models_dir = resolve_model(model)
    if message_log is not None:
        _check_message_log(message_log)
    if archive is None:
        logger.warning("no model archive in '%s'; answering 503 until PUT /model loads one", models_dir)
    settings: dict[str, Any] = {
        "model_path": str(archive) if archive else None,
        "models_dir": str(models_dir),
        "auth_token": auth_token,
        "jwt_secret": jwt_secret,
        "cors": cors or None,
        "max_body": max_body,
        "max_text_chars": max_text_chars,
        "body_timeout": body_timeout,
        "batch_size": max_batch,
        "batch_wait": batch_wait,
        "allow_components": sorted(allowed),
        "message_log": message_log.as_dict() if message_log is not None else None,
        "runtime": runtime,
    }
    common: dict[str, Any] = {
        "host": host,
        "port": port,
        "access_log": access_log,
        "log_config": log_config(log_level),
        "server_header": False,
        "timeout_graceful_shutdown": 10,
        "header_timeout": header_timeout,
    }
    if workers == 1:
        loaded = load_model(archive, allowed, runtime) if archive is not None else None
        app = create_app(**settings, model=loaded)
        uvicorn.Server(NoDelayConfig(app, **common)).run()
        return
    if archive is not None:
        check_archive(archive, allowed)
    run_workers(workers, settings, common)


def _check_message_log(message_log: LogSettings) -> None:
    """Open (creating or migrating) the message log once, before any worker starts: a database
    that is not a log is a one-line error before anything listens."""
    from nlu_engine.server.message_store import open_store

    store = open_store(message_log.target)
    logger.info("logging every parse to %s", store.description)
    store.close()


def run_workers(workers: int, settings: dict[str, Any], common: dict[str, Any]) -> None:
    """``workers`` uvicorn processes on one socket, each loading the model from ``settings``
    (passed in the environment) and given its share of the cores for BLAS threads; a swap file
    in a temporary folder carries ``PUT /model`` from one worker to all (swaps.py)."""
    from uvicorn.supervisors import Multiprocess

    with tempfile.TemporaryDirectory(prefix="nlu-serve-") as shared:
        os.environ[ENV_SETTINGS] = json.dumps({**settings, "swap_file": str(Path(shared) / "swap.json")})
        os.environ.update(blas_thread_environment(workers, os.environ))
        config = NoDelayConfig(
            "nlu_engine.server.run:app_from_environment", factory=True, workers=workers, **common
        )
        # as uvicorn.run does it (older uvicorn versions also take the target)
        takes_target = "target" in inspect.signature(Multiprocess).parameters
        extra = {"target": uvicorn.Server(config).run} if takes_target else {}
        Multiprocess(config, sockets=[config.bind_socket()], **extra).run()


def app_from_environment() -> Any:
    """The app of one worker process (``--workers N``), configured by ``NLU_ENGINE_SERVE``."""
    from nlu_engine.server.app import create_app

    settings = json.loads(os.environ[ENV_SETTINGS])
    return create_app(**settings, allow_reload=False)
