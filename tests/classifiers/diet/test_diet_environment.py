"""The oneDNN default a DIET pipeline sets before TensorFlow is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEFAULT_PIPELINE = Path(__file__).resolve().parents[3] / "nlu_engine" / "pipelines" / "diet.yml"
# build the default pipeline (this imports DIETClassifier's module, not TensorFlow) and report
SNIPPET = (
    "import os, sys; from nlu_engine.config import load_config; "
    "from nlu_engine.pipeline import Pipeline; "
    f"Pipeline.build(load_config({str(DEFAULT_PIPELINE)!r}, None)); "
    "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), 'tensorflow' in sys.modules)"
)


def _run(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_building_a_diet_pipeline_turns_onednn_off_before_tensorflow_is_imported() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    assert _run(env) == "0 False"


def test_a_setting_in_the_environment_is_kept() -> None:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"}
    assert _run(env) == "1 False"
