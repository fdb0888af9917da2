"""DIET, the Dual Intent and Entity Transformer (``component.py`` and the network beside it).

TensorFlow's oneDNN custom operations are off in a process that builds a DIET pipeline
(``TF_ENABLE_ONEDNN_OPTS=0`` unless the environment already sets it; it only counts before
TensorFlow is imported). DIET's batches change shape from step to step, and TensorFlow keeps
oneDNN's compiled kernels per shape: on an AVX-512 machine (2 cores) training SNIPS grew to
2,022 MB with them and peaked at 1,815 MB without, in the same time (8 epochs: 112.2 against
109.8 s), and the language model featurized as fast in float32 (738 against 757 sentences/s;
bfloat16 loses 15 %: set ``TF_ENABLE_ONEDNN_OPTS=1`` for it). See BENCHMARKS.md.
"""

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
