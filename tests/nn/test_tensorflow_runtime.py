"""import_tensorflow: oneDNN off in TensorFlow unless the environment says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nlu_engine.nn.tensorflow_runtime import ONEDNN_VARIABLE, import_tensorflow

# whether the TensorFlow this process imported runs oneDNN (its own check of the setting)
SNIPPET = (
    "import sys; from nlu_engine.nn.tensorflow_runtime import import_tensorflow; "
    "assert 'tensorflow' not in sys.modules; import_tensorflow(); "
    "from tensorflow.python.util import _pywrap_util_port; print(_pywrap_util_port.IsMklEnabled())"
)


def test_tensorflow_is_imported_with_onednn_off() -> None:
    assert last_line_in_a_fresh_process(SNIPPET) == "False"


def test_a_setting_in_the_environment_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorflow as tf

    monkeypatch.setenv(ONEDNN_VARIABLE, "1")
    assert import_tensorflow() is tf
    assert os.environ[ONEDNN_VARIABLE] == "1"


def test_unset_it_is_set_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ONEDNN_VARIABLE, raising=False)
    import_tensorflow()
    assert os.environ[ONEDNN_VARIABLE] == "0"


def last_line_in_a_fresh_process(snippet: str) -> str:
    """What ``snippet`` prints last, run in a new Python without TF_ENABLE_ONEDNN_OPTS."""
    env = {k: v for k, v in os.environ.items() if k != ONEDNN_VARIABLE}
    done = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True,
                          check=True)
    return done.stdout.strip().splitlines()[-1]


def test_a_bfloat16_fine_tune_imports_tensorflow_with_onednn() -> None:
    snippet = ("from nlu_engine.nn.tensorflow_runtime import import_tensorflow, onednn_active; "
               "import_tensorflow(onednn=True); print(onednn_active())")
    assert last_line_in_a_fresh_process(snippet) == "True"


def test_onednn_active_reads_the_imported_tensorflow() -> None:
    from nlu_engine.nn.tensorflow_runtime import onednn_active

    snippet = ("from nlu_engine.nn.tensorflow_runtime import import_tensorflow, onednn_active; import os; "
               "import_tensorflow(); os.environ['TF_ENABLE_ONEDNN_OPTS'] = '1'; print(onednn_active())")
    # the setting after the import changes nothing
    assert last_line_in_a_fresh_process(snippet) == "False"
    assert isinstance(onednn_active(), bool)
