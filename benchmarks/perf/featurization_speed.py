"""Featurization speed: 1,000 SNIPS sentences batched, and single-message latency in process.

    .venv/bin/python -m benchmarks.perf.featurization_speed lm|lm-bf16|lm-int8|use|spacy|counts [THREADS]

``lm`` runs the language model in the float32 runtime (``bert_onnx``, under ONNX Runtime),
``lm-bf16`` in bfloat16 and ``lm-int8`` in int8 (the quantised graph). ``use`` is
UniversalSentenceEncoderFeaturizer (the default pipeline's sentence vector). ``counts`` is the
default pipeline's two CountVectorsFeaturizers (words; char_wb 1-5), trained on SNIPS's training
split first; its figures are for vocabularies and token caches as a running server has them.

Wall time and this process's CPU time (process_time) are both reported: on a machine shared
with other jobs, CPU time shows what the work itself costs.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from benchmarks.common import SNIPS
from nlu_engine.contract.component import Component
from nlu_engine.contract.message import Message
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from nlu_engine.training_data import load_data


def make(which: str) -> list[Component]:
    if which.startswith("lm"):
        from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer

        featurizer = LanguageModelFeaturizer()
        featurizer.use_runtime({"lm-bf16": "bfloat16", "lm-int8": "int8"}.get(which, "float32"))
        return [WhitespaceTokenizer(), featurizer]
    if which == "use":
        from nlu_engine.featurizers.dense.sentence_encoder import UniversalSentenceEncoderFeaturizer

        return [WhitespaceTokenizer(), UniversalSentenceEncoderFeaturizer()]
    if which == "counts":
        return trained_counts()
    from nlu_engine.featurizers.dense.spacy_featurizer import SpacyFeaturizer
    from nlu_engine.loaders.spacy_nlp import SpacyNLP
    from nlu_engine.tokenizers.spacy_tokenizer import SpacyTokenizer

    return [SpacyNLP(model="en_core_web_md"), SpacyTokenizer(), SpacyFeaturizer()]


def trained_counts() -> list[Component]:
    """The tokenizer and the default pipeline's two count featurizers, trained on SNIPS."""
    from nlu_engine.featurizers.sparse.count_vectors import CountVectorsFeaturizer

    chars = CountVectorsFeaturizer.Config(analyzer="char_wb", min_ngram=1, max_ngram=5)
    components: list[Component] = [WhitespaceTokenizer(), CountVectorsFeaturizer(),
                                   CountVectorsFeaturizer(chars)]
    data = load_data(SNIPS / "train.md")
    for component in components:
        component.train(data)
        component.process_training_data(data.messages)
    return components


def main() -> None:
    which = sys.argv[1]
    if len(sys.argv) > 2:  # pin TensorFlow to N intra-op threads and 1 inter-op thread
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[2]))
        tf.config.threading.set_inter_op_parallelism_threads(1)
    texts = [m.text for m in load_data(SNIPS / "train.md").messages][:1000]
    start = time.perf_counter()
    components = make(which)

    def run(batch: list[str]) -> None:
        messages = [Message(text) for text in batch]
        for component in components:
            component.process(messages)

    run(texts[:64])
    run(texts[:1])
    load = time.perf_counter() - start
    print(f"{which}: load + warm-up {load:.1f} s, load average {os.getloadavg()[0]:.1f}")
    rates, cpu_rates = [], []
    for _ in range(3):
        wall, cpu = time.perf_counter(), time.process_time()
        run(texts)
        rates.append(len(texts) / (time.perf_counter() - wall))
        cpu_rates.append(len(texts) / (time.process_time() - cpu))
    print(
        f"  batched: {statistics.median(rates):.0f} sentences/s wall (runs {[round(r) for r in rates]}); "
        f"{statistics.median(cpu_rates):.0f} sentences per CPU-second"
    )
    latencies, cpu_ms = [], []
    for text in texts[:300]:
        wall, cpu = time.perf_counter(), time.process_time()
        run([text])
        latencies.append((time.perf_counter() - wall) * 1000)
        cpu_ms.append((time.process_time() - cpu) * 1000)
    latencies.sort()
    cpu_ms.sort()
    print(
        f"  single message: p50 {latencies[150]:.2f} ms wall (p95 {latencies[285]:.2f}); "
        f"p50 {cpu_ms[150]:.2f} ms CPU"
    )


if __name__ == "__main__":
    main()
