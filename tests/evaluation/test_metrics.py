"""Metrics of nlu_engine.evaluation.metrics against hand-computed cases (and scikit-learn)."""

import random

import pytest

from nlu_engine.contract.message import Message
from nlu_engine.evaluation.labels import (
    add_confused_with,
    classification_report,
    confusion_matrix,
    most_confused_pairs,
)
from nlu_engine.evaluation.metrics import (
    SPAN_EXACT,
    SPAN_OVERLAP,
    chunk_report,
    evaluate,
    evaluate_entities,
    evaluate_intents,
    overlap_matching,
    span_report,
    token_labels,
    undo_fallback,
)
from nlu_engine.training_data.bilou import NO_ENTITY_LABEL


def ent(entity, start, end, text=None, extractor="X", **extra):
    e = {"entity": entity, "start": start, "end": end, "extractor": extractor, **extra}
    if text is not None:
        e["value"] = text[start:end]
    return e


def parse_result(text, intent=None, confidence=0.9, entities=(), tokens=None):
    if tokens is None:
        tokens, pos = [], 0
        for word in text.split(" "):
            tokens.append([pos, pos + len(word)])
            pos += len(word) + 1
    return {"text": text, "intent": {"name": intent, "confidence": confidence},
            "entities": list(entities), "text_tokens": tokens, "intent_ranking": []}


# --- classification report -----------------------------------------------------------------------
def test_classification_report_by_hand():
    targets = ["a", "a", "a", "b", "b", "c"]
    predictions = ["a", "a", "b", "b", "c", "c"]
    report = classification_report(targets, predictions)
    # a: tp 2, predicted 2, gold 3; b: tp 1, predicted 2, gold 2; c: tp 1, predicted 2, gold 1
    assert report["a"] == {"precision": 1.0, "recall": 2 / 3, "f1-score": 0.8, "support": 3}
    assert report["b"] == {"precision": 0.5, "recall": 0.5, "f1-score": 0.5, "support": 2}
    assert report["c"]["f1-score"] == pytest.approx(2 / 3)
    assert report["accuracy"] == pytest.approx(4 / 6)
    assert "micro avg" not in report
    assert report["macro avg"]["f1-score"] == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    assert report["weighted avg"]["recall"] == pytest.approx((3 * 2 / 3 + 2 * 0.5 + 1) / 6)
    assert report["macro avg"]["support"] == 6


def test_labels_that_miss_a_prediction_give_micro_avg():
    report = classification_report(["a", "b", "O"], ["a", "O", "b"], labels=["a", "b"])
    assert "accuracy" not in report
    # over labels a, b: tp 1, gold 2, predicted 2
    assert report["micro avg"] == {"precision": 0.5, "recall": 0.5, "f1-score": 0.5, "support": 2}


def test_empty_labels_give_empty_report():
    assert classification_report(["O"], ["O"], labels=[]) == {}
    assert classification_report([], []) == {}


@pytest.mark.parametrize("seed", range(5))
def test_classification_report_equals_sklearn(seed):
    from sklearn import metrics

    rng = random.Random(seed)
    labels = ["x", "y", "z", "w", "no_entity"]
    targets = [rng.choice(labels[:4]) for _ in range(200)]
    predictions = [t if rng.random() < 0.6 else rng.choice(labels) for t in targets]
    for chosen in (None, sorted(set(targets))):
        ours = classification_report(targets, predictions, chosen)
        theirs = metrics.classification_report(
            targets, predictions, labels=chosen, output_dict=True, zero_division=0
        )
        assert set(ours) == set(theirs)
        for key, row in theirs.items():
            if isinstance(row, float):
                assert ours[key] == pytest.approx(row, abs=1e-12)
            else:
                for metric, value in row.items():
                    assert ours[key][metric] == pytest.approx(value, abs=1e-12), (key, metric)


# --- confusion ------------------------------------------------------------------------------------
def test_confusion_matrix_and_confused_with_keep_top_three_cells():
    targets = ["a"] * 10 + ["b"]
    predictions = ["a"] * 4 + ["b"] * 3 + ["c"] * 2 + ["d"] + ["b"]
    labels, matrix = confusion_matrix(targets, predictions)
    assert labels == ["a", "b", "c", "d"]
    assert matrix[0] == [4, 3, 2, 1]
    report = classification_report(targets, predictions, ["a", "b"])
    add_confused_with(report, labels, matrix)
    # the three largest cells of row a are a (itself), b and c: d is left out as in Rasa
    assert report["a"]["confused_with"] == {"b": 3, "c": 2}
    assert report["b"]["confused_with"] == {}
    pairs = most_confused_pairs(labels, matrix)
    assert pairs[0] == {"gold": "a", "predicted": "b", "count": 3, "share": 0.3}
    assert [p["predicted"] for p in pairs] == ["b", "c", "d"]


