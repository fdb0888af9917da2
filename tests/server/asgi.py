"""The server's ASGI app in process, behind Starlette's ``TestClient`` (the server extra's modules
imported when a test asks, so a module using this is collected without them and skipped by its
``requires_extra("server")`` mark)."""

from __future__ import annotations

from typing import Any


def app_client(*args: Any, **kwargs: Any) -> Any:
    """A ``TestClient`` of ``nlu_engine.server.app.create_app(*args, **kwargs)`` (use it in ``with``,
    which runs the app's lifespan)."""
    from starlette.testclient import TestClient

    from nlu_engine.server.app import create_app

    return TestClient(create_app(*args, **kwargs))
