"""Training data: readers and writers for Rasa YAML, Markdown and JSON."""

from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.loading import write_data
from nlu_engine.training_data.project import load_data

__all__ = ["TrainingData", "load_data", "write_data"]
