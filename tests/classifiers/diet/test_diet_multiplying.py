"""DIET's multiplied examples (``entity_swaps``): exact offsets, touching entities, a type with
one value, lookup tables and synonyms as values, the cap, the seed, the user's data untouched."""

from __future__ import annotations

from pathlib import Path

from nlu_engine.classifiers.diet.multiplying import swapped_variants, value_pool
from nlu_engine.contract.message import Message


def example(text: str, *spans: tuple[str, str]) -> Message:
    entities, cursor = [], 0
    for value, kind in spans:
        start = text.index(value, cursor)
        cursor = start + len(value)
        entities.append({"start": start, "end": cursor, "value": value, "entity": kind})
    return Message(text, intent="book", entities=entities)


def check_offsets(message: Message) -> None:
    for e in message.entities:
        assert 0 <= e["start"] < e["end"] <= len(message.text)
        assert message.text[e["start"] : e["end"]] == e["value"]


def test_values_are_swapped_within_their_type_with_exact_offsets() -> None:
    examples = [example("fly from Rome to Paris today",
                        ("Rome", "city"), ("Paris", "city"), ("today", "date")),
                example("to Berlin", ("Berlin", "city")),
                example("on Monday", ("Monday", "date"))]
    variants = swapped_variants(examples, {}, 3, 100, 42)
    assert variants
    cities, dates = {"Rome", "Paris", "Berlin"}, {"today", "Monday"}
    for variant in variants:
        check_offsets(variant)
        for e in variant.entities:
            assert e["value"] in (cities if e["entity"] == "city" else dates)
        assert variant.intent == "book" and variant.tokens == {} and variant.features == []


def test_touching_entities_keep_touching() -> None:
    examples = [example("10am", ("10", "number"), ("am", "period")),
                example("7pm", ("7", "number"), ("pm", "period"))]
    variants = swapped_variants(examples, {}, 4, 100, 1)
    assert variants
    for variant in variants:
        check_offsets(variant)
        first, second = variant.entities
        assert first["end"] == second["start"] and " " not in variant.text


def test_a_type_with_a_single_value_is_left_as_it_is() -> None:
    examples = [example("to Rome with KLM", ("Rome", "city"), ("KLM", "airline")),
                example("to Oslo", ("Oslo", "city"))]
    variants = swapped_variants(examples, {}, 5, 100, 3)
    with_airline = [v for v in variants if " with " in v.text]
    assert with_airline and all(v.text == "to Oslo with KLM" for v in with_airline)
    lonely = [example("with KLM", ("KLM", "airline"))]
    assert swapped_variants(lonely, {}, 5, 100, 3) == []  # nothing to swap: no variant


def test_listed_values_join_only_their_annotated_type() -> None:
    examples = [example("to Rome", ("Rome", "city"))]
    pool = value_pool(examples, {"city": ["Lyon", "lyon", "ROME", ""], "planet": ["Mars"]})
    assert pool == {"city": ["Rome", "Lyon"]}
    variants = swapped_variants(examples, {"city": ["Lyon"]}, 2, 100, 0)
    assert [v.text for v in variants] == ["to Lyon", "to Lyon"]


def test_cap_seed_and_the_user_data_untouched() -> None:
    examples = [example(f"to Rome number {i}", ("Rome", "city")) for i in range(50)]
    snapshot = [(m.text, [dict(e) for e in m.entities]) for m in examples]
    listed = {"city": [f"town {i}" for i in range(100_000)]}
    variants = swapped_variants(examples, listed, 20, 120, 7)
    assert len(variants) == 120
    # round by round: every example has its first variants before any has a third
    counts = [sum(v.text.endswith(f"number {i}") for v in variants) for i in range(50)]
    assert min(counts) >= 2 and max(counts) <= 3
    assert [v.text for v in swapped_variants(examples, listed, 20, 120, 7)] == [v.text for v in variants]
    assert [v.text for v in swapped_variants(examples, listed, 20, 120, 8)] != [v.text for v in variants]
    assert [(m.text, m.entities) for m in examples] == snapshot


def test_overlapping_or_malformed_annotations_are_not_multiplied() -> None:
    overlapping = Message("new york city", intent="x", entities=[
        {"start": 0, "end": 8, "value": "new york", "entity": "city"},
        {"start": 4, "end": 13, "value": "york city", "entity": "city"}])
    malformed = Message("to rome", intent="x",
                        entities=[{"start": 3, "end": 99, "value": "?", "entity": "city"}])
    other = example("to Oslo", ("Oslo", "city"))
    variants = swapped_variants([overlapping, malformed, other], {"city": ["Lyon"]}, 3, 100, 5)
    # only the well-formed example is multiplied (the overlapping one's values join the pool)
    assert len(variants) == 3
    assert {v.text for v in variants} <= {"to Lyon", "to new york", "to york city"}


