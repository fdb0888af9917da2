"""A throwaway PostgreSQL cluster for the tests that need a real server (the message log's and
the review's): Debian's ``initdb`` / ``pg_ctl`` (``make test-deps`` installs the ``postgresql``
package) in a temporary folder on a free loopback port; skipped when neither is installed."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.server.process import free_port


def postgres_program(name: str) -> str | None:
    """``initdb`` / ``pg_ctl``: on the PATH, or where Debian's postgresql package puts them."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return versions[-1] if versions else None


class Cluster:
    """A PostgreSQL cluster in a temporary folder (as the ``postgres`` user when run as root)."""

    def __init__(self) -> None:
        self.initdb, self.pg_ctl = postgres_program("initdb"), postgres_program("pg_ctl")
        if not (self.initdb and self.pg_ctl):
            pytest.skip("needs PostgreSQL's initdb and pg_ctl (make test-deps installs postgresql)")
        self.user: list[str] = []
        self.folder = Path(tempfile.mkdtemp(prefix="nlu-pg-"))
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root needs the 'postgres' user of Debian's postgresql package")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self.user = ["runuser", "-u", "postgres", "--"]
        self.port = free_port()
        self.url = f"postgresql://nlu@127.0.0.1:{self.port}/postgres"
        self._run(self.initdb, "-D", str(self.folder / "data"), "-A", "trust", "-U", "nlu", "-E", "UTF8",
                  "--no-sync")
        self.start()

    def _run(self, *command: str) -> None:
        result = subprocess.run([*self.user, *command], capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {result.stderr[-2000:]}")

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c full_page_writes=off")
        self._run(self.pg_ctl, "-D", str(self.folder / "data"), "-o", options,
                  "-l", str(self.folder / "server.log"), "-w", "-t", "30", "start")

    def stop(self) -> None:
        self._run(self.pg_ctl, "-D", str(self.folder / "data"), "-m", "fast", "-w", "-t", "30", "stop")

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="module", name="cluster")
def cluster_fixture() -> Iterator[Cluster]:
    """A running cluster for the module's tests (import ``cluster_fixture`` to use ``cluster``)."""
    running = Cluster()
    try:
        yield running
    finally:
        running.remove()


def drop_tables(url: str, *schemas: Any) -> None:
    """Drop the tables of each SQLAlchemy ``MetaData`` in ``schemas`` from the cluster at ``url``."""
    import sqlalchemy as sa

    from nlu_engine.server.message_store import database_url

    engine = sa.create_engine(database_url(url))
    with engine.begin() as connection:
        for schema in schemas:
            schema.drop_all(connection)
    engine.dispose()
