import re

import pytest

from nlu_engine.contract.message import Token
from nlu_engine.training_data.bilou import (
    bilou_constraints,
    bilou_prefix,
    conlleval_spans,
    ensure_consistent_bilou,
    entity_tags,
    f1_score,
    misaligned_entities,
    spans_to_entities,
    stored_trailing_punctuation,
    tag_without_prefix,
    tags_to_spans,
    token_span,
    trailing_punctuation,
)


def tokenize(text: str) -> list[Token]:
    """Words and single punctuation marks."""
    return [Token(m.group(), m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", text)]


def words(text: str) -> list[Token]:
    """Words only: punctuation is dropped, as Rasa's WhitespaceTokenizer does."""
    return [Token(m.group(), m.start(), m.end()) for m in re.finditer(r"\w+", text)]


def entity(kind, text, surface, **extra):
    start = text.index(surface)
    return {"entity": kind, "start": start, "end": start + len(surface), "value": surface, **extra}


TEXT = "fly from New York City to Berlin tomorrow"
ENTITIES = [
    entity("city", TEXT, "New York City", role="from"),
    entity("city", TEXT, "Berlin", role="to", group="1"),
]


def test_prefix_helpers():
    assert bilou_prefix("B-city") == "B-"
    assert bilou_prefix("O") is None
    assert bilou_prefix("city") is None
    assert tag_without_prefix("U-city") == "city"
    assert tag_without_prefix("city") == "city"


def test_bilou_entity_tags():
    tokens = tokenize(TEXT)
    assert entity_tags(tokens, ENTITIES) == [
        "O", "O", "B-city", "I-city", "L-city", "O", "U-city", "O",
    ]


def test_plain_entity_tags():
    tokens = tokenize(TEXT)
    assert entity_tags(tokens, ENTITIES, bilou=False) == [
        "O", "O", "city", "city", "city", "O", "city", "O",
    ]


def test_role_and_group_tags():
    tokens = tokenize(TEXT)
    assert entity_tags(tokens, ENTITIES, tag="role") == [
        "O", "O", "B-from", "I-from", "L-from", "O", "U-to", "O",
    ]
    assert entity_tags(tokens, ENTITIES, tag="group", bilou=False) == [
        "O", "O", "O", "O", "O", "O", "1", "O",
    ]


def test_misaligned_entities_get_no_bilou_tags_but_plain_tags_by_overlap():
    text = "I live in Berlin-Mitte"
    tokens = tokenize(text)  # I live in Berlin - Mitte
    bad = {"entity": "city", "start": 10, "end": 13, "value": "Ber"}
    good = entity("district", text, "Mitte")
    assert misaligned_entities(tokens, [bad, good]) == [bad]
    assert entity_tags(tokens, [bad, good]) == ["O", "O", "O", "O", "O", "U-district"]
    assert entity_tags(tokens, [bad, good], bilou=False) == [
        "O", "O", "O", "city", "O", "district",
    ]


def test_punctuation_the_tokenizer_dropped_does_not_misalign():
    tokens = words("in Berlin.")
    with_dot = {"entity": "c", "start": 3, "end": 10}
    assert misaligned_entities(tokens, [with_dot]) == []
    assert misaligned_entities(tokens, [{"entity": "c", "start": 3, "end": 9}]) == []
    assert misaligned_entities(tokens, [{"entity": "c", "start": 4, "end": 10}]) != []  # cuts "Berlin"
    assert misaligned_entities(tokens, [{"entity": "c", "start": 9, "end": 10}]) != []  # covers no token
    assert entity_tags(tokens, [with_dot]) == ["O", "U-c"]
    text = "convert u. s. d. to yen"
    usd = entity("currency", text, "u. s. d.")
    assert token_span(words(text), usd["start"], usd["end"]) == (1, 3)
    assert entity_tags(words(text), [usd]) == ["O", "B-currency", "I-currency", "L-currency", "O", "O"]


def test_trailing_punctuation_is_learned_per_type_and_given_back():
    def example(text, *annotated):
        return text, words(text), [entity(kind, text, surface) for kind, surface in annotated]

    examples = [
        example("convert u. s. d. to yen", ("currency", "u. s. d.")),
        example("how many g. b. p. for a dollar", ("currency", "g. b. p.")),
        example("u. s. d. or yen.", ("currency", "u. s. d."), ("currency", "yen")),
        example("fly to Paris.", ("city", "Paris")),
        example("fly to Rome. now", ("city", "Rome")),
        example("fly to Oslo now", ("city", "Oslo")),  # nothing dropped after "Oslo": no vote
        example("play keep their heads ringin'", ("song", "keep their heads ringin'")),  # one is no rule
    ]
    keys = trailing_punctuation(examples)
    assert keys == {"currency\tinitial": "."}  # "yen." and the cities exclude the dot

    text = "is u. s. d. up in Paris."
    tokens = words(text)  # is u s d up in Paris
    tags = ["O", "B-currency", "I-currency", "L-currency", "O", "O", "U-city"]
    found = spans_to_entities(text, tokens, tags, trailing=keys)
    assert [(e["entity"], e["value"], e["end"]) for e in found] == [
        ("currency", "u. s. d.", 11), ("city", "Paris", 23),
    ]
    without = spans_to_entities(text, tokens, tags)
    assert [e["value"] for e in without] == ["u. s. d", "Paris"]
    text = "u. s. d., or yen"  # only the characters the annotations included: not the comma
    found = spans_to_entities(text, words(text), ["B-currency", "I-currency", "L-currency", "O", "O"],
                              trailing=keys)
    assert [e["value"] for e in found] == ["u. s. d."]


def test_stored_trailing_punctuation_is_checked():
    assert stored_trailing_punctuation(None, "diet.json") == {}
    assert stored_trailing_punctuation({"currency\tinitial": "."}, "diet.json") == {"currency\tinitial": "."}
    with pytest.raises(ValueError, match=r"diet\.json: 'trailing_punctuation' must map"):
        stored_trailing_punctuation(["currency\tinitial"], "diet.json")


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (["B-a", "I-a", "L-a"], ["B-a", "I-a", "L-a"]),
        (["B-a", "I-a", "O"], ["B-a", "L-a", "O"]),  # B without L ends at the last I
        (["B-a", "I-a"], ["B-a", "L-a"]),  # ... also at the end of the sentence
        (["B-a", "O"], ["U-a", "O"]),
        (["O", "I-a", "O"], ["O", "U-a", "O"]),  # lone I starts an entity
        (["O", "I-a", "I-a", "O"], ["O", "B-a", "L-a", "O"]),
        (["L-a", "O"], ["U-a", "O"]),  # lone L
        (["U-a", "I-a", "L-a"], ["U-a", "B-a", "L-a"]),
        (["B-a", "B-a"], ["U-a", "U-a"]),
    ],
)
def test_ensure_consistent_bilou(tags, expected):
    assert ensure_consistent_bilou(tags)[0] == expected


