"""How many BLAS threads NumPy inference uses.

Small matrix products (one message: a few dozen rows) finish before a second OpenBLAS thread
would help, and on a machine that is busy with other work a waiting BLAS thread costs
milliseconds or worse. Inference on small inputs therefore runs on one BLAS thread; large
batches keep the library's default.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cache
from typing import Any

#: inputs up to this many rows (positions, sub-tokens) run on one BLAS thread
SINGLE_THREAD_ROWS = 512


@cache
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def blas_threads_for(rows: int) -> Iterator[None]:
    """One BLAS thread inside the block when ``rows`` <= SINGLE_THREAD_ROWS (about 10 us)."""
    if rows > SINGLE_THREAD_ROWS:
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        yield
