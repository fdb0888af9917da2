"""``nlu-engine test ... --ray``: each training of an experiment as a Ray task.

The units are the sequential run's (``cross_validation_fold``, ``comparison_point`` in
``nlu_engine.evaluation.experiments``): each gets the data, the config and its seed, and nothing
else, so it trains and scores the same model wherever it runs. The data is put in Ray's object
store once and shared by every task; a config file is read by the task, so on a cluster it must
be at the same path on every node (a shipped pipeline by name is found anywhere).

Each task reserves ``cpus_per_trial`` CPUs and runs its training with that many threads
(:func:`nlu_engine.evaluation.experiments.trial_threads`). A model's numbers depend on the thread
count, so the scores equal a sequential run's given the same ``--cpus-per-trial``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from nlu_engine.contract.errors import NLUError
from nlu_engine.evaluation.experiments import Progress, RunResult, trial_threads


def _run_unit(function: Callable[..., RunResult], shared: Mapping[str, Any],
              call: Mapping[str, Any]) -> RunResult:
    """In a Ray worker: one unit of the experiment."""
    return function(**shared, **call)


class RayRunner:
    """Runs an experiment's units as Ray tasks of ``cpus_per_trial`` CPUs each (Ray must be
    initialized); results come back in the calls' order, each as soon as it and those before
    it are done."""

    def __init__(self, cpus_per_trial: int = 1) -> None:
        if cpus_per_trial < 1:
            raise NLUError("--cpus-per-trial must be at least 1")
        self.cpus_per_trial = cpus_per_trial

    def run(
        self,
        function: Callable[..., RunResult],
        shared: Mapping[str, Any],
        calls: Sequence[Mapping[str, Any]],
        progress: Progress,
    ) -> Iterator[RunResult]:
        import ray

        available = int(ray.cluster_resources().get("CPU", 0))
        if available < self.cpus_per_trial:
            raise NLUError(f"--cpus-per-trial {self.cpus_per_trial} is more than the Ray cluster's "
                           f"{available} CPUs")
        task = ray.remote(_run_unit).options(
            num_cpus=self.cpus_per_trial,
            runtime_env={"env_vars": trial_threads(self.cpus_per_trial)},
            max_retries=1,  # a worker lost mid-training trains that unit again
        )
        shared_ref = ray.put(dict(shared))
        pending = [task.remote(function, shared_ref, dict(call)) for call in calls]
        running = min(len(pending), max(1, available // self.cpus_per_trial))
        progress.status(f"{len(pending)} trainings on Ray, {running} at a time")
        done = 0
        try:
            for ref in pending:
                yield ray.get(ref)
                done += 1
        except ray.exceptions.RayTaskError as error:
            cause = error.cause if isinstance(error.cause, BaseException) else error
            if isinstance(cause, NLUError):
                raise NLUError(str(cause)) from None
            raise
        finally:
            for ref in pending[done:]:  # stopped early (an error, an interrupt): stop the rest
                ray.cancel(ref)
