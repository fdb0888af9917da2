"""A parse runs every component on one BLAS thread, and gives the setting back after."""

from __future__ import annotations

import numpy  # noqa: F401 - loads the BLAS library threadpoolctl inspects
from threadpoolctl import threadpool_info

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.contract.message import Message


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


class Probe:
    """Stands last in the pipeline and records the BLAS threads it is given."""

    def __init__(self) -> None:
        self.seen: list[list[int]] = []

    def process(self, messages: list[Message]) -> None:
        self.seen.append(_blas_threads())


def test_a_parse_runs_on_one_blas_thread() -> None:
    pipeline = Pipeline.build(load_config({"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"}]}))
    probe = Probe()
    pipeline.components.append(probe)  # type: ignore[arg-type]
    before = _blas_threads()
    results = pipeline.parse_batch(["book a table", "hello"])
    assert [r["text"] for r in results] == ["book a table", "hello"]
    assert probe.seen == [[1] * len(before)]
    assert _blas_threads() == before
