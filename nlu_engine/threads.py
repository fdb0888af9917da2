"""How many BLAS threads NumPy inference uses.

Small matrix products (one message: a few dozen rows) finish before a second OpenBLAS thread
would help, and on a machine that is busy with other work a waiting BLAS thread costs
milliseconds or worse. Inference on small inputs therefore runs on one BLAS thread; large
batches keep the library's default.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from functools import cache
from typing import Any

#: inputs up to this many rows (positions, sub-tokens) run on one BLAS thread
SINGLE_THREAD_ROWS = 512


@cache
def _controller() -> Any:
    import numpy  # noqa: F401 - its BLAS must be loaded for the controller to find it
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


_lock = threading.Lock()
_depth = 0  # blocks (in any thread) currently inside blas_threads_for with one thread
_limiter: Any = None


@contextlib.contextmanager
def blas_threads_for(rows: int) -> Iterator[None]:
    """One BLAS thread inside the block when ``rows`` <= SINGLE_THREAD_ROWS (about 10 us).

    The limit is process-wide: concurrent blocks (a server's worker threads) share it, and the
    last one out restores the library's setting.
    """
    global _depth, _limiter
    if rows > SINGLE_THREAD_ROWS:
        yield
        return
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
