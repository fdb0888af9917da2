"""DIET, the Dual Intent and Entity Transformer: the component (``component.py``), messages as
arrays (``encoding.py``), the storage format (``storage.py``) and the network beside them.

Importing this package has no side effects; TensorFlow is set up and imported when DIET first
trains (``nlu_engine.nn.tensorflow_runtime``).
"""
