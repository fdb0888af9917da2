"""Network building blocks shared by more than one pipeline stage.

``ops`` (gelu, LayerNorm) and ``attention`` are the float32 NumPy pieces of the inference forward
passes, DIET's (``classifiers/diet/inference.py``) and the language model's
(``featurizers/dense/bert.py``); ``tensorflow_runtime`` sets the process up before TensorFlow's
first import; ``onnx_runtime`` makes the ONNX Runtime sessions of the parse paths that run a
graph. This package sits below the featurizers stage and imports none of the stages, so
featurizers and classifiers both use it. Importing it imports neither TensorFlow nor Keras.
"""
