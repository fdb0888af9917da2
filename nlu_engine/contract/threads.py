"""How many BLAS threads NumPy inference uses, in a block and in processes that share the cores.

NumPy inference (DIET's forward pass, the language model on one message) runs on one OpenBLAS
thread. Its matrix products are small, so more threads gain little, and on a machine busy with
other work (a training job, the server's other workers) OpenBLAS's spin-waiting threads slow
every parse down several times over. BENCHMARKS.md has the figures.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any


@cache
def _controller() -> Any:
    import numpy  # noqa: F401 - its BLAS must be loaded for the controller to find it
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


_lock = threading.Lock()
_depth = 0  # blocks (in any thread) currently inside single_blas_thread
_limiter: Any = None


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    """One BLAS thread inside the block (entering and leaving cost about 10 us).

    The limit is process-wide: concurrent blocks (a server's worker threads) share it, and the
    last one out restores the library's setting.
    """
    global _depth, _limiter
    with _lock:
        if _depth == 0:
            _limiter = _controller().limit(limits=1, user_api="blas")
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _limiter is not None:
                _limiter.restore_original_limits()
                _limiter = None


#: the thread-pool sizes of the BLAS libraries NumPy may use, read when a process imports NumPy
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def blas_thread_environment(processes: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that give each of ``processes`` processes its share of the cores for BLAS
    threads, for those ``environ`` does not set already (the user's setting wins).

    Each process's BLAS would otherwise start a thread per core, and its spinning threads take
    the cores from the others' (BENCHMARKS.md, ``serve --workers``)."""
    threads = str(max(1, (os.cpu_count() or 1) // processes))
    return {name: threads for name in BLAS_THREAD_VARIABLES if name not in environ}


def process_threads() -> int:
    """The threads this process may keep busy: its BLAS share (``OMP_NUM_THREADS`` or
    ``OPENBLAS_NUM_THREADS``, which ``blas_thread_environment`` gives a server's workers), else
    every core."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return os.cpu_count() or 1