def test_explicit_epochs_shrink_to_keep_the_steps() -> None:
    from types import SimpleNamespace

    from nlu_engine.classifiers.diet.multiplying import MultipliedExamples
    from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer

    diet = MultipliedExamples()
    diet.config = SimpleNamespace(entity_swaps=1, entity_recognition=True, random_seed=0)
    diet._annotators = (WhitespaceTokenizer(),)
    diet._listed_values = {"city": ["Lyon"]}
    examples = [example("to Rome", ("Rome", "city")), Message("hi", intent="greet")]
    every, epochs = diet._multiplied(examples, None, 30)
    assert [m.text for m in every] == ["to Rome", "hi", "to Lyon"] and epochs == 20
    assert every[2].tokens["text"][1].text == "Lyon"
    assert diet._multiplied(examples, None, None)[1] is None
    assert diet._multiplied(examples, object(), 30) == (examples, 30)  # resuming: none


def test_a_pipeline_trains_on_the_variants(caplog, tmp_path: Path) -> None:
    """In a pipeline: the variants are tokenized and featurized by the components before DIET,
    an entity type with a single example trains, two touching entities parse with exact
    offsets, and the user's examples are left as they were."""
    import logging

    from nlu_engine.assembly.model import Model, train
    from nlu_engine.contract.training_data import TrainingData

    examples = [example("fly to Rome", ("Rome", "city")), example("fly to Oslo", ("Oslo", "city")),
                example("to Lyon at 10am", ("Lyon", "city"), ("10", "hour"), ("am", "period")),
                example("to Bonn at 7pm", ("Bonn", "city"), ("7", "hour"), ("pm", "period")),
                example("with KLM", ("KLM", "airline")),
                Message("hello there", intent="greet"), Message("hi", intent="greet")]
    data = TrainingData(messages=examples, lookup_tables=[{"name": "city", "elements": ["Paris", "Nice"]}])
    snapshot = [(m.text, [dict(e) for e in m.entities]) for m in examples]
    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "CountVectorsFeaturizer", "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 3},
        {"name": "GazetteerFeaturizer", "entity_values": True},
        {"name": "DIETClassifier", "epochs": 3, "transformer_size": 16, "number_of_transformer_layers": 1,
         "entity_swaps": 3, "show_progress": False}]}
    with caplog.at_level(logging.INFO, logger="nlu_engine.classifiers.diet.multiplying"):
        archive = train(config, data, out=tmp_path, log=None)
    assert any("examples with other values swapped in" in r.getMessage() for r in caplog.records)
    assert [(m.text, m.entities) for m in examples] == snapshot
    parsed = Model.load(archive).parse("to Nice at 10am")
    for entity in parsed["entities"]:
        assert 0 <= entity["start"] < entity["end"] <= len(parsed["text"])
        assert parsed["text"][entity["start"] : entity["end"]] == entity["value"]


def test_with_swaps_a_changed_lookup_table_trains_diet_again() -> None:
    from nlu_engine.classifiers.diet.component import DIETClassifier
    from nlu_engine.contract.training_data import TrainingData

    examples = [example("to Rome", ("Rome", "city"))]
    before = TrainingData(messages=examples, lookup_tables=[{"name": "city", "elements": ["Lyon"]}])
    after = TrainingData(messages=examples, lookup_tables=[{"name": "city", "elements": ["Nice"]}])
    swapping, plain = DIETClassifier(entity_swaps=2), DIETClassifier(entity_swaps=0)
    assert swapping.data_fingerprint(before) != swapping.data_fingerprint(after)
    assert DIETClassifier().data_fingerprint(before) != DIETClassifier().data_fingerprint(after)  # auto
    assert plain.data_fingerprint(before) == plain.data_fingerprint(after)
    answers = TrainingData(messages=examples, lookup_tables=before.lookup_tables,
                           responses={"utter_faq/hours": [{"text": "9 to 5"}]})
    assert swapping.data_fingerprint(before) == swapping.data_fingerprint(answers)


def test_auto_swaps_only_the_types_a_lookup_table_or_synonym_lists() -> None:
    from types import SimpleNamespace

    from nlu_engine.classifiers.diet.multiplying import AUTO_SWAPS, MultipliedExamples

    examples = [example("to Rome on Monday", ("Rome", "city"), ("Monday", "date")),
                example("to Oslo on Friday", ("Oslo", "city"), ("Friday", "date"))]
    variants = swapped_variants(examples, {"city": ["Lyon"], "date": []}, 3, 100, 0, only_listed=True)
    assert variants and all(v.text.endswith(("on Monday", "on Friday")) for v in variants)
    assert {v.text.split(" on ")[1] for v in variants} == {"Monday", "Friday"}  # kept where it was
    assert [v.text.split(" on ")[1] for v in variants] == [e.text.split(" on ")[1] for e in examples] * 3
    diet = MultipliedExamples()
    diet.config = SimpleNamespace(entity_swaps="auto")
    diet._listed_values = {"city": [], "date": []}
    assert diet._swaps() == (0, True)  # nothing listed: no variant
    diet._listed_values = {"city": ["Lyon"], "date": []}
    assert diet._swaps() == (AUTO_SWAPS, True)
