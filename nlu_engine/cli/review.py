"""``nlu-engine review``: the review page over a message log; ``review compare``: old against new.

Nothing heavy is imported here: Starlette, uvicorn, SQLAlchemy and the models load in the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from nlu_engine.contract.errors import NLUError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
TOKEN_VARIABLE = "NLU_ENGINE_REVIEW_TOKEN"


def register(commands: Any) -> None:
    """Add ``review`` (and ``review compare``) to the CLI's subcommands."""
    review = commands.add_parser(
        "review",
        help="label the messages `serve --log-messages` logged, in a local web page",
        description="Serve a page that ranks the logged messages by what a review helps most "
        "(fallbacks, low confidence, a small margin, out-of-scope-like), groups near-duplicates, "
        "and writes each decision back into DATA's folder as reviewed.yml (Rasa YAML); the "
        "decisions are kept in the database too, so a review can be undone and resumed. "
        "`review compare` shows what a new model fixes and breaks.",
    )
    review.add_argument("--db", default=None,
                        help="the message log: the file or postgresql:// URL given to serve --log-messages")
    review.add_argument("--data", default=None,
                        help="the project's data folder (reviewed.yml is written in it) or data file "
                             "(reviewed.yml is written beside it)")
    review.add_argument("-m", "--model", default=None,
                        help="the model to fine-tune from the page's Train button (an archive, or a "
                             "folder's newest); the new archive goes beside it")
    review.add_argument("--test", action="append", default=[], metavar="PATH",
                        help="test data the Train button's comparison parses too; repeatable")
    review.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: 127.0.0.1; another needs --token)")
    review.add_argument("-p", "--port", type=int, default=5006, help="port (default: 5006)")
    review.add_argument("--token", default=None,
                        help="require this token on every request of the page's API "
                             f"(default: ${TOKEN_VARIABLE})")
    review.add_argument("--group-threshold", type=float, default=0.8, metavar="J",
                        help="token-set similarity (Jaccard) from which messages are one group "
                             "(default: 0.8; 1 groups only texts equal once normalised)")
    review.add_argument("--fallback-threshold", type=float, default=0.3, metavar="T",
                        help="Enter does not accept the model's intent of a message the fallback caught, "
                             "nor of one whose confidence is below T (the model's FallbackClassifier "
                             "threshold; default: 0.3, its default): the reviewer picks one")
    # the default is review.coverage.REGIONS (not imported here: it imports NumPy)
    review.add_argument("--regions", type=int, default=0, metavar="K",
                        help="spread the inbox's 2K most unsure groups over K regions of sentence "
                             "space, one region's best before any region's second (default: 0, the "
                             "priority order; 200 regions did not beat it on the review-loop benchmark)")
    review.set_defaults(func=cmd_review)
    subcommands = review.add_subparsers(dest="review_command", metavar="REVIEW_COMMAND")
    compare = subcommands.add_parser(
        "compare", help="what a new model fixes and breaks on the reviewed messages and test data")
    compare.add_argument("--old", required=True, help="the model before (archive or folder's newest)")
    compare.add_argument("--new", required=True, help="the model after (archive or folder's newest)")
    compare.add_argument("--db", default=None, help="the review's database: its labelled messages")
    compare.add_argument("--test", action="append", default=[], metavar="PATH",
                         help="labelled test data; repeatable")
    compare.add_argument("--json", default=None, metavar="FILE", help="also write the report as JSON")
    compare.set_defaults(func=cmd_compare)


def _imports() -> None:
    try:
        import sqlalchemy  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise NLUError("the review page needs starlette, uvicorn and SQLAlchemy: "
                       "pip install 'nlu-engine[server]'") from None


def allowed_hosts(host: str, port: int, token: str | None) -> frozenset[str] | None:
    """The Host headers the page answers to: its loopback names, or any with a token."""
    if host not in LOOPBACK:
        if token is None:
            raise NLUError(f"--host {host} makes the review page reachable from other machines: "
                           f"give it a --token (or ${TOKEN_VARIABLE})")
        return None
    return frozenset({f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"})


def cmd_review(args: argparse.Namespace) -> int:
    missing = [flag for flag, value in (("--db", args.db), ("--data", args.data)) if value is None]
    if missing:
        raise NLUError(f"nlu-engine review needs {' and '.join(missing)}: "
                       "nlu-engine review --db LOG.db --data data/")
    if not 0.0 < args.group_threshold <= 1.0:
        raise NLUError("--group-threshold must be in (0, 1], e.g. 0.8")
    if not 0.0 <= args.fallback_threshold <= 1.0:
        raise NLUError("--fallback-threshold must be in [0, 1], e.g. 0.3 (the model's fallback threshold)")
    if args.regions < 0:
        raise NLUError("--regions must be 0 (the priority order) or more, e.g. 200")
    token = args.token or os.environ.get(TOKEN_VARIABLE) or None
    hosts = allowed_hosts(args.host, args.port, token)
    _imports()
    import uvicorn

    from nlu_engine.review.app import ReviewSettings, create_app

    settings = ReviewSettings(db=args.db, data=Path(args.data), model=args.model, token=token,
                              hosts=hosts, threshold=args.group_threshold, test=tuple(args.test),
                              fallback_threshold=args.fallback_threshold, regions=args.regions)
    app = create_app(settings)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    query = "/?token=" + token if token else "/"
    print(f"review page: http://{shown}:{args.port}{query} (decisions go to "
          f"{app.state.review.path}; Ctrl-C stops)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if args.db is None and not args.test:
        raise NLUError("review compare needs --db (the reviewed messages) or --test (test data), or both")
    if args.db is not None:
        _imports()
    from nlu_engine.review.loop import compare, format_report

    report = compare(args.old, args.new, args.db, args.test)
    print(format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 0
