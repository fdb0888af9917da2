"""DIET leaves the environment alone until it trains, then imports TensorFlow with oneDNN off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DEFAULT_PIPELINE = Path(__file__).resolve().parents[3] / "nlu_engine" / "pipelines" / "diet.yml"
# import DIET's modules that need no TensorFlow, build the default pipeline, then report
SNIPPET = (
    "import os, sys; import nlu_engine.classifiers.diet.component, nlu_engine.classifiers.diet.inference; "
    "from nlu_engine.assembly.config import load_config; from nlu_engine.assembly.pipeline import Pipeline; "
    f"Pipeline.build(load_config({str(DEFAULT_PIPELINE)!r}, None)); "
    "print(os.environ.get('TF_ENABLE_ONEDNN_OPTS'), 'tensorflow' in sys.modules)"
)


def _run(env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def test_importing_diet_and_building_a_pipeline_change_nothing() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    assert _run(env) == "None False"
    assert _run({**env, "TF_ENABLE_ONEDNN_OPTS": "1"}) == "1 False"


def test_training_imports_tensorflow_through_the_package_runtime(
    featurized, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nlu_engine.classifiers.diet.component import DIETClassifier
    from nlu_engine.nn import tensorflow_runtime

    calls: list[str] = []
    real = tensorflow_runtime.import_tensorflow

    def spy(**kwargs):  # type: ignore[no-untyped-def]
        calls.append("import_tensorflow")
        return real(**kwargs)

    monkeypatch.setattr(tensorflow_runtime, "import_tensorflow", spy)
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    _, data = featurized
    DIETClassifier(epochs=1, transformer_size=8, number_of_attention_heads=2, show_progress=False).train(data)
    # called once (in this test process other tests may have imported TensorFlow before)
    assert calls == ["import_tensorflow"]
    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "0"
