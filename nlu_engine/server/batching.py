"""Micro-batching: requests that arrive together are parsed as one ``Model.parse_batch`` call.

Inference runs in one worker thread, so the event loop keeps accepting and answering requests
while a batch runs, and batches run one at a time (the model's own kernels use the cores).
Requests that arrive while a batch runs are queued and form the next batch (up to
``max_batch``). A single waiting request is dispatched at once, so sequential clients pay no
waiting time; only when the previous batch held several requests (concurrent clients) does the
batcher wait up to ``max_wait`` seconds for more to join.

A batch is also bounded by its padded cost, ``len(batch) * longest_text**2`` (characters): a
transformer's time and memory grow with the square of the padded length, so long messages are
parsed in small batches (one at a time at the longest) instead of multiplying their memory.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
from collections.abc import Callable
from typing import Any, Protocol


class Parser(Protocol):
    """``Model.parse_batch``; ``times`` is passed only when a message carries its time."""

    def parse_batch(self, texts: list[str]) -> list[dict[str, Any]]: ...


#: a waiting request: its text, its time (None: now) and the future its answer goes to
Pending = tuple[str, float | None, asyncio.Future[dict[str, Any]]]


def _parse(model: Parser, batch: list[Pending]) -> list[dict[str, Any]]:
    texts = [text for text, _, _ in batch]
    times = [time for _, time, _ in batch]
    if all(time is None for time in times):
        return model.parse_batch(texts)
    return model.parse_batch(texts, times=times)  # type: ignore[call-arg]


class NoModelError(Exception):
    """No model is loaded; the server answers 503."""


class MicroBatcher:
    """Collects concurrent ``parse`` calls into batches run on a worker thread."""

    def __init__(
        self,
        get_model: Callable[[], Parser | None],
        max_batch: int = 64,
        max_wait: float = 0.0015,
        max_cost: int = 2000**2,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._get_model = get_model
        self.max_batch = max_batch
        self.max_wait = max(0.0, max_wait)
        self.max_cost = max_cost
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="nlu-parse")
        self._pending: collections.deque[Pending] = collections.deque()
        self._draining = False
        self._task: asyncio.Task[None] | None = None
        self._last_batch_size = 0
        self.batches = 0  # statistics, for /status and tests
        self.requests = 0
        self.largest_batch = 0

    async def parse(self, text: str, time: float | None = None) -> dict[str, Any]:
        """The parse result for ``text`` (sent at ``time``, seconds since the epoch; None: now),
        computed in a batch with concurrent requests."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending.append((text, time, future))
        if not self._draining:
            self._draining = True
            self._task = loop.create_task(self._drain())  # a reference keeps the task alive
        return await future

    def fits(self, size: int, longest: int) -> bool:
        """Whether a batch of ``size`` texts, the longest ``longest`` characters, is allowed."""
        return size <= self.max_batch and size * max(longest, 1) ** 2 <= self.max_cost

    async def parse_many(self, texts: list[str]) -> list[dict[str, Any]]:
        """Parse a client's list of texts on the worker: by length, in batches within the bounds."""
        results: list[dict[str, Any] | None] = [None] * len(texts)
        loop = asyncio.get_running_loop()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        start = 0
        while start < len(order):
            end = start + 1  # sorted by length: the last text of a chunk is its longest
            while end < len(order) and self.fits(end + 1 - start, len(texts[order[end]])):
                end += 1
            model = self._get_model()
            if model is None:
                raise NoModelError()
            chunk = order[start:end]
            parsed = await loop.run_in_executor(
                self._executor, model.parse_batch, [texts[i] for i in chunk]
            )
            for i, result in zip(chunk, parsed, strict=True):
                results[i] = result
            start = end
        return results  # type: ignore[return-value]

    async def run(self, function: Callable[[], Any]) -> Any:
        """Run ``function`` on the inference thread (between batches)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, function)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                if self.max_wait and self._last_batch_size > 1 and len(self._pending) < self.max_batch:
                    await asyncio.sleep(self.max_wait)  # concurrent clients: let stragglers join
                batch: list[Pending] = []
                longest = 0
                while self._pending:
                    text, time, future = self._pending[0]
                    if future.done():  # its client went away
                        self._pending.popleft()
                        continue
                    if batch and not self.fits(len(batch) + 1, max(longest, len(text))):
                        break
                    self._pending.popleft()
                    batch.append((text, time, future))
                    longest = max(longest, len(text))
                if not batch:
                    continue
                self._last_batch_size = len(batch)
                self.batches += 1
                self.requests += len(batch)
                self.largest_batch = max(self.largest_batch, len(batch))
                model = self._get_model()
                try:
                    if model is None:
                        raise NoModelError()
                    results = await loop.run_in_executor(self._executor, _parse, model, batch)
                except asyncio.CancelledError:
                    for _, _, future in batch:
                        future.cancel()
                    raise
                except Exception as error:  # delivered to each waiting request
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for (_, _, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._draining = False

    def close(self) -> None:
        for _, _, future in self._pending:
            if not future.done():
                future.cancel()
        self._pending.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)
