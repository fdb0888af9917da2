"""``nlu-engine parse --input IN --output OUT --ray``: a corpus parsed by a Ray Data pipeline.

    chunks of IN (planned here)  -> read tasks: a chunk's records, as groups of --batch-size rows
                                 -> actor pool (--workers actors, 1 CPU each, the model loaded
                                    once per actor from the archive's path): parse each group
                                 -> this process: the groups in input order, written to OUT

The read and parse steps run the functions of :mod:`nlu_engine.corpus` (``read_chunk``,
``parse_group``), on the same groups, so the output is the in-process output byte for byte.
Order: Ray Data runs with ``preserve_order``, and this process checks that the groups arrive
exactly as planned (each once, in order) before it writes them.

Faults: a parse actor that dies (its process killed, its node lost) is restarted, loading the
model again, and the tasks it had are retried: Ray Data gives its actor pools unlimited
``max_restarts`` and ``max_task_retries`` (passing them explicitly is deprecated since Ray 2.60;
``tests/distributed/test_corpus.py`` kills an actor mid-job to hold Ray to it). A task's output
counts only once the task has completed, and this process checks each group arrives once, so no
row is lost or written twice.

On a cluster, IN and the archive must be readable at the same path on every node (a shared
filesystem).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from nlu_engine.contract.errors import NLUError
from nlu_engine.corpus.formats import Chunk, Record
from nlu_engine.corpus.parsing import CorpusJob, GroupOutput, chunk_groups, parse_group

#: Ray Data's largest block here: small blocks spread a large chunk (a Parquet row group) over
#: the actors
BLOCK_BYTES = 1 << 18


def read_groups(batch: dict[str, Any], batch_size: int, max_chars: int, per_piece: int) -> Iterator[Any]:
    """Ray Data read step: the groups of each chunk in ``batch`` (planned chunks as JSON), one
    row per group: its chunk, its index in the chunk, its records as JSON."""
    import pyarrow as pa

    for chunk_json in batch["chunk"]:
        chunk = Chunk.from_json(str(chunk_json))
        piece: dict[str, list[Any]] = {"chunk": [], "group": [], "records": []}
        for index, group in enumerate(chunk_groups(chunk, batch_size, max_chars)):
            piece["chunk"].append(chunk.index)
            piece["group"].append(index)
            piece["records"].append(json.dumps([r.to_list() for r in group], ensure_ascii=False))
            if len(piece["group"]) == per_piece:
                yield pa.Table.from_pydict(piece)
                piece = {"chunk": [], "group": [], "records": []}
        if piece["group"]:
            yield pa.Table.from_pydict(piece)


class GroupParser:
    """Ray Data parse step, run by each actor of the pool: the model is loaded once, when the
    actor starts (again after a restart), from the archive's path with the same allow list."""

    def __init__(self, archive: str, allow_components: list[str], output_format: str) -> None:
        from nlu_engine.assembly.model import Model

        self.model = Model.load(archive, allow_components)
        self.output_format = output_format

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        out: dict[str, list[Any]] = {"chunk": [], "group": [], "lines": [], "rows": [], "errors": []}
        columns = batch.to_pydict()
        for chunk, group, records in zip(columns["chunk"], columns["group"], columns["records"],
                                         strict=True):
            output = parse_group(self.model, [Record.from_list(r) for r in json.loads(records)],
                                 self.output_format)
            out["chunk"].append(chunk)
            out["group"].append(group)
            out["lines"].append(output.lines)
            out["rows"].append(output.rows)
            out["errors"].append(output.errors)
        return pa.Table.from_pydict(out)


def planned_groups(job: CorpusJob) -> Iterator[tuple[int, int]]:
    """(chunk, group) of every group, in input order."""
    for chunk in job.chunks:
        for group in range(-(-chunk.rows // job.batch_size)):
            yield chunk.index, group


def parse_on_ray(archive: Path, allow_components: Iterable[str], job: CorpusJob,
                 actors: int | None = None) -> Iterator[GroupOutput]:
    """Every group of the job, parsed on Ray by ``actors`` actors (default: one per CPU of the
    cluster), in input order. Ray must be initialized (:func:`nlu_engine.distributed.cluster.connect`)."""
    import ray
    import ray.data

    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    context.target_max_block_size = BLOCK_BYTES
    if actors is None:
        actors = max(1, int(ray.cluster_resources().get("CPU", 1)))
    items = [{"chunk": chunk.to_json()} for chunk in job.chunks]
    if not items:
        return
    dataset = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        read_groups, batch_size=1, batch_format="numpy", num_cpus=0, concurrency=1,
        fn_kwargs={"batch_size": job.batch_size, "max_chars": job.max_chars,
                   "per_piece": job.groups_per_call},
    ).map_batches(
        GroupParser, batch_size=job.groups_per_call, batch_format="pyarrow",
        fn_constructor_kwargs={"archive": str(archive), "allow_components": sorted(allow_components),
                               "output_format": job.output_format},
        compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=1,
    )
    expected = planned_groups(job)
    try:
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            columns = batch.to_pydict()
            for chunk, group, lines, rows, errors in zip(
                columns["chunk"], columns["group"], columns["lines"], columns["rows"],
                columns["errors"], strict=True,
            ):
                _check_next(expected, (chunk, group))
                yield GroupOutput(lines, rows, errors)
    except ray.exceptions.RayError as error:
        raise NLUError(f"the Ray job failed: {cause_line(error)}") from None
    missing = next(expected, None)
    if missing is not None:
        raise RuntimeError(f"Ray returned no output for chunk {missing[0]}, group {missing[1]}")


def _check_next(expected: Iterator[tuple[int, int]], got: tuple[int, int]) -> None:
    want = next(expected, None)
    if want != got:
        raise RuntimeError(f"Ray returned chunk {got[0]}, group {got[1]} where chunk "
                           f"{want and want[0]}, group {want and want[1]} was due; nothing was written")


def cause_line(error: BaseException) -> str:
    """What went wrong in a worker, on one line: the message of an NLUError raised there (Ray
    passes some on only as the text of their traceback), else the last line Ray gave."""
    chain: list[BaseException] = []
    inner: BaseException | None = error
    while inner is not None and inner not in chain:
        chain.append(inner)
        nested = getattr(inner, "cause", None)
        inner = nested if isinstance(nested, BaseException) else inner.__cause__
    for exc in chain:
        if isinstance(exc, NLUError):
            return str(exc)
    text = "\n".join(str(exc) for exc in chain)
    raised = re.findall(r"nlu_engine\.errors\.\w+: (.+)", text)
    if raised:
        return raised[-1].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else type(error).__name__)[:400]
