"""A short soak (benchmarks/perf/soak.py): ``serve --workers 2`` under 8 clients for 15 s, with a
good model swap and a broken one. Every request answered, the broken swap refused in one line,
no worker restarted. The 10-minute run and its memory figures are in BENCHMARKS.md."""

from __future__ import annotations

from benchmarks.perf.soak import run
from tests.extras import requires_extra

pytestmark = requires_extra("server")


def test_a_short_soak_has_no_unexpected_errors() -> None:
    result = run(seconds=15, clients=8, swap_every=5, broken_every=2, pause=0.02)
    assert result["unexpected_errors"] == 0, result["error_samples"]
    assert result["swaps"] == 1 and result["broken_swaps_refused"] == 1
    assert result["requests"]["parse"] > 0 and result["requests"]["batch"] > 0
    assert len(result["rss"]) == 2  # the two workers, the same two from start to end
