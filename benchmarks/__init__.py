"""Benchmark and study scripts, run from the project root as ``python -m benchmarks.<folder>.<name>``
(README.md here). Not part of the installed package."""
