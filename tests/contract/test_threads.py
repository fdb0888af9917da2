"""BLAS thread limits around small inputs, shared by concurrent threads."""

from __future__ import annotations

import threading

import numpy  # noqa: F401 - loads the BLAS library threadpoolctl inspects
import pytest
from threadpoolctl import threadpool_info

import nlu_engine.contract.threads
from nlu_engine.contract.threads import single_blas_thread


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_thread_inside_and_the_setting_comes_back() -> None:
    before = _blas_threads()
    with single_blas_thread():
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_overlapping_blocks_in_threads_restore_the_original_setting() -> None:
    before = _blas_threads()
    inside = threading.Barrier(2)
    released = threading.Event()

    def worker(wait: bool) -> None:
        with single_blas_thread():
            inside.wait(timeout=10)
            if wait:
                released.wait(timeout=10)

    first = threading.Thread(target=worker, args=(True,))
    second = threading.Thread(target=worker, args=(False,))
    first.start()
    second.start()
    second.join(timeout=10)
    assert nlu_engine.contract.threads._depth == 1  # the first block is still inside: no restore yet
    released.set()
    first.join(timeout=10)
    assert nlu_engine.contract.threads._depth == 0
    assert _blas_threads() == before  # the last one out restored the library's setting


def test_processes_sharing_the_cores_get_their_share_of_blas_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """N processes (``serve --workers N``) get cores // N BLAS threads each, else they
    oversubscribe the cores; a value the user set is kept."""
    from nlu_engine.contract.threads import BLAS_THREAD_VARIABLES, blas_thread_environment

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert blas_thread_environment(2, {"OMP_NUM_THREADS": "3"}) == {
        "OPENBLAS_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}
    assert blas_thread_environment(16, {}) == dict.fromkeys(BLAS_THREAD_VARIABLES, "1")
