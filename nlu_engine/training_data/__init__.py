"""Training data: readers and writers for Rasa YAML, Markdown and JSON."""

from nlu_engine.training_data.loading import load_data, write_data
from nlu_engine.training_data.training_data import TrainingData

__all__ = ["TrainingData", "load_data", "write_data"]
