"""Repeatable performance measurements: latency, throughput, training step and epoch times."""
