"""One-off studies whose results are recorded in BENCHMARKS.md."""