def test_mixed_types_take_the_best_scored_type():
    tags, confidences = ensure_consistent_bilou(["B-a", "I-b", "L-b"], [0.6, 0.9, 0.9])
    assert tags == ["B-b", "I-b", "L-b"]
    # the changed token gets the winning score: harmonic mean of 0.9 and 0.67
    assert confidences == [pytest.approx(0.77), 0.9, 0.9]
    tags, _ = ensure_consistent_bilou(["B-a", "I-b", "L-a"], [0.9, 0.4, 0.9])
    assert tags == ["B-a", "I-a", "L-a"]


def test_tags_to_spans():
    assert tags_to_spans(["O", "B-city", "I-city", "L-city", "U-date", "U-date"]) == [
        ("city", 1, 3),
        ("date", 4, 4),
        ("date", 5, 5),
    ]
    assert tags_to_spans(["B-a", "I-a", "O", "I-b"]) == [("a", 0, 1), ("b", 3, 3)]
    assert tags_to_spans(["a", "a", "O", "b", "a"], bilou=False) == [
        ("a", 0, 1),
        ("b", 3, 3),
        ("a", 4, 4),
    ]


def test_tags_to_spans_reads_only_its_scheme():
    # with BILOU, tags without a BILOU prefix are outside; without, every tag but O is a type
    assert tags_to_spans(["U-a", "a", "no_entity", "E-a"]) == [("a", 0, 0)]
    assert tags_to_spans(["no_entity", "no_entity", "B-a"], bilou=False) == [
        ("no_entity", 0, 1),
        ("B-a", 2, 2),
    ]
    # a run of mixed types is repaired into one entity (Rasa) where conlleval splits it
    assert tags_to_spans(["B-a", "I-b", "L-b"]) == [("b", 0, 2)]
    assert conlleval_spans(["B-a", "I-b", "L-b"]) == [("a", 0, 0), ("b", 1, 2)]


