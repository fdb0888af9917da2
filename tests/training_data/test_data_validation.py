import json
import re

from nlu_engine.contract.message import Message, Token
from nlu_engine.training_data import TrainingData
from nlu_engine.training_data.annotations import parse_annotated
from nlu_engine.training_data.domain import Domain
from nlu_engine.training_data.validation import domain_warnings, validate


def words(text: str) -> list[Token]:
    return [Token(m.group(), m.start(), m.end()) for m in re.finditer(r"\w+", text)]


def example(annotated: str, intent: str | None) -> Message:
    text, entities = parse_annotated(annotated)
    return Message(text=text, intent=intent, entities=entities)


def clean_data() -> TrainingData:
    return TrainingData(
        messages=[
            example("hi", "greet"),
            example("hello", "greet"),
            example("fly to [Berlin]{\"entity\": \"city\", \"role\": \"to\"}", "travel"),
            example("fly from [Paris](city) on [monday](date)", "travel"),
            example("what's your name", "faq/ask_name"),
            example("who are you", "faq/ask_name"),
        ],
        synonyms={"NYC": "New York"},
        regex_features=[{"name": "zip", "pattern": "[0-9]{5}"}],
    )


def test_counts():
    report = validate(clean_data(), words)
    counts = report.counts
    assert counts.examples == 6
    assert counts.intents == 3
    assert counts.entity_types == 2
    assert counts.entity_annotations == 3
    assert counts.per_intent == {"faq/ask_name": 2, "greet": 2, "travel": 2}
    assert counts.per_entity == {"city": 2, "date": 1}
    assert counts.per_role == {"to": 1}
    assert counts.synonyms == 1
    assert counts.regex_features == 1
    assert report.warnings == []
    assert report.ok


def test_same_text_under_two_intents():
    data = clean_data()
    data.messages.append(example("hi", "bye"))
    data.messages.append(example("see you", "bye"))
    warnings = validate(data).warnings
    assert warnings == ["example 'hi' appears under intents 'bye' and 'greet'; keep it under one intent"]


def test_duplicate_within_an_intent():
    data = clean_data()
    data.messages.append(example("hi", "greet"))
    assert validate(data).warnings == [
        "example 'hi' appears 2 times under intent 'greet'; remove the duplicates"
    ]


def test_intent_with_one_example():
    data = clean_data()
    data.messages.append(example("bye", "goodbye"))
    warnings = validate(data).warnings
    assert len(warnings) == 1
    assert warnings[0].startswith("intent 'goodbye' has only 1 example")


def test_empty_text_and_missing_intent():
    data = clean_data()
    data.messages.append(Message(text="  ", intent="greet"))
    data.messages.append(Message(text="orphan"))
    warnings = validate(data).warnings
    assert "an example of intent 'greet' has empty text; remove it" in warnings
    assert "example 'orphan' has no intent; give it one or remove it" in warnings


def test_misaligned_annotations_name_the_example():
    data = clean_data()
    data.messages.append(
        Message(
            text="I live in Berlin-Mitte",
            intent="travel",
            entities=[{"entity": "city", "start": 10, "end": 13, "value": "Ber"}],
        )
    )
    assert validate(data).warnings == []  # without a tokenizer the boundary check is off
    warnings = validate(data, words).warnings
    assert len(warnings) == 1
    assert "'Ber'" in warnings[0]
    assert "'I live in Berlin-Mitte'" in warnings[0]
    assert "token boundaries" in warnings[0]


def test_an_end_past_dropped_punctuation_is_aligned_a_cut_word_is_not():
    data = clean_data()
    data.messages.append(  # "." is no token: the entity covers the token "Berlin"
        Message("go to Berlin.", "travel", [{"entity": "city", "start": 6, "end": 13, "value": "Berlin."}])
    )
    assert validate(data, words).warnings == []
    data.messages.append(
        Message("go to Berlin", "travel", [{"entity": "city", "start": 6, "end": 11, "value": "Berli"}])
    )
    assert len(validate(data, words).warnings) == 1


def test_whitespace_at_entity_edges():
    data = clean_data()
    data.messages.append(example("go to [ Rome](city)", "travel"))
    warnings = validate(data, words).warnings
    assert len(warnings) == 1  # not also reported as misaligned
    assert "whitespace" in warnings[0]


def test_format_and_as_dict():
    data = clean_data()
    data.messages.append(example("bye", "goodbye"))
    report = validate(data, words)
    text = report.format()
    assert text.splitlines()[0].startswith("7 examples, 4 intents, 2 entity types")
    assert "  travel" in text
    assert "1 warnings:" in text
    assert "intent 'goodbye' has only 1 example" in text
    assert json.loads(json.dumps(report.as_dict()))["counts"]["per_entity"]["city"] == 2
    assert validate(clean_data()).format().endswith("no warnings")


def domain(**parts) -> Domain:
    return Domain(sources=["domain.yml"], **parts)


def project_data() -> TrainingData:
    """clean_data() with its retrieval intent stored as the readers store it."""
    data = clean_data()
    for message in data.messages:
        if message.intent == "faq/ask_name":
            message.intent, message.intent_response_key = "faq", "faq/ask_name"
    return data


def test_domain_warnings_are_rasas_for_intents():
    data = project_data()  # intents greet, travel, faq (faq/ask_name)
    listed = domain(intents=["greet", "faq", "unused_intent", "restart"],
                    entities={"city": {"roles": ["to"], "groups": []}, "date": {"roles": [], "groups": []}})
    stories = {"greet": ["data/stories.yml"], "mood_great": ["data/stories.yml"]}
    warnings = domain_warnings(data, listed, stories)
    assert warnings == [
        "intent 'unused_intent' is listed in domain.yml but has no NLU examples; add examples or "
        "remove it from the domain",
        "intent 'travel' has NLU examples but is not listed in domain.yml; add it under 'intents:'",
        "intent 'mood_great' is used in data/stories.yml but is not listed in domain.yml; add it "
        "under 'intents:'",
        "intent 'faq' is not used in any story or rule",
        "intent 'unused_intent' is not used in any story or rule",
    ]


def test_domain_warnings_without_stories_leave_out_unused_intents():
    listed = domain(intents=["greet", "travel", "faq"],
                    entities={"city": {"roles": [], "groups": []}, "date": {"roles": [], "groups": []}})
    assert domain_warnings(project_data(), listed, {}) == []


def test_domain_warnings_for_entities_roles_and_groups():
    data = project_data()
    data.messages.append(example('a [large]{"entity": "size", "group": "2"} one', "travel"))
    listed = domain(intents=["greet", "travel", "faq"],
                    entities={"city": {"roles": ["from"], "groups": []},
                              "size": {"roles": [], "groups": ["1"]}})
    assert domain_warnings(data, listed) == [
        "role 'to' of entity 'city' is annotated in the NLU data but not listed in its roles in domain.yml",
        "entity 'date' is annotated in the NLU data but not listed in domain.yml; add it under 'entities:'",
        "group '2' of entity 'size' is annotated in the NLU data but not listed in its groups in domain.yml",
    ]


def test_a_retrieval_intent_without_a_response_is_reported():
    warnings = validate(project_data(), words).warnings
    assert ("retrieval intent 'faq/ask_name' has no response 'utter_faq/ask_name'; add it under "
            "'responses:' in the domain (--domain) or in the data") in warnings
    data = project_data()
    data.responses = {"utter_faq/ask_name": [{"text": "a bot"}]}
    assert not any("retrieval intent" in w for w in validate(data, words).warnings)