# --- intents --------------------------------------------------------------------------------------
def test_intents_none_prediction_and_missing_gold():
    golds = [Message("hi", intent="greet"), Message("bye", intent="bye"),
             Message("what", intent="greet"), Message("no label")]
    results = [parse_result("hi", "greet", 0.9), parse_result("bye", "greet", 0.6),
               parse_result("what", None, 0.0), parse_result("no label", "greet")]
    evaluation = evaluate_intents(golds, results)
    assert evaluation.num_examples == 3  # the example without a gold intent is left out
    assert evaluation.report["accuracy"] == pytest.approx(1 / 3)
    assert evaluation.report["greet"]["confused_with"] == {"": 1}
    assert evaluation.report["bye"] == {"precision": 0.0, "recall": 0.0, "f1-score": 0.0,
                                        "support": 1, "confused_with": {"greet": 1}}
    assert evaluation.report["greet"]["precision"] == 0.5
    assert "" in evaluation.labels
    assert evaluation.errors == [
        {"text": "bye", "intent": "bye", "intent_prediction": {"name": "greet", "confidence": 0.6}},
        {"text": "what", "intent": "greet", "intent_prediction": {"name": None, "confidence": 0.0}},
    ]
    assert [s["text"] for s in evaluation.successes] == ["hi"]
    assert evaluation.correct_confidences == [0.9]
    assert evaluation.wrong_confidences == [0.6, 0.0]
    # accuracy is always there, micro avg too when a prediction is no gold intent
    assert list(evaluation.report)[-4:] == ["accuracy", "micro avg", "macro avg", "weighted avg"]


def test_no_gold_intents_means_no_intent_evaluation():
    assert evaluate_intents([Message("x")], [parse_result("x", "a")]) is None


# --- conlleval chunks -----------------------------------------------------------------------------
def test_chunk_report_by_hand():
    gold = [["B-a", "L-a", "O", "U-b"], ["U-a", "O"]]
    predicted = [["B-a", "L-a", "O", "O"], ["B-a", "L-a"]]
    report = chunk_report(gold, predicted)
    # gold chunks: a(0-1), b(3), a(0); predicted: a(0-1), a(0-1 in sentence 2) -> 1 correct
    assert report["micro avg"] == {"precision": 0.5, "recall": 1 / 3, "f1-score": 0.4, "support": 3,
                                   "predicted": 2, "correct": 1}
    assert report["b"]["recall"] == 0.0 and report["b"]["predicted"] == 0
    assert report["a"]["f1-score"] == pytest.approx(0.5)
    assert report["macro avg"]["f1-score"] == pytest.approx(0.25)


# --- spans ----------------------------------------------------------------------------------------
def test_exact_spans_need_type_and_boundaries():
    gold = [[("city", 0, 6), ("date", 10, 18)]]
    predicted = [[("city", 0, 6), ("date", 10, 15), ("time", 20, 22)]]
    report = span_report(gold, predicted, "exact")
    assert report["micro avg"]["correct"] == 1
    assert report["micro avg"]["precision"] == pytest.approx(1 / 3)
    assert report["micro avg"]["recall"] == 0.5
    assert report["micro avg"]["f1-score"] == pytest.approx(0.4)
    assert report["time"] == {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 0,
                              "predicted": 1, "correct": 0}
    # macro over the gold types only: city 1.0, date 0.0
    assert report["macro avg"]["f1-score"] == 0.5


def test_duplicate_spans_are_matched_once():
    report = span_report([[("a", 0, 3)]], [[("a", 0, 3), ("a", 0, 3)]], "exact")
    assert report["micro avg"]["correct"] == 1
    assert report["micro avg"]["precision"] == 0.5


def test_overlap_matches_each_entity_once():
    # one long gold entity overlapped by two predictions: only one of them counts
    gold = [("loc", 0, 20)]
    predicted = [("loc", 0, 5), ("loc", 10, 15)]
    assert overlap_matching(gold, predicted) == [(0, 0)]
    report = span_report([gold], [predicted], "overlap")
    assert report["micro avg"]["correct"] == 1
    assert report["micro avg"]["precision"] == 0.5 and report["micro avg"]["recall"] == 1.0
    # and two gold entities overlapped by one prediction
    report = span_report([predicted], [gold], "overlap")
    assert report["micro avg"]["precision"] == 1.0 and report["micro avg"]["recall"] == 0.5


