"""The inbox's first groups spread over the regions of sentence space the model is unsure of.

Ordered by priority alone, the inbox's head is where the model is least sure, and those messages
crowd into a few confusions; labels spent there taught the model less than random ones (issue 51:
200 of them gained less than 200 random messages). So the head is ordered for coverage as well
as uncertainty: its ``2 × regions`` highest-priority groups (the pool) are placed in sentence
space, each by its oldest pending message's Universal Sentence Encoder vector (the default
pipeline's sentence features, from the same package; a group's members are near-duplicates of
it), clustered into ``regions`` regions with k-means, and listed one region at a time: each
region's most unsure group first (the regions in the order of those groups' priorities), then
each region's second, and so on. A reviewer who labels the first ``regions`` groups labels one
of every region. The groups after the pool keep the priority order. It is off by default
(:data:`REGIONS`): measured, it did not pay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: the regions the inbox's head is spread over by default (its pool: twice as many groups): none,
#: the priority order alone. 200 regions did not beat the priority order on the review-loop
#: benchmark (BENCHMARKS.md, "One unsure message a region"); ``nlu-engine review --regions K``
REGIONS = 0
#: vectors kept between requests (by message id; a text's vector does not change)
CACHE_SIZE = 100_000


def pool_size(regions: int) -> int:
    """The groups (highest priority first) that ``regions`` regions are made from."""
    return 2 * regions


def spread(scores: Sequence[float], vectors: np.ndarray, regions: int, seed: int = 0) -> list[int]:
    """The positions of a pool of groups (``scores``, their priorities; ``vectors``, one row each)
    in the spread order: k-means into ``regions`` regions, then round robin over the regions, each
    region's groups by priority and the regions by their best group's priority. With no more
    groups than regions, the order is the priority order (ties: the given order)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    if regions <= 0 or len(scores) <= regions:
        return order
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    with threadpool_limits(1):  # its OpenMP threads spin on shared cores: 10 times slower there
        labels = KMeans(regions, n_init=1, random_state=seed).fit(unit).labels_
    members: dict[int, list[int]] = {}
    for i in order:  # each region's groups by priority
        members.setdefault(int(labels[i]), []).append(i)
    rank_of = {group: rank for rank, group in enumerate(order)}
    queues = sorted(members.values(), key=lambda queue: rank_of[queue[0]])
    spread_order: list[int] = []
    for rank in range(max(len(queue) for queue in queues)):
        spread_order += [queue[rank] for queue in queues if rank < len(queue)]
    return spread_order


class Spreader:
    """The spread order of the inbox's pool, with the sentence vectors of the texts already seen
    cached (``encode(texts) -> (N, D)``; default: the Universal Sentence Encoder, loaded on the
    first call)."""

    def __init__(self, regions: int = REGIONS, seed: int = 0,
                 encode: Callable[[list[str]], np.ndarray] | None = None) -> None:
        self.regions = regions
        self.seed = seed
        self._encode = encode
        self._vectors: dict[str, np.ndarray] = {}
        #: the last pool's key (its groups' ids, sizes and scores) and its order
        self._cached: tuple[tuple[Any, ...], list[int]] | None = None

    def encode(self, texts: list[str]) -> np.ndarray:
        if self._encode is None:
            from nlu_engine.featurizers.dense.sentence_encoder import sentence_encoder

            self._encode = sentence_encoder().encode
        return self._encode(texts)

    def warm(self, store: Any) -> None:
        """Load the encoder now when the inbox holds more groups than regions (the page starts
        this in a thread, so that no page waits seconds for it)."""
        if self.regions > 0 and len(store.head(self.regions + 1)) > self.regions:
            self.encode(["warm"])

    def vectors(self, keyed: Sequence[tuple[str, str]]) -> np.ndarray:
        """One row per ``(message id, text)``, encoding only the ids not cached yet."""
        missing = list({message_id: text for message_id, text in keyed
                        if message_id not in self._vectors}.items())
        if missing:
            if len(self._vectors) + len(missing) > CACHE_SIZE:
                self._vectors.clear()
            encoded = self.encode([text for _, text in missing])
            for (message_id, _), row in zip(missing, encoded, strict=True):
                self._vectors[message_id] = row
        return np.stack([self._vectors[message_id] for message_id, _ in keyed])

    def order(self, groups: Sequence[tuple[dict[str, Any], float]]) -> list[int]:
        """The spread order of a pool of groups, each given as (a pending message's row, the
        group's priority)."""
        if self.regions <= 0 or len(groups) <= self.regions:
            return spread([score for _, score in groups], np.zeros((len(groups), 1)), 0)
        vectors = self.vectors([(row["id"], row["text"]) for row, _ in groups])
        return spread([score for _, score in groups], vectors, self.regions, self.seed)

    def page(self, store: Any, offset: int, limit: int, members: int | None = None
             ) -> tuple[int, int, list[tuple[list[dict[str, Any]], int, float]]]:
        """:meth:`ReviewStore.inbox <nlu_engine.review.decisions.ReviewStore.inbox>` with its first
        :func:`pool_size` groups in the spread order, each placed by its oldest pending message
        (its members are near-duplicates of it); the order is kept until the pool changes."""
        pool = pool_size(self.regions)
        if self.regions <= 0 or offset >= pool:
            return store.inbox(offset, limit, members)
        head = store.head(pool)
        key = tuple((group, size, score) for group, _, size, score in head)
        cached = self._cached
        if cached is None or cached[0] != key:  # the pool changed: a decision, new traffic
            cached = self._cached = (key, self.order([(row, score) for _, row, _, score in head]))
        chosen = [head[i][0] for i in cached[1]][offset:offset + limit]
        total, messages, shown = store.inbox(0, 0, members, group_ids=chosen)
        if offset + limit > pool:
            shown += store.inbox(pool, offset + limit - pool, members)[2]
        return total, messages, shown
