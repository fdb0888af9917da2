"""A local Ray with two CPUs, started once per test module and shut down after it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """(its tests are marked ``requires_extra("distributed")``)"""
    import ray

    from nlu_engine.distributed.cluster import quiet_ray

    quiet_ray()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        yield ray
    finally:
        ray.shutdown()
