"""glibc allocator tuning for long trainings (on other C libraries, nothing happens).

``large_blocks_on_heap`` is a context manager around a whole training; ``return_free_memory``
trims the heap (DIET's ``ReturnFreeMemory`` callback calls it after each epoch).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters


def _glibc(function: str, *args: int) -> None:
    """Call a glibc allocator function; elsewhere (no glibc) do nothing."""
    with contextlib.suppress(OSError, AttributeError):
        getattr(ctypes.CDLL("libc.so.6"), function)(*args)


def return_free_memory() -> None:
    """Hand the heap pages freed so far back to the OS.

    Batches of changing shapes leave glibc's arenas holding freed memory that still counts
    as resident; trimming once an epoch keeps peak memory at what is actually in use.
    """
    _glibc("malloc_trim", 0)


@contextlib.contextmanager
def large_blocks_on_heap() -> Iterator[None]:
    """Let glibc reuse freed table-sized blocks during training instead of mapping new ones.

    A vocabulary-sized input table (tens of thousands of rows x 128) is larger than glibc's
    largest automatic mmap threshold, so each of its per-step temporaries (the whole-table L2
    gradient, the summed step) would be a fresh mapping whose pages are faulted in and zeroed,
    then unmapped. Served from the heap they are reused, which makes the steps faster, most of
    all the early small-batch epochs. Memory freed during an epoch is handed back at its end
    (``ReturnFreeMemory``). Afterwards the thresholds are set to the ceilings of glibc's own
    dynamic adjustment, not left at the training values.
    """
    _glibc("mallopt", _M_MMAP_THRESHOLD, 512 << 20)
    _glibc("mallopt", _M_TRIM_THRESHOLD, 1 << 30)
    try:
        yield
    finally:
        _glibc("mallopt", _M_MMAP_THRESHOLD, 32 << 20)
        _glibc("mallopt", _M_TRIM_THRESHOLD, 64 << 20)
        return_free_memory()
