"""TensorFlow's process-wide settings, applied where the package first imports TensorFlow.

TensorFlow reads ``TF_ENABLE_ONEDNN_OPTS`` once, when it is imported, so the setting has to be
in the environment before that. ``import_tensorflow`` puts it there (oneDNN off, unless the
environment already sets it) and is called by every code path that brings TensorFlow in for
work: DIET's training and the language model's TensorFlow encoder. Importing a module of this
package changes nothing.

Why oneDNN is off by default: with oneDNN, DIET's training memory grew from epoch to epoch
while its batch shapes changed (most likely oneDNN keeping kernels and buffers for every shape
it had seen; capping oneDNN's own primitive cache did not help), and without it training is
about as fast. The language model's float32 features are about as fast either way; its
``precision: bfloat16`` needs oneDNN to be fast: set ``TF_ENABLE_ONEDNN_OPTS=1`` for it.
A training that fine-tunes an encoder in bfloat16 (``training_precision``) asks for oneDNN
(``import_tensorflow(onednn=True)``): for that process only, and only if TensorFlow is not
imported yet. Figures: BENCHMARKS.md.
"""

from __future__ import annotations

import os
from types import ModuleType

ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"


def import_tensorflow(onednn: bool = False) -> ModuleType:
    """TensorFlow, imported with the package's defaults: oneDNN off, or on with ``onednn``,
    unless the environment says otherwise. Once TensorFlow is imported, the setting no longer
    changes anything (``onednn_active`` says what it was)."""
    os.environ.setdefault(ONEDNN_VARIABLE, "1" if onednn else "0")
    import tensorflow

    return tensorflow


def onednn_active() -> bool:
    """Whether this process's TensorFlow runs with oneDNN (TensorFlow's own check: it was
    decided when TensorFlow was imported, whatever the environment says now)."""
    import_tensorflow()
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):  # a TensorFlow without the check: what it was told
        return os.environ.get(ONEDNN_VARIABLE, "1").strip().lower() in ("1", "true")
