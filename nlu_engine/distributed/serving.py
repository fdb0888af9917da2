"""The HTTP API as a Ray Serve deployment: the app of ``nlu-engine serve``, ``replicas`` times.

Each replica is a Ray actor that loads the archive once (from its path, with the allow list the
deployment was given) and runs the same Starlette app as ``nlu-engine serve``, micro-batching
included; Ray Serve's proxy spreads requests over the replicas, on one machine or a cluster.
``/status`` names the replica that answered (``worker_id``). As with ``serve --workers``, each
replica holds its own model, so ``PUT /model`` and ``DELETE /model`` answer 409: deploy again to
change the model. ``examples/ray_serve.py`` runs it from the command line.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

APP_NAME = "nlu_engine"


def deployment(
    model: str | Path,
    replicas: int = 2,
    *,
    cpus_per_replica: float = 1.0,
    allow_components: Iterable[str] = (),
    **settings: Any,
) -> Any:
    """A Ray Serve application (``serve.run`` it) of the HTTP app with ``replicas`` replicas.

    ``model``: an archive, or a folder (its newest archive), checked here before any replica
    starts. ``settings``: further keyword arguments of ``nlu_engine.server.app.create_app``
    (``auth_token``, ``max_text_chars``, ``batch_size``, ...).
    """
    from ray import serve

    from nlu_engine.assembly.registry import allowed_components
    from nlu_engine.contract.errors import NLUError
    from nlu_engine.corpus.parsing import archive_path

    if replicas < 1:
        raise NLUError("the number of replicas must be at least 1")
    allowed = sorted(allowed_components(list(allow_components)))
    archive = str(archive_path(model, allowed))

    def build_app() -> Any:
        """Runs in each replica: load the model, build the app."""
        from ray import serve as replica_serve

        from nlu_engine.server.app import create_app
        from nlu_engine.server.state import load_model

        replica = replica_serve.get_replica_context().replica_id
        loaded = load_model(Path(archive), frozenset(allowed))
        return create_app(model=loaded, allow_reload=False, allow_components=allowed,
                          worker_id=f"ray-serve:{replica.unique_id}", **settings)

    ingress = serve.ingress(build_app)()
    app = serve.deployment(ingress, name="NLUEngine", num_replicas=replicas,
                           ray_actor_options={"num_cpus": cpus_per_replica})
    return app.bind()


def run(model: str | Path, replicas: int = 2, *, host: str = "127.0.0.1", port: int = 8000,
        cpus_per_replica: float = 1.0, allow_components: Iterable[str] = (), **settings: Any) -> None:
    """Deploy on the running Ray (``ray.init`` first) at http://host:port/ and return when every
    replica is ready; ``serve.shutdown()`` stops it."""
    from ray import serve

    application = deployment(model, replicas, cpus_per_replica=cpus_per_replica,
                             allow_components=allow_components, **settings)
    serve.start(http_options={"host": host, "port": port})
    serve.run(application, name=APP_NAME, route_prefix="/")