# conlleval chunks: BIO, BILOU, IOBES and IO tags
@pytest.mark.parametrize(
    ("tags", "chunks"),
    [
        # BIO
        (["B-a", "I-a", "O", "B-b"], [("a", 0, 1), ("b", 3, 3)]),
        (["B-a", "B-a"], [("a", 0, 0), ("a", 1, 1)]),
        (["O", "I-a", "I-a"], [("a", 1, 2)]),  # I- after O starts a chunk
        (["B-a", "I-b", "I-b"], [("a", 0, 0), ("b", 1, 2)]),  # a type change splits
        # BILOU
        (["U-a", "U-a"], [("a", 0, 0), ("a", 1, 1)]),
        (["B-a", "I-a", "L-a", "U-b", "O"], [("a", 0, 2), ("b", 3, 3)]),
        (["B-a", "L-a", "B-a", "L-a"], [("a", 0, 1), ("a", 2, 3)]),
        (["L-a", "O"], [("a", 0, 0)]),
        (["B-a", "O", "L-a"], [("a", 0, 0), ("a", 2, 2)]),
        (["I-a", "L-a", "I-a"], [("a", 0, 1), ("a", 2, 2)]),  # a chunk after L- starts anew
        # IO (plain type names) and Rasa's no_entity
        (["city", "city", "O", "date", "time", "time"], [("city", 0, 1), ("date", 3, 3), ("time", 4, 5)]),
        (["no_entity", "city", "no_entity"], [("city", 1, 1)]),
        ([], []),
        (["O", "O"], []),
    ],
)
def test_conlleval_chunks(tags, chunks):
    assert conlleval_spans(tags) == chunks


def test_bilou_constraints():
    allowed, start, end = bilou_constraints(["O", "B-a", "I-a", "L-a", "U-a", "B-b", "I-b", "L-b", "U-b"])
    assert allowed[0, 1] and allowed[0, 4] and not allowed[0, 2]  # O -> B/U, never I
    assert allowed[1, 2] and allowed[1, 3] and not allowed[1, 7]  # B-a -> I-a / L-a only
    assert list(start) == [True, True, False, False, True, True, False, False, True]
    assert list(end) == [True, False, False, True, True, False, False, True, True]


def test_f1_score_is_the_harmonic_mean_and_zero_without_counts():
    precision, recall = 3 / 4, 3 / 5
    assert f1_score(3, 5, 4) == pytest.approx(2 * precision * recall / (precision + recall))
    assert f1_score(0, 0, 0) == 0.0
    assert f1_score(0, 2, 0) == 0.0


def test_spans_to_entities_bilou_with_confidences():
    text = "fly from New York to Berlin"
    tokens = tokenize(text)
    tags = ["O", "O", "B-city", "L-city", "O", "U-city"]
    confidences = [0.9, 0.9, 0.8, 0.6, 0.9, 0.95]
    entities = spans_to_entities(text, tokens, tags, confidences, extractor="DIETClassifier")
    assert entities == [
        {
            "entity": "city",
            "start": 9,
            "end": 17,
            "confidence_entity": 0.6,
            "value": "New York",
            "extractor": "DIETClassifier",
        },
        {
            "entity": "city",
            "start": 21,
            "end": 27,
            "confidence_entity": 0.95,
            "value": "Berlin",
            "extractor": "DIETClassifier",
        },
    ]


def test_spans_to_entities_without_confidences_has_no_confidence_fields():
    text = "to Berlin"
    entities = spans_to_entities(text, tokenize(text), ["O", "U-city"])
    assert entities == [{"entity": "city", "start": 3, "end": 9, "value": "Berlin"}]


def test_bilou_units_stay_apart_even_when_adjacent():
    text = "Berlin Paris"
    entities = spans_to_entities(text, tokenize(text), ["U-city", "U-city"])
    assert [e["value"] for e in entities] == ["Berlin", "Paris"]


def test_plain_tags_merge_across_one_character():
    text = "New York-City"
    entities = spans_to_entities(text, tokenize(text), ["city"] * 4, bilou=False)
    assert [e["value"] for e in entities] == ["New York-City"]


def test_two_spaces_split_the_entity():
    text = "New  York"
    entities = spans_to_entities(text, tokenize(text), ["city", "city"], bilou=False)
    assert [e["value"] for e in entities] == ["New", "York"]


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (True, ["apples", "pears"]),
        (False, ["apples, pears"]),
        ({"fruit": False}, ["apples, pears"]),
        ({"fruit": True}, ["apples", "pears"]),
        ({"other": False}, ["apples", "pears"]),  # missing type: split (Rasa's default)
        ({"split_entities_by_comma": False}, ["apples, pears"]),
    ],
)
def test_split_entities_by_comma(setting, expected):
    text = "buy apples, pears"
    tokens = words(text)  # buy apples pears: ", " between the two fruits
    tags = ["O", "fruit", "fruit"]
    entities = spans_to_entities(text, tokens, tags, bilou=False, split_entities_by_comma=setting)
    assert [e["value"] for e in entities] == expected


