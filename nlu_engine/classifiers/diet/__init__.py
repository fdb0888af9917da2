"""DIET, the Dual Intent and Entity Transformer: ``component.py`` and the network beside it.

Importing this package has no side effects; TensorFlow is set up and imported when DIET first
trains (``nlu_engine.nn.tensorflow_runtime``).
"""
