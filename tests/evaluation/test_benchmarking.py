"""The benchmark's pure parts: training configs, machine description, markdown rows, summaries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nlu_engine.assembly.config import PIPELINES
from nlu_engine.evaluation.benchmarking import (
    cpu_model,
    headline_scores,
    markdown_rows,
    read_training_config,
    summarize,
)

TRAINING_CONFIGS = sorted((Path(__file__).resolve().parents[2] / "training_configs").glob("*.yml"))


def test_cpu_model_names_the_processor_and_its_vector_extensions() -> None:
    described = cpu_model()
    assert re.fullmatch(r".+ \((no AVX2|[a-z0-9_]+(, [a-z0-9_]+)*)\)", described), described


def test_markdown_row_shows_scores_as_percentages_and_keeps_other_values() -> None:
    row = {"benchmark": "snips", "epochs": 20, "train_wall_s": 791.6, "intent_accuracy": 0.98,
           "entity_exact_f1": 0.9346, "parse_p50_ms": 5.77}
    header, rule, line = markdown_rows([row]).splitlines()
    cells = [c.strip() for c in line.strip("|").split("|")]
    titles = [c.strip() for c in header.strip("|").split("|")]
    assert len(cells) == len(titles) == rule.count("---|")
    by_title = dict(zip(titles, cells, strict=True))
    assert by_title["intent acc"] == "98.00"
    assert by_title["entity exact F1"] == "93.46"
    assert by_title["train s"] == "791.6"
    assert by_title["parse p50 ms"] == "5.77"
    assert by_title["entity overlap F1"] == ""  # missing values stay empty, not zero


def test_summary_over_folds_has_mean_and_spread() -> None:
    rows = [{"intent_accuracy": 0.8}, {"intent_accuracy": 0.9}, {"intent_accuracy": "n/a"}]
    summary = summarize(rows)
    assert summary["folds"] == 3
    assert summary["intent_accuracy"]["mean"] == 0.85
    assert summary["intent_accuracy"]["std"] > 0


def test_headline_scores_prefer_diet_among_extractors() -> None:
    summary = {
        "intent": {"accuracy": 0.9, "macro_f1": 0.88},
        "entities": {
            "CRFEntityExtractor": {"exact_f1": 0.1, "overlap_f1": 0.2},
            "DIETClassifier": {"exact_f1": 0.7, "overlap_f1": 0.8},
        },
    }
    assert headline_scores(summary) == {
        "intent_accuracy": 0.9, "intent_macro_f1": 0.88,
        "entity_exact_f1": 0.7, "entity_overlap_f1": 0.8,
    }


@pytest.mark.parametrize("path", TRAINING_CONFIGS, ids=lambda p: p.name)
def test_training_configs_name_a_shipped_pipeline(path: Path) -> None:
    config = read_training_config(path)
    assert config.pipeline.is_file()
    assert str(config.pipeline).startswith(str(PIPELINES))
