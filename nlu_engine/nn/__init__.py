"""Network building blocks shared by more than one pipeline stage.

``onnx_builder`` is the one way a parse graph is written; ``onnx_runtime`` runs it (the parse
runtime, float32, int8, int8_dynamic or bfloat16, and its sessions); ``cpu`` reads what the processor can do,
once; ``tensorflow_runtime`` sets the process up before TensorFlow's first import (training). No
network's forward pass is written in NumPy: DIET's parse graph computes its own mask, positions
and relative distances (``classifiers/diet/onnx_graph.py``). This package sits below the featurizers
stage and imports none of the stages, so featurizers and classifiers both use it. Importing it
imports neither TensorFlow nor Keras.
"""
