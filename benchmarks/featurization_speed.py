"""Featurization speed: 1,000 SNIPS sentences batched, and single-message latency in process.

usage: python featurization_speed.py lm|lm-bf16|spacy
Wall time and this process's CPU time (process_time) are both reported: on a machine shared
with other jobs, CPU time shows what the work itself costs.
"""
import os, statistics, sys, time
from nlu_engine.message import Message
from nlu_engine.training_data import load_data
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer

from pathlib import Path

SNIPS = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "SNIPS" / "train.md"
texts = [m.text for m in load_data(SNIPS).messages][:1000]
which = sys.argv[1]
if len(sys.argv) > 2:  # threads: pin TensorFlow to N intra-op and 1 inter-op thread
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[2]))
    tf.config.threading.set_inter_op_parallelism_threads(1)

def make():
    if which.startswith("lm"):
        from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer
        precision = "bfloat16" if which == "lm-bf16" else "float32"
        return [WhitespaceTokenizer(), LanguageModelFeaturizer(precision=precision)]
    from nlu_engine.featurizers.dense.spacy_nlp import SpacyNLP
    from nlu_engine.tokenizers.spacy_tokenizer import SpacyTokenizer
    from nlu_engine.featurizers.dense.spacy_featurizer import SpacyFeaturizer
    return [SpacyNLP(model="en_core_web_md"), SpacyTokenizer(), SpacyFeaturizer()]

t = time.perf_counter(); comps = make()
def run(batch):
    msgs = [Message(x) for x in batch]
    for c in comps: c.process(msgs)
    return msgs
run(texts[:64]); run(texts[:1]); print(f"{which}: load + warm-up {time.perf_counter() - t:.1f} s, load average {os.getloadavg()[0]:.1f}")
rates, cpu_rates = [], []
for _ in range(3):
    t, c = time.perf_counter(), time.process_time(); run(texts)
    rates.append(len(texts) / (time.perf_counter() - t)); cpu_rates.append(len(texts) / (time.process_time() - c))
print(f"  batched: {statistics.median(rates):.0f} sentences/s wall (runs {[round(r) for r in rates]}); "
      f"{statistics.median(cpu_rates):.0f} sentences per CPU-second")
lat, cpu = [], []
for x in texts[:300]:
    t, c = time.perf_counter(), time.process_time(); run([x])
    lat.append((time.perf_counter() - t) * 1000); cpu.append((time.process_time() - c) * 1000)
lat.sort(); cpu.sort()
print(f"  single message: p50 {lat[150]:.2f} ms wall (p95 {lat[285]:.2f}); p50 {cpu[150]:.2f} ms CPU")
