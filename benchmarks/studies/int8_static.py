"""Does static int8 hold where dynamic int8 did not? (issue 41, item 4: a study, not shipped)

    .venv/bin/python -m benchmarks.studies.int8_static -m ARCHIVE --train TRAIN.md --test TEST.md
        [--calibration 300] [--messages 700] [--method minmax|percentile]

Loads an archive with a LanguageModelFeaturizer and parses the test messages with its encoder in
five graphs: float32, ONNX Runtime's dynamic int8 (the ``int8`` runtime: one activation scale
per tensor per call), the same with the attention projections or the last layer kept float32,
and a static QDQ graph: per-channel int8 weights, activation ranges
calibrated once on ``--calibration`` training messages (``--method`` MinMax or Percentile), the
feed-forward output product left in float32 as the int8 runtime does. Prints, per graph against
float32: the intent predictions that differ, the largest confidence difference (the
FallbackClassifier's ``nlu_fallback`` left out), how many messages move by more than 0.1, and the
single-message p50 of ``Model.parse``. Keep int8 only where every score stays within 0.1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import emit_json
from nlu_engine.assembly.model import Model
from nlu_engine.featurizers.dense import bert_onnx
from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer
from nlu_engine.nn.onnx_runtime import Sessions
from nlu_engine.training_data import load_data


def static_graph(featurizer: LanguageModelFeaturizer, texts: list[str], method: str) -> Any:
    """The encoder's float32 graph as a static QDQ int8 graph calibrated on ``texts``."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    rows, _ = featurizer._subtokens([t.split() for t in texts], warn=False)
    # one length for all (the histogram methods stack the calibration tensors), padding masked
    width = max(map(len, rows))
    feeds = [{"ids": np.array([row + [0] * (width - len(row))], np.int32),
              "mask": np.array([[1] * len(row) + [0] * (width - len(row))], np.int32)} for row in rows]

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.items = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    graph = bert_onnx.encoder_graph(featurizer._encoder())
    # ONNX's type inference does not know ONNX Runtime's own operators (Attention,
    # SkipLayerNormalization, BiasGelu): their outputs are float, said here, or the quantiser
    # leaves the products after them unquantised
    typed = {v.name for v in graph.graph.value_info}
    for node in graph.graph.node:
        if node.domain == "com.microsoft" or node.op_type == "MatMul":
            graph.graph.value_info.extend(onnx.helper.make_tensor_value_info(
                name, onnx.TensorProto.FLOAT, None) for name in node.output if name not in typed)
    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder) / "f32.onnx", Path(folder) / "int8.onnx"
        onnx.save(graph, str(source))
        quantize_static(
            str(source), str(target), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"],
            nodes_to_exclude=[n.name for n in graph.graph.node if n.name.endswith(bert_onnx.FLOAT32_PRODUCT)],
            calibrate_method=getattr(CalibrationMethod, "Percentile" if method == "percentile" else "MinMax"),
        )
        return onnx.load(str(target))


def dynamic_graph(featurizer: LanguageModelFeaturizer, keep: str) -> Any:
    """The int8 runtime's dynamic quantisation with more products kept float32: ``keep`` is
    ``attention`` (the fused attention projections) or ``last`` (the last layer)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = bert_onnx.encoder_graph(featurizer._encoder())
    last = f"l{len(featurizer._encoder().layers) - 1}_"
    excluded = [n.name for n in graph.graph.node if n.name.endswith(bert_onnx.FLOAT32_PRODUCT)
                or (keep == "attention" and n.op_type == "Attention")
                or (keep == "last" and n.name.startswith(last))]
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "int8.onnx"
        quantize_dynamic(graph, target, op_types_to_quantize=["MatMul", "Attention"], per_channel=True,
                         nodes_to_exclude=excluded, weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        return onnx.load(str(target))


def scores(model: Model, texts: list[str]) -> list[dict[str, float]]:
    """The intents' confidences of each message (the FallbackClassifier's ``nlu_fallback`` left
    out: it appears with the threshold as its confidence when a score crosses it)."""
    parsed = model.parse_batch(texts)
    return [{r["name"]: r["confidence"] for r in result["intent_ranking"] if r["name"] != "nlu_fallback"}
            for result in parsed]


def p50_ms(model: Model, texts: list[str]) -> float:
    times = []
    for text in texts:
        start = time.perf_counter()
        model.parse(text)
        times.append(1000 * (time.perf_counter() - start))
    return round(statistics.median(times), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--calibration", type=int, default=300)
    parser.add_argument("--messages", type=int, default=700)
    parser.add_argument("--method", choices=["minmax", "percentile"], default="minmax",
                        help="how the activation ranges are calibrated")
    args = parser.parse_args()
    train = [m.text for m in load_data(args.train).messages][: args.calibration]
    test = [m.text for m in load_data(args.test).messages][: args.messages]
    reference = Model.load(args.model, runtime="float32")
    expected = scores(reference, test)
    results: dict[str, Any] = {"float32": {"p50_ms": p50_ms(reference, test[:200])}}
    for name in ("dynamic", "dynamic, attention float32", "dynamic, last layer float32", "static"):
        model = Model.load(args.model, runtime="int8" if name == "dynamic" else "float32")
        if name != "dynamic":
            featurizer = next(c for c in model.pipeline.components if isinstance(c, LanguageModelFeaturizer))
            compiled = featurizer._parse_encoder()
            compiled.graph = (static_graph(featurizer, train, args.method) if name == "static"
                              else dynamic_graph(featurizer, name.split(", ")[1].split()[0]))
            compiled._sessions = Sessions(compiled.graph, bert_onnx.SINGLE_THREAD_MAX_SUBTOKENS)
        got = scores(model, test)
        differ = sum(max(a, key=a.get) != max(b, key=b.get) for a, b in zip(got, expected, strict=True)
                     if a and b)
        pairs = zip(got, expected, strict=True)
        moved = [max(abs(a.get(k, 0.0) - v) for k, v in b.items()) for a, b in pairs]
        results[name] = {"intents_differ": differ, "max_confidence_diff": round(max(moved), 4),
                         "messages_over_0.1": sum(m > 0.1 for m in moved),
                         "p99_confidence_diff": round(float(np.percentile(moved, 99)), 4),
                         "p50_ms": p50_ms(model, test[:200])}
        print(name, json.dumps(results[name]))
    emit_json({"model": args.model, "messages": len(test), "calibration": len(train), "method": args.method,
               **results}, None)


if __name__ == "__main__":
    main()
