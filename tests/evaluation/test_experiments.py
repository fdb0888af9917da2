"""Experiments of nlu_engine.evaluation.experiments on the tiny data with a fast, exact pipeline.

KeywordIntentClassifier and RegexEntityExtractor train in milliseconds and predict the same
every time, so a fold run alone must score what it scored inside the whole cross-validation.
"""

import pytest

from nlu_engine.contract.errors import ConfigError, DataError
from nlu_engine.evaluation.comparison import (
    compare_configs,
    comparison_results,
    comparison_split,
    config_names,
)
from nlu_engine.evaluation.experiments import (
    Quiet,
    aggregate_folds,
    cross_validate,
    cross_validation_fold,
    cross_validation_folds,
    train_and_evaluate,
)
from nlu_engine.training_data import load_data

CONFIG = {
    "language": "en",
    "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "KeywordIntentClassifier"},
        {"name": "RegexEntityExtractor"},
    ],
}


class Recorder(Quiet):
    def __init__(self):
        self.events = []

    def begin(self, total, unit, desc):
        self.events.append(("begin", total, unit))

    def advance(self, note=""):
        self.events.append(("advance", note))

    def end(self):
        self.events.append(("end",))


@pytest.fixture
def data(tiny_data_path):
    return load_data([tiny_data_path])


def test_train_and_evaluate_scores_the_test_messages(data):
    run = train_and_evaluate(CONFIG, data, data.messages)
    # keywords are the training texts themselves: every training example is recognised
    assert run.evaluation.summary()["intent"]["accuracy"] == 1.0
    assert run.num_train == len(data.messages) == len(run.golds) == len(run.results)
    assert run.extractors == ["RegexEntityExtractor"]
    assert all(not m.tokens for m in data.messages)  # training annotated a copy


def test_a_fold_alone_scores_what_it_scored_in_the_cross_validation(data):
    recorder = Recorder()
    result = cross_validate(CONFIG, data, folds=3, seed=7, progress=recorder)
    assert len(result.fold_summaries) == 3
    # each of the 12 examples of the three 4-example intents is in exactly one test fold
    assert result.evaluation.num_examples == 12
    alone = cross_validation_fold(CONFIG, data, folds=3, fold=1, seed=7)
    assert alone.evaluation.summary() == result.fold_summaries[1]
    assert result.metrics["intent accuracy"]["folds"][1] == alone.evaluation.summary()["intent"]["accuracy"]
    assert recorder.events[0] == ("begin", 3, "fold") and recorder.events[-1] == ("end",)
    notes = [event[1] for event in recorder.events if event[0] == "advance"]
    assert [note.split(":")[0] for note in notes] == ["fold 1/3", "fold 2/3", "fold 3/3"]


def test_bad_config_and_too_little_data_fail_before_training(data):
    with pytest.raises(ConfigError):
        cross_validate({"pipeline": [{"name": "NoSuchComponent"}]}, data, folds=3)
    few = data.with_messages(data.messages[:2])
    with pytest.raises(DataError, match="5 folds need at least 5 examples"):
        cross_validation_folds(few, 5, 0)
    with pytest.raises(DataError, match="too few examples"):
        comparison_split(data.with_messages(data.messages[:1]), 0, 0)


def test_comparison_split_removes_a_share_of_the_training_part(data):
    full, test = comparison_split(data, 3, 0)
    half, same_test = comparison_split(data, 3, 50)
    assert [m.text for m in test.messages] == [m.text for m in same_test.messages]
    assert len(half.messages) < len(full.messages)
    assert {m.text for m in half.messages} <= {m.text for m in full.messages}


