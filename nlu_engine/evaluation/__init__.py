"""Evaluation: how well a trained pipeline parses held-out data, as ``nlu-engine test`` reports it.

- ``labels``: the report, confusion matrix and ``confused_with`` every kind of label shares;
  ``metrics``: intent and entity scores of parse results against gold messages (pure functions);
  ``responses``: response selection scores, as ``rasa test nlu``; ``confidence``: calibration,
  out of scope and the fallback sweep; ``thresholds``: the share of test messages the model's
  FallbackClassifier threshold sends to ``nlu_fallback``.
- ``experiments``: train and score configs: one model, cross-validation; ``comparison``: configs
  compared.
- ``reports``: Rasa's result files, ``summary.json``, the terminal lines; with ``html`` (the
  ``index.html`` page) and ``plots`` (PNG plots, when matplotlib is installed).

The names most callers need are importable from here.
"""

from nlu_engine.evaluation.comparison import Comparison, compare_configs, comparison_point
from nlu_engine.evaluation.experiments import (
    CrossValidation,
    Progress,
    RunResult,
    aggregate_folds,
    cross_validate,
    cross_validation_fold,
    evaluate_model,
    flat_metrics,
    train_and_evaluate,
)
from nlu_engine.evaluation.labels import (
    AVERAGES,
    LabelEvaluation,
    add_confused_with,
    classification_report,
    confusion_matrix,
    most_confused_pairs,
)
from nlu_engine.evaluation.metrics import (
    SPAN_EXACT,
    SPAN_OVERLAP,
    EntityEvaluation,
    Evaluation,
    IntentEvaluation,
    chunk_report,
    evaluate,
    evaluate_entities,
    evaluate_intents,
    extractors_in,
    overlap_matching,
    span_report,
    token_labels,
    undo_fallback,
)
from nlu_engine.evaluation.reports import (
    format_comparison,
    format_folds,
    format_summary,
    write_comparison,
    write_reports,
)

__all__ = [
    "AVERAGES",
    "SPAN_EXACT",
    "SPAN_OVERLAP",
    "Comparison",
    "CrossValidation",
    "EntityEvaluation",
    "Evaluation",
    "IntentEvaluation",
    "LabelEvaluation",
    "Progress",
    "RunResult",
    "add_confused_with",
    "aggregate_folds",
    "chunk_report",
    "classification_report",
    "compare_configs",
    "comparison_point",
    "confusion_matrix",
    "cross_validate",
    "cross_validation_fold",
    "evaluate",
    "evaluate_entities",
    "evaluate_intents",
    "evaluate_model",
    "extractors_in",
    "flat_metrics",
    "format_comparison",
    "format_folds",
    "format_summary",
    "most_confused_pairs",
    "overlap_matching",
    "span_report",
    "token_labels",
    "train_and_evaluate",
    "undo_fallback",
    "write_comparison",
    "write_reports",
]
