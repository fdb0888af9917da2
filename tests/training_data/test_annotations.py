import pytest

from nlu_engine.contract.errors import DataError
from nlu_engine.training_data.annotations import (
    parse_annotated,
    synonyms_from_entities,
    to_annotated,
)


def test_plain_text_has_no_entities():
    assert parse_annotated("hello there") == ("hello there", [])


def test_short_form_offsets_and_value():
    text, entities = parse_annotated("fly from [Berlin](city) to [San Francisco](city) now")
    assert text == "fly from Berlin to San Francisco now"
    assert entities == [
        {"entity": "city", "start": 9, "end": 15, "value": "Berlin"},
        {"entity": "city", "start": 19, "end": 32, "value": "San Francisco"},
    ]
    for entity in entities:
        assert text[entity["start"] : entity["end"]] == entity["value"]


def test_synonym_shorthand():
    text, entities = parse_annotated("I live in [NYC](city:New York)")
    assert text == "I live in NYC"
    assert entities == [{"entity": "city", "start": 10, "end": 13, "value": "New York"}]
    assert synonyms_from_entities(text, entities) == {"NYC": "New York"}


def test_json_form_with_role_group_value():
    example = (
        'a [large]{"entity": "size", "group": "1"} [pepperoni]{"entity": "topping", '
        '"group": "1", "role": "extra", "value": "pep"} pizza'
    )
    text, entities = parse_annotated(example)
    assert text == "a large pepperoni pizza"
    assert entities == [
        {"entity": "size", "start": 2, "end": 7, "value": "large", "group": "1"},
        {
            "entity": "topping",
            "start": 8,
            "end": 17,
            "value": "pep",
            "role": "extra",
            "group": "1",
        },
    ]


def test_numeric_group_becomes_string():
    _, entities = parse_annotated('[a]{"entity": "x", "group": 2}')
    assert entities[0]["group"] == "2"


def test_list_form_puts_several_entities_on_one_span():
    text, entities = parse_annotated('go to [Paris][{"entity": "city"}, {"entity": "loc"}] ok')
    assert text == "go to Paris ok"
    assert [(e["entity"], e["start"], e["end"]) for e in entities] == [
        ("city", 6, 11),
        ("loc", 6, 11),
    ]


def test_brackets_without_annotation_are_kept():
    assert parse_annotated("see [this] (maybe)") == ("see [this] (maybe)", [])


def test_non_ascii_offsets():
    text, entities = parse_annotated("Café in [München](city) 😀 [Zürich](city)")
    assert text == "Café in München 😀 Zürich"
    assert [text[e["start"] : e["end"]] for e in entities] == ["München", "Zürich"]


def test_bad_json_names_the_example_and_source():
    with pytest.raises(DataError) as error:
        parse_annotated('book [Paris]{"entity": city} now', "data/nlu.yml:7")
    message = str(error.value)
    assert "data/nlu.yml:7" in message
    assert "book [Paris]" in message
    assert "\n" not in message


def test_json_without_entity_key_is_an_error():
    with pytest.raises(DataError, match="entity"):
        parse_annotated('[Paris]{"role": "to"}')


def test_json_with_unknown_key_is_an_error():
    with pytest.raises(DataError, match="unknown keys"):
        parse_annotated('[Paris]{"entity": "city", "rol": "to"}')


@pytest.mark.parametrize(
    "example",
    [
        "no entities at all",
        "fly from [Berlin](city) to [SF](city)",
        '[NYC]{"entity": "city", "value": "New York"} is big',
        '[Berlin]{"entity": "city", "role": "departure"}',
        'a [large]{"entity": "size", "group": "1"} pizza',
        'x [Paris][{"entity": "city"}, {"entity": "loc"}] y',
        '[5]{"entity": "number", "value": 5}',
    ],
)
def test_round_trip(example):
    text, entities = parse_annotated(example)
    assert parse_annotated(to_annotated(text, entities)) == (text, entities)


def test_writer_uses_short_form_when_possible():
    text = "I live in NYC"
    assert to_annotated(text, [{"entity": "city", "start": 10, "end": 13, "value": "NYC"}]) == (
        "I live in [NYC](city)"
    )
    written = to_annotated(text, [{"entity": "city", "start": 10, "end": 13, "value": "New York"}])
    assert written == 'I live in [NYC]{"entity": "city", "value": "New York"}'


def test_writer_uses_json_form_for_awkward_type_names():
    written = to_annotated("at noon", [{"entity": "time:exact", "start": 3, "end": 7}])
    assert written == 'at [noon]{"entity": "time:exact"}'
    assert parse_annotated(written)[1][0]["entity"] == "time:exact"


def test_writer_sorts_entities_by_position():
    entities = [
        {"entity": "b", "start": 6, "end": 7, "value": "y"},
        {"entity": "a", "start": 0, "end": 1, "value": "x"},
    ]
    assert to_annotated("x and y", entities) == "[x](a) and [y](b)"


def test_writer_rejects_overlapping_entities():
    entities = [
        {"entity": "a", "start": 0, "end": 5, "value": "hello"},
        {"entity": "b", "start": 3, "end": 8, "value": "lo wo"},
    ]
    with pytest.raises(DataError, match="overlap"):
        to_annotated("hello world", entities)


def test_writer_rejects_entity_text_with_closing_bracket():
    with pytest.raises(DataError, match="JSON format"):
        to_annotated("a]b", [{"entity": "x", "start": 0, "end": 3, "value": "a]b"}])


# found by tests/training_data/test_reader_properties.py (hypothesis)
def test_a_brace_in_a_json_annotation_is_escaped_and_reads_back():
    entities = [{"entity": "city", "start": 0, "end": 5, "value": "Paris}", "role": "to}]"}]
    annotated = to_annotated("Paris now", entities)
    assert "\\u007d" in annotated
    text, read = parse_annotated(annotated)
    assert text == "Paris now"
    assert read == [{"entity": "city", "start": 0, "end": 5, "value": "Paris}", "role": "to}]"}]


@pytest.mark.parametrize("text, entities", [
    ("see [this](maybe)", []),  # plain brackets that read back as an entity
    ("a [ b [c] d", [{"entity": "x", "start": 6, "end": 9, "value": "[c]"}]),
    ("x [ y z", [{"entity": "e", "start": 6, "end": 7, "value": "z"}]),  # '[' before an entity
])
def test_text_that_would_read_back_otherwise_is_refused(text, entities):
    with pytest.raises(DataError, match=r"^intent 'i': .*use the JSON format$"):
        to_annotated(text, entities, "intent 'i'")