def test_overlap_finds_the_largest_matching():
    # gold 0 overlaps both predictions, gold 1 only the first: a greedy pass that gives gold 0
    # the first overlapping prediction leaves gold 1 unmatched
    gold = [("a", 0, 10), ("a", 8, 12)]
    predicted = [("a", 3, 9), ("a", 5, 7)]
    assert overlap_matching(gold, predicted) == [(0, 1), (1, 0)]


def test_overlap_needs_same_type_and_shared_characters():
    gold = [("a", 0, 5), ("b", 10, 15)]
    predicted = [("b", 0, 5), ("b", 15, 20), ("a", 4, 6)]
    # b at 15-20 only touches 10-15 (end is exclusive): no overlap
    assert overlap_matching(gold, predicted) == [(0, 2)]


def test_empty_predictions_and_empty_gold():
    report = span_report([[("a", 0, 1)], []], [[], []], "overlap")
    assert report["micro avg"] == {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 1,
                                   "predicted": 0, "correct": 0}
    report = span_report([[]], [[]], "exact")
    assert report["micro avg"]["f1-score"] == 0.0 and report["macro avg"]["f1-score"] == 0.0
    with pytest.raises(ValueError):
        span_report([[]], [[]], "partial")


# --- token labels (Rasa) --------------------------------------------------------------------------
def test_token_labels_take_the_most_overlapping_entity_with_role_and_group():
    tokens = [(0, 4), (5, 9), (10, 18), (19, 23)]  # "from Rome Berlin-x city"
    entities = [
        {"entity": "city", "start": 5, "end": 9, "role": "from"},
        {"entity": "city", "start": 10, "end": 13, "group": "1"},  # covers part of token 2
        {"entity": "misc", "start": 13, "end": 20},  # more of token 2, and 1 char of token 3
    ]
    assert token_labels(tokens, entities) == [NO_ENTITY_LABEL, "city.from", "misc", "misc"]
    assert token_labels(tokens, []) == [NO_ENTITY_LABEL] * 4


def test_entity_evaluation_token_exact_and_overlap():
    text = "fly from new york to paris tomorrow"
    gold = Message(text, intent="fly", entities=[
        ent("city", 9, 17, text), ent("city", 21, 26, text), ent("date", 27, 35, text)])
    predicted = [
        ent("city", 13, 17, text, "DIETClassifier", confidence_entity=0.7),  # "york": overlap only
        ent("city", 21, 26, text, "DIETClassifier", confidence_entity=0.9),  # exact
        ent("time", 27, 35, text, "DIETClassifier", confidence_entity=0.4),  # wrong type
        ent("date", 27, 35, text, "Other"),  # another extractor: not counted here
    ]
    result = parse_result(text, "fly", entities=predicted)
    evaluation = evaluate_entities([gold], [result], "DIETClassifier")
    report = evaluation.report
    exact, overlap = report[SPAN_EXACT]["micro avg"], report[SPAN_OVERLAP]["micro avg"]
    assert (exact["correct"], exact["support"], exact["predicted"]) == (1, 3, 3)
    assert (overlap["correct"], overlap["support"], overlap["predicted"]) == (2, 3, 3)
    # tokens: fly from new york to paris tomorrow
    #   gold: O   O    city city O city  date
    #   pred: O   O    O    city O city  time
    # Rasa leaves no_entity out of confused_with
    assert report["city"] == {"precision": 1.0, "recall": 2 / 3, "f1-score": 0.8, "support": 3,
                              "confused_with": {}}
    assert report["date"]["recall"] == 0.0 and report["date"]["confused_with"] == {"time": 1}
    assert "time" not in report  # no gold token is a time: not a label of the report
    # micro avg over the gold labels (city, date): the predicted "time" token is not counted
    assert report["micro avg"]["precision"] == 1.0
    assert report["micro avg"]["recall"] == pytest.approx(2 / 4)
    assert report["accuracy"] == pytest.approx(5 / 7)  # all tokens, as Rasa completes the report
    assert evaluation.correct_confidences == [0.9]
    assert evaluation.wrong_confidences == [0.7, 0.4]
    assert len(evaluation.errors) == 1 and not evaluation.successes
    assert [e["extractor"] for e in evaluation.errors[0]["predicted_entities"]] == ["DIETClassifier"] * 3


def test_role_mismatch_is_an_entity_error_but_a_correct_span():
    text = "from rome"
    gold = Message(text, intent="x", entities=[ent("city", 5, 9, text, role="origin")])
    result = parse_result(text, "x", entities=[ent("city", 5, 9, text, "E", role="destination")])
    evaluation = evaluate_entities([gold], [result], "E")
    assert evaluation.report[SPAN_EXACT]["micro avg"]["f1-score"] == 1.0
    assert len(evaluation.errors) == 1
    assert evaluation.report["city.origin"]["confused_with"] == {"city.destination": 1}


