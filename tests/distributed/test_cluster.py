"""A wrong ``--ray-address`` is a one-line error within 30 s, whatever answers there."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nlu_engine.contract.errors import NLUError
from nlu_engine.distributed.cluster import check_address, split_address
from tests.cli.test_cli import DATA, assert_user_error, run
from tests.extras import requires_extra

pytestmark = requires_extra("distributed")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (not a Ray cluster)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("address", ["localhost", "host:port", "ray://:10001", "10.0.0.1:99999"])
def test_an_address_that_is_not_host_port(address: str) -> None:
    with pytest.raises(NLUError, match="is not host:port; give the head node's address"):
        split_address(address)


def test_addresses() -> None:
    assert split_address("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert split_address("ray://head:10001") == ("head", 10001)
    assert split_address("[::1]:6379") == ("::1", 6379)


def test_nothing_listening_fails_at_once() -> None:
    port = closed_port()
    start = time.perf_counter()
    with pytest.raises(NLUError, match=rf"nothing answers at 127.0.0.1:{port} \(Connection refused\)"):
        check_address(f"127.0.0.1:{port}")
    assert time.perf_counter() - start < 5


def test_a_port_that_is_not_ray_fails_after_the_probe(silent_port: int) -> None:
    start = time.perf_counter()
    with pytest.raises(NLUError, match="answers but no Ray cluster connected within 3 s"):
        check_address(f"127.0.0.1:{silent_port}", probe_seconds=3)
    assert time.perf_counter() - start < 10


def test_the_cli_says_so_in_one_line_within_30_seconds(tmp_path: Path) -> None:
    start = time.perf_counter()
    result = run("test", "--cross-validation", "--config", "logreg", "--data", str(DATA),
                 "--ray-address", f"127.0.0.1:{closed_port()}", cwd=tmp_path)
    assert time.perf_counter() - start < 30
    assert_user_error(result, "--ray-address 127.0.0.1:", "nothing answers")
