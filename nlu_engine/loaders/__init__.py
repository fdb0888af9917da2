"""Model loaders: the first pipeline stage, before tokenizers (SpacyNLP parses each message once).

A loader prepares what later stages of several kinds share (a spaCy doc for the spaCy tokenizer
and featurizer), so it sits below both of them.
"""