def test_compare_configs_shapes(data, tmp_path):
    path = tmp_path / "keywords.yml"
    path.write_text("language: en\npipeline:\n  - name: WhitespaceTokenizer\n"
                    "  - name: KeywordIntentClassifier\n")
    comparison = compare_configs([path, path], data, runs=2, percentages=[0.0, 50.0], seed=1)
    assert comparison.configs == [str(path), f"{path} #2"]  # the same file twice: two names
    assert comparison.percentages == [0, 50]
    assert len(comparison.num_examples) == 2 and len(comparison.num_test_examples) == 2
    result = comparison.results[str(path)]
    assert result["config"] == str(path)
    assert [len(row) for row in result["intent_macro_f1"]] == [2, 2]
    assert result["entities"] == {}
    as_json = comparison.to_json(["tiny.yml"])
    assert list(as_json)[:3] == ["configs", "overrides", "data"] and as_json["data"] == ["tiny.yml"]
    with pytest.raises(ValueError):
        compare_configs([path], data, percentages=[100])


def test_comparison_results_fill_missing_scores_with_zero():
    def summary(intent, entities):
        return {"intent": intent, "entities": entities}

    scores = {"exact_f1": 0.5, "overlap_f1": 0.75}
    summaries = {
        (0, 0, "a"): summary(None, {}),
        (0, 1, "a"): summary(None, {}),
        (1, 0, "a"): summary(None, {}),
        (1, 1, "a"): summary(None, {"E": scores}),  # E reports only once
    }
    results = comparison_results(["a"], ["a.yml"], summaries, runs=2, num_percentages=2)
    assert results["a"]["entities"]["E"] == {"exact_f1": [[0.0, 0.0], [0.0, 0.5]],
                                             "overlap_f1": [[0.0, 0.0], [0.0, 0.75]]}
    assert results["a"]["intent_macro_f1"] == []  # no intents anywhere: no intent curves
    summaries[0, 0, "a"] = summary({"macro_f1": 0.9, "accuracy": 1.0, "weighted_f1": 0.8}, {})
    results = comparison_results(["a"], ["a.yml"], summaries, runs=2, num_percentages=2)
    assert results["a"]["intent_macro_f1"] == [[0.9, 0.0], [0.0, 0.0]]
    assert results["a"]["intent_weighted_f1"][0][0] == 0.8


def test_config_names_are_short_and_unique():
    assert config_names(["p/diet.yml", "p/crf.yaml"]) == ["diet", "crf"]
    assert config_names(["a/diet.yml", "b/diet.yml"]) == ["a/diet.yml", "b/diet.yml"]
    assert config_names(["diet.yml", "diet.yml"]) == ["diet.yml", "diet.yml #2"]


def test_aggregate_folds_mean_and_population_std():
    summaries = [{"intent": {"accuracy": a, "macro_f1": a, "weighted_f1": a, "macro_precision": a,
                             "macro_recall": a}, "entities": {}} for a in (0.8, 0.9, 1.0)]
    stats = aggregate_folds(summaries)
    assert stats["intent accuracy"]["mean"] == pytest.approx(0.9)
    assert stats["intent accuracy"]["std"] == pytest.approx((0.02 / 3) ** 0.5)
    assert stats["intent accuracy"]["folds"] == [0.8, 0.9, 1.0]


class ReversedRunner:
    """A runner that runs the units last first (as a pool may finish them) and returns them in
    order, recording the calls it was given."""

    def __init__(self):
        self.calls = []

    def run(self, function, shared, calls, progress):
        self.calls = [dict(call) for call in calls]
        results = {i: function(**shared, **call) for i, call in reversed(list(enumerate(calls)))}
        return iter([results[i] for i in range(len(calls))])


def test_a_runner_runs_the_units_and_the_aggregate_is_the_sequential_one(data):
    runner = ReversedRunner()
    result = cross_validate(CONFIG, data, folds=3, seed=7, runner=runner)
    assert runner.calls == [{"fold": 0}, {"fold": 1}, {"fold": 2}]
    assert result.fold_summaries == cross_validate(CONFIG, data, folds=3, seed=7).fold_summaries
    comparison = compare_configs([CONFIG], data, runs=2, percentages=[0, 50], seed=1, runner=runner)
    assert [(c["seed"], c["percent"]) for c in runner.calls] == [(1, 0), (1, 50), (2, 0), (2, 50)]
    assert comparison.results == compare_configs([CONFIG], data, runs=2, percentages=[0, 50], seed=1).results
