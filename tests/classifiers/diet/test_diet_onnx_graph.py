"""DIET's transformer under ONNX Runtime (``onnx_graph.py``): where it runs, and that it runs
the NumPy network (its outputs are checked against TensorFlow with the NumPy pass's in
``test_diet_inference.py``)."""

from __future__ import annotations

import pytest

from nlu_engine.classifiers.diet import onnx_graph
from nlu_engine.contract.errors import ConfigError


def test_the_transformer_runtime_is_onnx_where_installed_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(onnx_graph.RUNTIME_VARIABLE, raising=False)
    monkeypatch.setattr(onnx_graph, "onnx_runtime_available", lambda: True)
    assert onnx_graph.use_onnx()
    monkeypatch.setenv(onnx_graph.RUNTIME_VARIABLE, "numpy")
    assert not onnx_graph.use_onnx()
    monkeypatch.setattr(onnx_graph, "onnx_runtime_available", lambda: False)
    monkeypatch.delenv(onnx_graph.RUNTIME_VARIABLE)
    assert not onnx_graph.use_onnx()  # not installed: NumPy, silently
    monkeypatch.setenv(onnx_graph.RUNTIME_VARIABLE, "onnx")
    with pytest.raises(ConfigError, match="needs onnxruntime"):
        onnx_graph.use_onnx()
    monkeypatch.setenv(onnx_graph.RUNTIME_VARIABLE, "gpu")
    with pytest.raises(ConfigError, match="NLU_ENGINE_DIET='gpu' is not a runtime"):
        onnx_graph.use_onnx()
