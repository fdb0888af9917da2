"""Serve a model with Ray Serve: the ``nlu-engine serve`` HTTP API, in N replicas.

    pip install 'nlu-engine[distributed]'
    python examples/ray_serve.py -m models/ --replicas 2 --port 8000
    curl -s localhost:8000/model/parse -d '{"text": "hi"}'
    curl -s localhost:8000/status            # "worker_id" names the replica that answered

On a laptop it starts a local Ray; ``--ray-address host:6379`` deploys on a running cluster (the
archive must then be readable at the same path on its nodes). Ctrl-C stops the deployment.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from nlu_engine.contract.errors import NLUError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-m", "--model", default="models", help="archive, or folder (its newest archive)")
    parser.add_argument("--replicas", type=int, default=2, help="replicas, each with the model (default: 2)")
    parser.add_argument("--cpus-per-replica", type=float, default=1.0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--ray-address", default=None, help="a running Ray cluster (default: start one)")
    parser.add_argument("--auth-token", default=None, help="require this token, as nlu-engine serve does")
    parser.add_argument("--allow-component", action="append", default=[], metavar="NAME",
                        help="a custom component class the model may import (repeatable)")
    args = parser.parse_args(argv)
    from nlu_engine.distributed.cluster import connect
    from nlu_engine.distributed.serving import run

    try:
        with connect(args.ray_address):
            from ray import serve

            run(args.model, args.replicas, host=args.host, port=args.port,
                cpus_per_replica=args.cpus_per_replica, allow_components=args.allow_component,
                auth_token=args.auth_token)
            print(f"serving {args.replicas} replicas at http://{args.host}:{args.port}/ (Ctrl-C stops)",
                  flush=True)
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait()
            serve.shutdown()
    except NLUError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
