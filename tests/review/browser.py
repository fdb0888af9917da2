"""The review app served on a loopback port from a thread, and Debian's Chromium driven by Playwright.

Playwright's own browser download is never used: the tests launch ``/usr/bin/chromium`` (``make
test-deps`` installs it) and are skipped without it or without the ``review`` extra.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from nlu_engine.server.process import LOOPBACK, free_port
from tests.extras import requires_extra

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def requires_browser() -> list[pytest.MarkDecorator]:
    return [requires_extra("review", "playwright", "starlette", "uvicorn", "sqlalchemy"),
            pytest.mark.skipif(shutil.which("chromium") is None,
                               reason="needs Debian's chromium: apt-get install -y chromium "
                                      "(make test-deps)")]


@contextmanager
def served(settings: Any) -> Iterator[str]:
    """The review app of ``settings`` on a free loopback port: its base URL."""
    import uvicorn

    from nlu_engine.review.app import create_app

    port = free_port()
    settings.hosts = frozenset({f"{LOOPBACK}:{port}", f"localhost:{port}"})
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host=LOOPBACK, port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://{LOOPBACK}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def browser_page() -> Iterator[Any]:
    """A page of a headless Chromium (Debian's), closed after."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.set_default_timeout(15_000)
            yield page
        finally:
            browser.close()
