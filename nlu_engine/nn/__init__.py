"""Network building blocks shared by more than one pipeline stage.

``ops`` (gelu, LayerNorm) and ``attention`` are the float32 NumPy pieces of the inference forward
passes, DIET's (``classifiers/diet/inference.py``) and the language model's
(``featurizers/dense/bert.py``). This package sits below the featurizers stage and imports none
of the stages, so featurizers and classifiers both use it. It imports neither TensorFlow nor
Keras.
"""
