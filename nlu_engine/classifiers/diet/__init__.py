"""DIET, the Dual Intent and Entity Transformer (``component.py`` and the network beside it).

TensorFlow's oneDNN custom operations are off in a process that builds a DIET pipeline
(``TF_ENABLE_ONEDNN_OPTS=0`` unless the environment already sets it; it only counts before
TensorFlow is imported). With oneDNN, memory grew epoch after epoch while DIET's batch shapes
changed (most likely oneDNN kernels and buffers kept per shape; capping oneDNN's own primitive
cache did not help). On an AVX-512 machine (2 cores), SNIPS training for 8 epochs peaked at
2,022 MB with oneDNN and 1,815 MB without, in about the same time (112.2 against 109.8 s); over
20 epochs, 2,088 against 1,890 MB, 9 % slower. The language model featurizes as fast in float32
(738 against 757 sentences/s); bfloat16 loses 15 %: set ``TF_ENABLE_ONEDNN_OPTS=1`` for it.
See BENCHMARKS.md.
"""

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
