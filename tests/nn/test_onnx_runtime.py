"""The parse runtime (``nn.onnx_runtime``): the runtime names and what each CPU runs, the one-line
errors of a wrong name or a broken install, the sessions' threads."""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest

from nlu_engine.contract.errors import ConfigError
from nlu_engine.nn.cpu import Cpu
from nlu_engine.nn.onnx_runtime import (
    RUNTIMES,
    Sessions,
    check_runtime,
    process_threads,
    require_onnxruntime,
    runtime_for_cpu,
    session,
)

NO_VNNI = Cpu(frozenset({"avx2", "fma"}))
VNNI = Cpu(frozenset({"avx2", "avx512f", "avx512_vnni"}))


def test_a_runtime_name_is_checked_in_one_line() -> None:
    assert [check_runtime(name) for name in RUNTIMES] == ["float32", "int8", "int8_dynamic", "bfloat16"]
    with pytest.raises(ConfigError) as raised:
        check_runtime("fp16", "--runtime")
    assert str(raised.value) == ("--runtime 'fp16' is not a runtime: use one of float32, int8, int8_dynamic, "
                                 "bfloat16")


@pytest.mark.parametrize("int8", ["int8", "int8_dynamic"])
def test_int8_asked_for_runs_on_any_cpu_with_one_warning_about_speed(
    caplog: pytest.LogCaptureFixture, int8: str
) -> None:
    with caplog.at_level(logging.WARNING):
        assert runtime_for_cpu(int8, explicit=True, cpu=NO_VNNI) == int8
    assert len(caplog.records) == 1 and "slower than float32" in caplog.records[0].getMessage()
    assert caplog.records[0].getMessage().startswith(f"runtime {int8}: ")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert runtime_for_cpu(int8, explicit=True, cpu=VNNI) == int8
    assert not caplog.records


def test_a_cpu_without_avx2_is_named_once_a_process_at_load(caplog: pytest.LogCaptureFixture) -> None:
    plain = Cpu(frozenset({"sse2", "sse4_2", "lm"}))  # a plain x86-64 container
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert runtime_for_cpu("float32", explicit=False, cpu=plain) == "float32"
    assert [r.getMessage() for r in caplog.records] == [plain.slow_path()]
    assert "no AVX2" in caplog.records[0].getMessage() and "\n" not in caplog.records[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # AVX2, an ARM CPU's flags, nothing detected: silent
        for cpu in (NO_VNNI, Cpu(frozenset({"fp", "asimd"})), Cpu(frozenset())):
            assert runtime_for_cpu("float32", explicit=False, cpu=cpu) == "float32"
    assert not caplog.records


@pytest.mark.parametrize("int8", ["int8", "int8_dynamic"])
def test_an_int8_archive_on_a_cpu_without_int8_says_it_runs_float32(
    caplog: pytest.LogCaptureFixture, int8: str
) -> None:
    with caplog.at_level(logging.WARNING):
        assert runtime_for_cpu(int8, explicit=False, cpu=NO_VNNI) == "float32"
    assert len(caplog.records) == 1
    assert "parses in float32 instead" in caplog.records[0].getMessage()
    assert f"trained for runtime {int8}," in caplog.records[0].getMessage()
    with caplog.at_level(logging.WARNING):
        assert runtime_for_cpu(int8, explicit=False, cpu=VNNI) == int8
        assert runtime_for_cpu("bfloat16", explicit=False, cpu=NO_VNNI) == "bfloat16"
        assert runtime_for_cpu("float32", explicit=False, cpu=NO_VNNI) == "float32"
    assert len(caplog.records) == 1


@pytest.mark.parametrize("broken", [None, "boom"])
def test_a_missing_or_broken_onnxruntime_is_one_line_naming_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path, broken: str | None
) -> None:
    if broken is None:
        monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import raises ImportError
    else:
        (tmp_path / "onnxruntime").mkdir()
        (tmp_path / "onnxruntime" / "__init__.py").write_text(f"raise OSError({broken!r})\n")
        monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
        monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        require_onnxruntime()
    message = str(raised.value)
    assert "\n" not in message and "needs onnxruntime" in message
    assert "pip install 'onnxruntime" in message
    assert (broken or "ModuleNotFoundError") in message


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


@pytest.mark.parametrize(("single_thread_max", "share", "small", "large"),
                         [(4, "2", [1], [1, 2]), (0, "2", [2], [2]), (0, "1", [1], [1])])
def test_sessions_run_small_inputs_on_one_thread_unless_none_should(
    monkeypatch: pytest.MonkeyPatch, single_thread_max: int, share: str, small: list[int], large: list[int]
) -> None:
    """Small inputs on a one-thread session up to ``single_thread_max`` positions (0: none, as the
    language model's encoder), larger ones on the process's share of the cores; same outputs."""
    from nlu_engine.nn.onnx_builder import FLOAT, GraphBuilder

    monkeypatch.setenv("OMP_NUM_THREADS", share)
    g = GraphBuilder("double")
    g.output(g.op("Add", [g.input("x", FLOAT, ["n"]), "x"], "sum"), "y", FLOAT, ["n"])
    sessions = Sessions(g.model(), single_thread_max)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(sessions.run({"x": x[:3]}, 3), 2 * x[:3])
    assert sorted(sessions._by_threads) == small
    np.testing.assert_array_equal(sessions.run({"x": x}, 8), 2 * x)
    assert sorted(sessions._by_threads) == large


@pytest.mark.parametrize("int8", ["int8", "int8_dynamic"])
def test_a_config_naming_int8_trains_float32_on_a_cpu_without_int8(
    caplog: pytest.LogCaptureFixture, int8: str
) -> None:
    """The shipped diet.yml names int8_dynamic: on an AVX2-only CPU it trains and parses float32,
    said once as a notice, not a warning; with int8 dot products it keeps the config's."""
    with caplog.at_level(logging.INFO):
        assert runtime_for_cpu(int8, explicit=True, cpu=NO_VNNI, training=True) == "float32"
    assert [r.levelname for r in caplog.records] == ["NOTICE"]
    assert "trains and parses in float32" in caplog.records[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert runtime_for_cpu(int8, explicit=True, cpu=VNNI, training=True) == int8
        assert runtime_for_cpu("float32", explicit=True, cpu=NO_VNNI, training=True) == "float32"
    assert not caplog.records