def test_gap_longer_than_three_always_splits():
    text = "apples ,  ; pears"
    tokens = tokenize(text)
    entities = spans_to_entities(
        text, tokens, ["fruit"] * 4, bilou=False, split_entities_by_comma=False
    )
    # gaps of 1, 2 and 1 characters made of spaces: one entity
    assert [e["value"] for e in entities] == ["apples ,  ; pears"]
    text = "apples ,,,, pears"
    tokens = [Token("apples", 0, 6), Token("pears", 12, 17)]
    entities = spans_to_entities(
        text, tokens, ["fruit", "fruit"], bilou=False, split_entities_by_comma=False
    )
    assert [e["value"] for e in entities] == ["apples", "pears"]


def test_role_change_starts_a_new_entity_and_confidence_is_minimum():
    text = "Berlin Paris Rome"
    tokens = tokenize(text)
    tags = {
        "entity": ["city", "city", "city"],
        "role": ["from", "to", "to"],
        "group": ["O", "O", "O"],
    }
    confidences = {
        "entity": [0.9, 0.8, 0.7],
        "role": [0.5, 0.6, 0.4],
        "group": [1.0, 1.0, 1.0],
    }
    entities = spans_to_entities(text, tokens, tags, confidences, bilou=False)
    assert entities == [
        {
            "entity": "city",
            "start": 0,
            "end": 6,
            "confidence_entity": 0.9,
            "role": "from",
            "confidence_role": 0.5,
            "value": "Berlin",
        },
        {
            "entity": "city",
            "start": 7,
            "end": 17,
            "confidence_entity": 0.7,
            "role": "to",
            "confidence_role": 0.4,
            "value": "Paris Rome",
        },
    ]


def test_bilou_role_tags_are_stripped():
    text = "New York"
    tags = {"entity": ["B-city", "L-city"], "role": ["B-to", "L-to"]}
    entities = spans_to_entities(text, tokenize(text), tags)
    assert entities == [{"entity": "city", "start": 0, "end": 8, "role": "to", "value": "New York"}]


def test_repair_happens_inside_spans_to_entities():
    text = "in New York now"
    tags = ["O", "B-city", "I-city", "O"]
    entities = spans_to_entities(text, tokenize(text), tags, [1.0, 0.7, 0.8, 1.0])
    assert entities == [
        {"entity": "city", "start": 3, "end": 11, "confidence_entity": 0.7, "value": "New York"}
    ]


def test_round_trip_tags_to_entities():
    tokens = tokenize(TEXT)
    tags = {"entity": entity_tags(tokens, ENTITIES), "role": entity_tags(tokens, ENTITIES, "role"),
            "group": entity_tags(tokens, ENTITIES, "group")}
    rebuilt = spans_to_entities(TEXT, tokens, tags)
    assert rebuilt == ENTITIES


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 entity tags for 1 tokens"):
        spans_to_entities("a", [Token("a", 0, 1)], ["O", "O"])


def test_bilou_span_continues_across_punctuation_the_tokenizer_dropped():
    # Rasa cuts at the colon and loses the entity; the BILOU tags say it is one title.
    text = "see the uli derickson story: a film tonight"
    tags = ["O", "B-movie", "I-movie", "I-movie", "I-movie", "I-movie", "L-movie", "O"]
    entities = spans_to_entities(text, words(text), tags)
    assert [e["value"] for e in entities] == ["the uli derickson story: a film"]


@pytest.mark.parametrize(("split", "expected"), [(True, ["apples", "pears"]), (False, ["apples, pears"])])
def test_bilou_span_is_cut_at_a_comma_when_splitting_by_comma(split, expected):
    text = "buy apples, pears"
    tags = ["O", "B-fruit", "L-fruit"]
    entities = spans_to_entities(text, words(text), tags, split_entities_by_comma=split)
    assert [e["value"] for e in entities] == expected


def test_misaligned_notice_names_the_skipped_annotations_in_one_line() -> None:
    from nlu_engine.contract.message import Message
    from nlu_engine.training_data import bilou

    text = "fly to Berlin today"
    tokens = [Token("fly", 0, 3), Token("to", 4, 6), Token("Berlin", 7, 13), Token("today", 14, 19)]
    cut = Message(text=text, entities=[{"entity": "city", "start": 7, "end": 11, "value": "Berl"}])
    cut.tokens["text"] = tokens
    fine = Message(text=text, entities=[{"entity": "city", "start": 7, "end": 13, "value": "Berlin"}])
    fine.tokens["text"] = tokens
    assert bilou.misaligned_notice("X", [fine]) is None
    notice = bilou.misaligned_notice("X", [cut, fine])
    assert notice == ("X: 1 entity annotation(s) do not fall on token boundaries and are ignored: "
                      "'Berl' (city) in 'fly to Berlin today'")
