import json
import re

from nlu_engine.contract.message import Message, Token
from nlu_engine.training_data import TrainingData
from nlu_engine.training_data.annotations import parse_annotated
from nlu_engine.training_data.domain import Domain
from nlu_engine.training_data.validation import domain_warnings, training_warnings, validate


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
            example("fly from [NYC](city) on [monday](date)", "travel"),
            example("fly on [friday](date)", "travel"),
            example("what's your name", "faq/ask_name"),
            example("who are you", "faq/ask_name"),
        ],
        synonyms={"NYC": "New York"},
        regex_features=[{"name": "zip", "pattern": "[0-9]{5}"}],
    )


def test_counts():
    report = validate(clean_data(), words)
    counts = report.counts
    assert counts.examples == 7
    assert counts.intents == 3
    assert counts.entity_types == 2
    assert counts.entity_annotations == 4
    assert counts.per_intent == {"faq/ask_name": 2, "greet": 2, "travel": 3}
    assert counts.per_entity == {"city": 2, "date": 2}
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
    assert text.splitlines()[0].startswith("8 examples, 4 intents, 2 entity types")
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


# --- intents the classifier cannot tell apart (issue 40, bad input and edges) -----------------
def test_one_intent_only_is_one_warning_whatever_its_examples():
    data = TrainingData(messages=[example("hello there", "greet")])
    assert validate(data, words).warnings == [
        "only one intent, 'greet': every message will be classified as 'greet'; add a second "
        "intent (what the bot should not act on can go under 'out_of_scope')",
        "intent 'greet' has only 1 example; add at least 2 (better 10 or more)",
    ]
    varied = TrainingData(messages=[example(t, "greet") for t in ("hi", "hello", "hey there")])
    assert [w.split(":")[0] for w in validate(varied, words).warnings] == ["only one intent, 'greet'"]
    # the loader's dropped copies of the same example count as repeats, not as another cause
    repeated = validate(data, words, duplicates={("hello there", "greet"): 19}).warnings
    assert "example 'hello there' appears 20 times under intent 'greet'; remove the duplicates" in repeated
    assert sum("only one intent" in w for w in repeated) == 1


def test_intents_with_the_same_examples_are_one_warning_not_one_per_example():
    texts = ["hello", "hi", "hey", "good day"]
    data = TrainingData(messages=[example(t, i) for i in ("greet", "bye", "thank") for t in texts])
    assert validate(data, words).warnings == [
        "intents 'bye', 'greet' and 'thank' share all their examples ('good day', 'hello', 'hey', "
        "... (4 examples)): the classifier cannot tell them apart; give each examples of its own, "
        "or merge them into one intent",
    ]


def test_an_intent_whose_examples_all_belong_to_others():
    data = TrainingData(messages=[
        example("hello", "greet"), example("hi", "greet"),
        example("hello", "bye"), example("hi", "bye"),
        example("hello", "thank"), example("thanks", "thank"), example("cheers", "thank"),
        example("hello", "ack"), example("ok", "other"), example("fine", "other"),
    ])
    warnings = validate(data, words).warnings
    assert warnings[:2] == [
        "intents 'bye' and 'greet' share all their examples ('hello', 'hi'): the classifier cannot "
        "tell them apart; give each examples of its own, or merge them into one intent",
        "every example of intent 'ack' is also an example of 'bye', 'greet' and 'thank': the "
        "classifier cannot tell 'ack' apart; give 'ack' examples of its own, or remove them from "
        "the others",
    ]
    # 'hello' is also under 'thank', which has examples of its own: that example is still named
    assert ("example 'hello' appears under intents 'ack' and 'bye' and 'greet' and 'thank'; keep it "
            "under one intent") in warnings
    assert not any(w.startswith("example 'hi'") for w in warnings)  # bye and greet explain it


def test_distinct_intents_raise_no_separability_warning():
    assert validate(clean_data(), words).warnings == []
    assert training_warnings(clean_data()) == []


# --- what no example teaches ---------------------------------------------------------------------
def test_a_retrieval_response_without_examples_names_its_file():
    data = project_data()
    data.responses = {"utter_faq/ask_name": [{"text": "a bot"}], "utter_faq/ask_age": [{"text": "2"}],
                      "utter_greet": [{"text": "hey"}]}
    listed = domain(responses={"utter_faq/ask_age": [{"text": "2"}]})
    message = ("response 'utter_faq/ask_age' in domain.yml has no examples of retrieval intent "
               "'faq/ask_age', so the ResponseSelector never selects it; add examples under "
               "'- intent: faq/ask_age' or remove the response")
    assert validate(data, words, domain=listed).warnings == [message]
    assert validate(data, words).warnings == [
        message.replace("in domain.yml", "in the NLU data's 'responses:'")]


