"""``nlu-engine serve`` (alias ``run``): the HTTP API, a drop-in for ``rasa run --enable-api``.

Nothing heavy is imported here; Starlette, uvicorn and the model load inside the command.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from nlu_engine.cli import allow
from nlu_engine.contract.errors import NLUError


def register(commands: Any) -> None:
    """Add ``serve`` and its alias ``run`` to the CLI's subcommands."""
    serve = commands.add_parser(
        "serve",
        aliases=["run"],
        help="serve /model/parse over HTTP (like rasa run --enable-api)",
        description="Serve the model over HTTP: POST /model/parse, /model/parse/batch, GET /status, "
        "/, /version, /health, /openapi.json; PUT /model loads an archive from the models folder, "
        "DELETE /model unloads it. With --auth-token or --jwt-secret every endpoint but "
        "/, /version, /health and /openapi.json needs the token.",
    )
    serve.add_argument("-m", "--model", default="models",
                       help="archive, or folder whose newest archive is served; the folder (or the "
                            "archive's folder) is the only place PUT /model loads from (default: models)")
    serve.add_argument("--host", "-i", "--interface", dest="host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1; 0.0.0.0 for all interfaces)")
    serve.add_argument("-p", "--port", type=int, default=5005, help="port (default: 5005)")
    serve.add_argument("--auth-token", default=None,
                       help="require this token (?token=, 'Authorization: Bearer' or \"token\" in "
                            "the JSON body, as Rasa sends it) on every endpoint but /, /version, "
                            "/health and /openapi.json; default: $NLU_ENGINE_AUTH_TOKEN")
    serve.add_argument("--jwt-secret", default=None,
                       help="also accept HS256 JWTs signed with this secret as 'Authorization: Bearer'; "
                            "default: $NLU_ENGINE_JWT_SECRET")
    serve.add_argument("--jwt-method", default="HS256", choices=["HS256"],
                       help="JWT algorithm (only HS256)")
    serve.add_argument("--cors", action="append", default=None, metavar="ORIGIN",
                       help="allow cross-origin requests from ORIGIN ('*' for any); repeatable")
    _add_limits(serve)
    serve.add_argument("--access-log", action="store_true", help="log one line per request")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _add_log_options(serve)
    serve.add_argument("--enable-api", action="store_true",
                       help="accepted for Rasa compatibility; the API is always on")
    allow.add_arguments(serve)
    allow.add_runtime_argument(serve)
    serve.set_defaults(func=cmd_serve)


def _add_limits(serve: argparse.ArgumentParser) -> None:
    """Workers, request limits and timeouts, batching and threads."""
    serve.add_argument("--workers", type=int, default=1,
                       help="worker processes, each with its own copy of the model (default: 1; "
                            "PUT /model reaches every worker; DELETE /model needs 1)")
    serve.add_argument("--max-body-bytes", type=int, default=1_000_000,
                       help="largest request body accepted; larger ones get 413 (default: 1000000)")
    serve.add_argument("--max-text-chars", type=int, default=2_000,
                       help="longest message accepted; longer ones get 413 (default: 2000; DIET's cost "
                            "grows with the square of the length)")
    serve.add_argument("--body-timeout", type=float, default=30.0, metavar="SECONDS",
                       help="longest a request body may take to arrive; slower ones get 408 and "
                            "their connection closed (default: 30)")
    serve.add_argument("--header-timeout", type=float, default=15.0, metavar="SECONDS",
                       help="longest a request's headers may take to arrive (from the connection's "
                            "start, or the previous response); slower ones get 408 and their "
                            "connection closed (default: 15)")
    serve.add_argument("--max-batch", type=int, default=64,
                       help="most concurrent requests parsed as one batch (default: 64)")
    serve.add_argument("--batch-wait-ms", type=float, default=1.5,
                       help="under concurrent load, how long a batch waits for more requests "
                            "(default: 1.5; a lone request never waits)")
    serve.add_argument("--tf-threads", type=int, default=None,
                       help="TensorFlow intra-op threads per process (default: 1, or "
                            "$TF_NUM_INTRAOP_THREADS; more helps only for large batches on many cores)")


def _add_log_options(serve: argparse.ArgumentParser) -> None:
    """``--log-messages`` and what goes with it (the server's message log)."""
    log = serve.add_argument_group(
        "logging what the server parses",
        "record every parse (text, time, model, intent, ranking, entities, confidence, sender_id "
        "and message_id) in a database, off the parse path: a database that cannot be written "
        "is one warning, and parsing goes on")
    log.add_argument("--log-messages", metavar="DB", default=None,
                     help="a file (an SQLite database, made if missing) or a postgresql:// URL")
    log.add_argument("--log-redact", action="append", default=[], metavar="RULE",
                     help="mask before anything is stored: an entity type (its text and value "
                          "become [TYPE]) or re:PATTERN (each match becomes [redacted]); repeatable")
    log.add_argument("--log-retention-days", type=float, default=None, metavar="N",
                     help="delete the rows older than N days (checked every minute)")
    log.add_argument("--log-max-rows", type=int, default=None, metavar="N",
                     help="keep only the newest N rows (checked every minute and at shutdown)")


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise NLUError(
            "the server needs starlette and uvicorn: pip install 'nlu-engine[server]'"
        ) from None
    from nlu_engine.server.run import serve

    message_log = log_settings(args)
    allowed = allow.allowed(args.allow_component, args.config)
    serve(
        model=args.model,
        host=args.host,
        port=args.port,
        auth_token=args.auth_token or os.environ.get("NLU_ENGINE_AUTH_TOKEN") or None,
        jwt_secret=args.jwt_secret or os.environ.get("NLU_ENGINE_JWT_SECRET") or None,
        cors=args.cors,
        workers=args.workers,
        max_body=args.max_body_bytes,
        max_text_chars=args.max_text_chars,
        body_timeout=args.body_timeout,
        header_timeout=args.header_timeout,
        max_batch=args.max_batch,
        batch_wait=args.batch_wait_ms / 1000,
        tf_threads=args.tf_threads,
        access_log=args.access_log,
        log_level=args.log_level,
        allow_components=sorted(allowed),
        message_log=message_log,
        runtime=args.runtime,
    )
    return 0


def log_settings(args: argparse.Namespace) -> Any:
    """The ``--log-*`` options as ``LogSettings``, or None without ``--log-messages``."""
    if args.log_messages is None:
        given = [flag for flag, value in (("--log-redact", args.log_redact),
                                          ("--log-retention-days", args.log_retention_days),
                                          ("--log-max-rows", args.log_max_rows)) if value]
        if given:
            raise NLUError(f"{', '.join(given)} needs --log-messages DB")
        return None
    try:
        import sqlalchemy  # noqa: F401
    except ImportError:
        raise NLUError("--log-messages needs SQLAlchemy: pip install 'nlu-engine[server]'") from None
    from nlu_engine.server.message_log import LogSettings

    return LogSettings(
        target=args.log_messages,
        redact=tuple(args.log_redact),
        retention_days=args.log_retention_days,
        max_rows=args.log_max_rows,
    )
