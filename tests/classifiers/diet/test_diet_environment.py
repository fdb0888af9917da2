"""The oneDNN default a DIET pipeline sets before TensorFlow is imported."""

from __future__ import annotations

import os
import subprocess
import sys

SNIPPET = (
    "import os, sys; import nlu_engine.classifiers.diet; "
    "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), 'tensorflow' in sys.modules)"
)


def _run(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_importing_diet_turns_onednn_off_without_importing_tensorflow() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    assert _run(env) == "0 False"


def test_a_setting_in_the_environment_is_kept() -> None:
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "1"}
    assert _run(env) == "1 False"