def test_lookup_tables_and_synonyms_that_match_no_annotated_entity():
    data = clean_data()
    data.lookup_tables = [{"name": "airport", "elements": ["JFK", "LAX"]},
                          {"name": "city", "elements": ["Rome"]},  # an annotated type
                          {"name": "cities", "elements": ["berlin", "Oslo"]}]  # an annotated value
    data.synonyms.update({"Big Apple": "New York", "Frisco": "San Francisco", "SF": "San Francisco"})
    assert validate(data, words).warnings == [
        "lookup table 'airport' matches no annotated entity (no example annotates an entity of type "
        "'airport' or any of its 2 elements), so no extractor learns from it; annotate a few of its "
        "elements as 'airport' entities in examples",
        "synonym 'San Francisco' (Frisco, SF) matches no annotated entity: EntitySynonymMapper maps "
        "only the values an extractor finds, and no example teaches one to find these; annotate a "
        "few of them as entities in examples",
    ]


def test_an_entity_type_the_domain_lists_but_no_example_annotates():
    listed = domain(intents=["greet", "travel", "faq"],
                    entities={"city": {"roles": [], "groups": []}, "date": {"roles": [], "groups": []},
                              "airport": {"roles": [], "groups": []}})
    assert domain_warnings(project_data(), listed) == [
        "entity 'airport' is listed in domain.yml but no example annotates it, so no trained "
        "extractor finds it; annotate it in a few examples, or remove it from the domain (unless a "
        "pretrained extractor such as Duckling or spaCy sets it)",
    ]


def test_training_warnings_are_what_trains_but_cannot_work():
    """What ``nlu-engine train`` shows: not the data's style (repeats, token boundaries, intents
    with one example), only what the model cannot do as the data means it to."""
    data = project_data()
    data.messages += [example("hi", "greet"), example("bye", "goodbye")]
    data.responses = {"utter_faq/ask_name": [{"text": "a bot"}], "utter_faq/ask_age": [{"text": "2"}]}
    data.lookup_tables = [{"name": "airport", "elements": ["JFK"]}]
    listed = domain(intents=["greet", "travel", "faq", "goodbye", "thank"],
                    entities={"city": {"roles": [], "groups": []}, "date": {"roles": [], "groups": []},
                              "airport": {"roles": [], "groups": []}},
                    responses={"utter_faq/ask_age": [{"text": "2"}], "utter_thank": [{"text": "np"}]})
    warnings = training_warnings(data, listed)
    assert [w.split(" ")[0:2] for w in warnings] == [
        ["response", "'utter_faq/ask_age'"], ["lookup", "table"], ["intent", "'thank'"],
        ["entity", "'airport'"]]
    assert all("\n" not in w for w in warnings)
    without = training_warnings(data)  # no domain: the response's place is the data's
    assert without == [warnings[0].replace("in domain.yml", "in the NLU data's 'responses:'"), warnings[1]]


JAPANESE = ["明日の朝、東京駅から大阪行きの新幹線を予約して", "渋谷でおすすめのラーメン屋を教えて"]
ENGLISH = ["book a train from tokyo to osaka tomorrow", "recommend a ramen place in shibuya"]


def script_warnings(texts: list[str], language: str) -> list[str]:
    data = TrainingData([Message(text=t, intent=f"i{i % 2}") for i, t in enumerate(texts * 2)])
    return [w for w in validate(data, language=language).warnings if "mostly written in" in w]


def test_data_in_a_script_its_language_is_not_written_in_is_one_warning():
    (warning,) = script_warnings(JAPANESE, "en")
    assert "Japanese (kana and Han)" in warning and "language is 'en' (English" in warning
    assert "e.g. ja" in warning and "\n" not in warning
    (warning,) = script_warnings(ENGLISH, "zh")
    assert "the Latin script" in warning and "language is 'zh' (Chinese, written in Han)" in warning
    (warning,) = script_warnings(["我想听周杰伦的歌，今天北京天气怎么样"], "ko")
    assert "the Han script" in warning and "e.g. zh" in warning


def test_data_in_its_language_s_script_or_saying_too_little_is_not_warned_about():
    assert script_warnings(JAPANESE, "ja") == []
    assert script_warnings([*JAPANESE, "iPhone 15 Proの値段を調べて"], "ja-JP") == []
    assert script_warnings(ENGLISH, "en") == []
    assert script_warnings(JAPANESE, "xx") == []
    assert script_warnings(["hi", "こんにちは"], "en") == []  # too few letters to tell
    assert script_warnings(JAPANESE, None) == []  # type: ignore[arg-type]


def test_an_entity_type_with_one_annotation_is_named():
    data = clean_data()
    data.messages.append(example("a table for [two](people)", "travel"))
    warnings = validate(data).warnings
    assert len(warnings) == 1
    assert warnings[0].startswith("entity 'people' is annotated in only 1 example; it trains")
