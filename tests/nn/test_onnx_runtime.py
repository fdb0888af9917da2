"""ONNX Runtime sessions (``nn.onnx_runtime``): the thread count asked for, and the process's
BLAS share as the threads a large batch may use."""

from __future__ import annotations

import numpy as np
import pytest

from nlu_engine.nn.onnx_runtime import process_threads, session
from tests.extras import requires_extra

needs_onnx = requires_extra("lm", "onnxruntime", "onnx")


@needs_onnx
@pytest.mark.parametrize("threads", [1, 2])
def test_a_session_runs_a_graph_on_the_threads_asked_for(threads: int) -> None:
    from onnx import TensorProto, helper, numpy_helper

    kernel = np.arange(6, dtype=np.float32).reshape(2, 3)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "product",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 3])],
        [numpy_helper.from_array(kernel, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    running = session(model, threads)
    assert running.get_session_options().intra_op_num_threads == threads
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_allclose(running.run(None, {"x": x})[0], x @ kernel)


def test_process_threads_follow_the_blas_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert process_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert process_threads() == 1
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.setattr("os.cpu_count", lambda: 5)
    assert process_threads() == 5
