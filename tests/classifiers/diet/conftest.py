"""Fixtures of DIET's tests: the tiny data set, featurized as the default pipeline does."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import load_data


@pytest.fixture(scope="module")
def featurized(tiny_data_path: Path) -> tuple[Pipeline, TrainingData]:
    """The tiny data set tokenized and featurized by the default pipeline's featurizers."""
    config = load_config({
        "language": "en",
        "pipeline": [
            {"name": "WhitespaceTokenizer"},
            {"name": "CountVectorsFeaturizer"},
            {"name": "CountVectorsFeaturizer", "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 4},
        ],
    })
    pipeline = Pipeline.build(config)
    data = load_data([tiny_data_path])
    pipeline.train(data, log=None)
    pipeline.process(data.messages)  # train() annotates copies: featurize the examples themselves
    return pipeline, data