def test_tokens_fall_back_to_whitespace_without_text_tokens():
    text = "in  paris"
    gold = Message(text, entities=[ent("city", 4, 9, text)])
    result = {"text": text, "intent": {"name": None, "confidence": 0.0},
              "entities": [ent("city", 4, 9, text, "E")]}
    evaluation = evaluate_entities([gold], [result], "E")
    assert evaluation.report["city"]["support"] == 1 and evaluation.report["city"]["f1-score"] == 1.0


# --- whole evaluation -----------------------------------------------------------------------------
def test_evaluate_groups_by_extractor_and_skips_pretrained_ones(booking_case):
    golds, results = booking_case
    evaluation = evaluate(golds, results)
    assert list(evaluation.entities) == ["DIETClassifier"]
    summary = evaluation.summary()
    assert summary["intent"]["accuracy"] == 0.75
    assert summary["intent"]["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    diet = summary["entities"]["DIETClassifier"]
    assert diet["exact_f1"] == 0.5 and diet["overlap_f1"] == 1.0
    assert diet["num_gold"] == 2 and diet["num_predicted"] == 2 and diet["num_errors"] == 1
    # an extractor named by the pipeline that found nothing is still reported
    crf = evaluate(golds, results, ["DIETClassifier", "CRF"]).summary()["entities"]["CRF"]
    assert crf["exact_recall"] == 0.0 and crf["num_predicted"] == 0
    with pytest.raises(ValueError):
        evaluate(golds, results[:2])


# --- fallback, as rasa test nlu -----------------------------------------------------------------------
def fallback_result(text, top, confidence, threshold=0.7, second=("other", 0.05)):
    """A FallbackClassifier's output: nlu_fallback on top, the classifier's ranking after it."""
    ranking = [{"name": top, "confidence": confidence}, {"name": second[0], "confidence": second[1]}]
    result = parse_result(text, top, confidence)
    if confidence < threshold:
        result["intent"] = {"name": "nlu_fallback", "confidence": threshold}
        ranking = [dict(result["intent"]), *ranking]
    result["intent_ranking"] = ranking
    return result


def test_fallback_is_undone_before_scoring_and_counted():
    golds = [Message("a", intent="greet"), Message("b", intent="greet"), Message("c", intent="bye"),
             Message("d", intent="bye")]
    results = [fallback_result("a", "greet", 0.9), fallback_result("b", "greet", 0.5),
               fallback_result("c", "greet", 0.4), fallback_result("d", "bye", 0.65)]
    evaluation = evaluate_intents(golds, results)
    # scored as if there were no FallbackClassifier: b and d are right, c is wrong
    assert evaluation.report["accuracy"] == 0.75
    assert evaluation.errors == [{"text": "c", "intent": "bye",
                                  "intent_prediction": {"name": "greet", "confidence": 0.4}}]
    assert evaluation.num_fallbacks == 3 and evaluation.correct_confidences == [0.9, 0.5, 0.65]
    summary = evaluation.fallback_summary()
    assert summary["fallback_rate"] == 0.75 and summary["accuracy_with_fallback"] == 0.25
    assert summary["below_threshold"]["0.5"] == 0.25 and summary["below_threshold"]["0.7"] == 0.75
    assert summary["below_threshold"]["0.1"] == 0.0 and list(summary["below_threshold"])[-1] == "0.9"


def test_undo_fallback_is_rasas():
    lone = {"intent": {"name": "nlu_fallback", "confidence": 0.3},
            "intent_ranking": [{"name": "nlu_fallback", "confidence": 0.3}]}
    assert undo_fallback(lone) == (lone, True)  # nothing to undo to: kept, as in Rasa
    kept = parse_result("x", "greet", 0.2)
    assert undo_fallback(kept) == (kept, False)
    undone, fell_back = undo_fallback(fallback_result("x", "greet", 0.2))
    assert fell_back and undone["intent"] == {"name": "greet", "confidence": 0.2}
    assert [r["name"] for r in undone["intent_ranking"]] == ["greet", "other"]


def test_an_intent_report_with_accuracy_has_rasas_micro_avg():
    golds = [Message("a", intent="x"), Message("b", intent="y")]
    report = evaluate_intents(golds, [parse_result("a", "x"), parse_result("b", "x")]).report
    assert report["micro avg"] == {"precision": 0.5, "recall": 0.5, "f1-score": 0.5, "support": 2}
    assert list(report)[-4:] == ["accuracy", "micro avg", "macro avg", "weighted avg"]
