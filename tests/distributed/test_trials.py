"""Experiments on a local Ray: every training a Ray task, the scores of the sequential run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.contract.errors import NLUError
from nlu_engine.evaluation.comparison import compare_configs
from nlu_engine.evaluation.experiments import cross_validate
from nlu_engine.training_data import load_data
from tests.cli.test_cli import DATA, run
from tests.extras import requires_extra


@pytest.fixture(scope="module")
def data() -> Any:
    return load_data([str(DATA)])


@requires_extra("distributed")
def test_comparison_scores_equal_the_sequential_run(ray_local: Any, data: Any) -> None:
    from nlu_engine.distributed.trials import RayRunner

    args: dict[str, Any] = {"runs": 1, "percentages": [0, 50], "seed": 3}
    sequential = compare_configs(["logreg", "crf"], data, **args)
    on_ray = compare_configs(["logreg", "crf"], data, runner=RayRunner(), **args)
    assert on_ray.results == sequential.results
    assert on_ray.num_examples == sequential.num_examples
    assert on_ray.num_test_examples == sequential.num_test_examples


@requires_extra("distributed")
def test_a_trial_cannot_ask_for_more_cpus_than_the_cluster_has(ray_local: Any, data: Any) -> None:
    from nlu_engine.distributed.trials import RayRunner

    with pytest.raises(NLUError, match="--cpus-per-trial 3 is more than the Ray cluster's 2 CPUs"):
        cross_validate("logreg", data, folds=2, runner=RayRunner(cpus_per_trial=3))
    with pytest.raises(NLUError, match="at least 1"):
        RayRunner(cpus_per_trial=0)


def per_fold(out: Path) -> list[dict[str, Any]]:
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))["cross_validation"]["per_fold"]


@pytest.mark.slow
def test_diet_folds_on_ray_equal_a_sequential_run_with_the_same_threads(tmp_path: Path) -> None:
    """TensorFlow's sums depend on its thread count: equal with the same --cpus-per-trial."""
    common = ["test", "--cross-validation", "--folds", "2", "--data", str(DATA), "--no-plot",
              "--set", "DIETClassifier.epochs=3", "--set", "ResponseSelector.epochs=3",
              "--cpus-per-trial", "1"]
    runs: dict[str, subprocess.CompletedProcess[str]] = {}
    for name, extra in (("sequential", []), ("ray", ["--ray"])):
        runs[name] = run(*common, "--out", name, *extra, cwd=tmp_path, timeout=900)
        assert runs[name].returncode == 0, runs[name].stderr
    assert per_fold(tmp_path / "ray") == per_fold(tmp_path / "sequential")


@requires_extra("distributed")
def test_the_cli_writes_the_sequential_reports(ray_local: Any, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from nlu_engine.cli.main import main

    common = ["test", "--cross-validation", "--folds", "3", "--config", "logreg", "--data", str(DATA),
              "--no-plot"]
    assert main([*common, "--out", str(tmp_path / "seq")]) == 0
    assert main([*common, "--out", str(tmp_path / "ray"), "--ray"]) == 0
    assert per_fold(tmp_path / "ray") == per_fold(tmp_path / "seq")
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text(encoding="utf-8"))
    sequential = json.loads((tmp_path / "seq" / "summary.json").read_text(encoding="utf-8"))
    assert summary["cross_validation"]["metrics"] == sequential["cross_validation"]["metrics"]
    assert summary["intent"] == sequential["intent"]  # the held-out predictions of all folds
    assert summary["execution"] == {"ray": True, "ray_address": None, "cpus_per_trial": 1}
    assert "Mean ± std over the test folds" in capsys.readouterr().out
