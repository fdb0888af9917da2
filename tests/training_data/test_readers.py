import json
import logging
import re
import textwrap
from pathlib import Path

import pytest

from nlu_engine.contract.errors import DataError
from nlu_engine.contract.message import Message
from nlu_engine.training_data import TrainingData, load_data, write_data
from nlu_engine.training_data.loading import load_file
from nlu_engine.training_data.project import read_project
from nlu_engine.training_data.rasa_json import dump_rasa_json, parse_rasa_json
from nlu_engine.training_data.rasa_markdown import parse_rasa_markdown
from nlu_engine.training_data.rasa_yaml import dump_rasa_yaml, parse_rasa_yaml

DATASETS = Path(__file__).parents[2].parent / "shared" / "datasets"

YAML_DATA = textwrap.dedent(
    """\
    version: "3.1"
    nlu:
    - intent: check_balance
      metadata: {sentiment: neutral}
      examples: |
        - What's my [credit](account) balance?
        - balance of my [credit card account]{"entity": "account", "value": "credit"}
    - intent: travel
      examples: |
        - fly from [Berlin]{"entity": "city", "role": "departure"} to [SF]{"entity": "city", "role": "to"}
        - a [large]{"entity": "size", "group": "1"} [pepperoni]{"entity": "topping", "group": "1"}
        - I live in [NYC](city:New York)
    - intent: greet
      examples:
      - text: |
          hi
        metadata: {sentiment: happy}
      - text: hello there
    - intent: faq/ask_name
      examples: |
        - what's your name?
        - who are you
    - synonym: credit
      examples: |
        - credit card
        - credit account
    - regex: account_number
      examples: |
        - \\d{10,12}
    - lookup: banks
      examples: |
        - JPMC
        - Bank of America
    stories:
    - story: ignored
      steps: []
    rules: []
    responses:
      utter_faq/ask_name:
      - text: I'm a bot.
    """
)


def parse_yaml(content: str, source: str = "nlu.yml") -> TrainingData:
    data = parse_rasa_yaml(content, source)
    assert data is not None
    return data


# --- YAML -------------------------------------------------------------------------------------
def test_yaml_examples_and_entities():
    data = parse_yaml(YAML_DATA)
    texts = [m.text for m in data.messages]
    assert texts == [
        "What's my credit balance?",
        "balance of my credit card account",
        "fly from Berlin to SF",
        "a large pepperoni",
        "I live in NYC",
        "hi",
        "hello there",
        "what's your name?",
        "who are you",
    ]
    assert data.intents == ["check_balance", "faq", "greet", "travel"]
    travel = data.messages[2]
    assert travel.entities == [
        {"entity": "city", "start": 9, "end": 15, "value": "Berlin", "role": "departure"},
        {"entity": "city", "start": 19, "end": 21, "value": "SF", "role": "to"},
    ]
    assert data.messages[3].entities[1]["group"] == "1"
    assert data.messages[1].entities[0]["value"] == "credit"


def test_yaml_metadata():
    data = parse_yaml(YAML_DATA)
    assert data.messages[0].metadata == {"intent": {"sentiment": "neutral"}}
    assert data.messages[5].metadata == {"example": {"sentiment": "happy"}}
    assert data.messages[6].metadata is None


def test_yaml_retrieval_intent_as_rasa_stores_it():
    # Rasa: intent "faq", intent_response_key "faq/ask_name"
    faq = parse_yaml(YAML_DATA).messages[7]
    assert faq.intent == "faq"
    assert faq.intent_response_key == "faq/ask_name"
    assert parse_yaml(YAML_DATA).messages[0].intent_response_key is None


def test_yaml_sections():
    data = parse_yaml(YAML_DATA)
    assert data.synonyms == {
        "credit card": "credit",
        "credit account": "credit",
        "credit card account": "credit",  # from the {"value": ...} annotation
        "NYC": "New York",  # from the [NYC](city:New York) shorthand
    }
    assert data.regex_features == [{"name": "account_number", "pattern": r"\d{10,12}"}]
    assert data.lookup_tables == [{"name": "banks", "elements": ["JPMC", "Bank of America"]}]
    assert data.responses == {"utter_faq/ask_name": [{"text": "I'm a bot."}]}


def test_yaml_without_nlu_keys_is_not_nlu_data():
    assert parse_rasa_yaml("language: en\npipeline: []\n", "config.yml") is None
    assert parse_rasa_yaml("", "empty.yml") is None
    assert parse_rasa_yaml("- a\n- b\n", "list.yml") is None


def test_yaml_empty_nlu_is_empty_data():
    data = parse_yaml("nlu:\n")
    assert data.messages == []


def test_yaml_lookups_with_same_name_are_merged():
    content = (
        "nlu:\n- lookup: x\n  examples: |\n    - a\n"
        "- lookup: x\n  examples: |\n    - b\n"
    )
    assert parse_yaml(content).lookup_tables == [{"name": "x", "elements": ["a", "b"]}]


def test_yaml_malformed_names_file_and_line():
    content = "nlu:\n- intent: greet\n  examples: |\n    - hi\n  - oops: [\n"
    with pytest.raises(DataError) as error:
        parse_rasa_yaml(content, "data/nlu.yml")
    message = str(error.value)
    assert message.startswith("data/nlu.yml:")
    assert "invalid YAML" in message
    assert "\n" not in message


def test_yaml_malformed_line_number_is_right():
    content = "nlu:\n- intent: greet\n  examples: |\n    - hi\nresponses: : x\n"
    with pytest.raises(DataError, match=r"^nlu\.yml:5: invalid YAML"):
        parse_rasa_yaml(content, "nlu.yml")


# found by tests/training_data/test_reader_properties.py (hypothesis): PyYAML's error for a
# character YAML refuses spans two lines and has no mark; it is one line naming the line
def test_yaml_control_character_is_one_line_naming_the_line():
    content = "nlu:\n- intent: greet\n  examples: |\n    - hi \x1e there\n"
    with pytest.raises(DataError) as error:
        parse_rasa_yaml(content, "nlu.yml")
    assert str(error.value).startswith("nlu.yml:4: invalid YAML (unacceptable character #x001e")
    assert "\n" not in str(error.value)


# found by the same tests: the YAML writer let characters YAML or str.splitlines() read as line
# breaks cut an example, a synonym or a response in two (or into a space)
@pytest.mark.parametrize("odd", ["\x1e", "\x0c", "\x0b", "\x85", "\u2028", "\u2029", "\x1c"])
def test_yaml_writer_keeps_characters_that_break_lines(odd):
    data = TrainingData(
        messages=[Message(f"a{odd}b", intent="greet",
                          entities=[{"entity": "x", "start": 0, "end": 3, "value": f"v{odd}w"}])],
        synonyms={f"c{odd}d": "e"},
        regex_features=[{"name": "r", "pattern": f"f{odd}g"}],
        lookup_tables=[{"name": "t", "elements": [f"h{odd}i"]}],
        responses={"utter_x": [{"text": f"j{odd}k"}]},
    )
    again = parse_rasa_yaml(dump_rasa_yaml(data), "again.yml")
    assert [(m.text, m.entities[0]["value"]) for m in again.messages] == [(f"a{odd}b", f"v{odd}w")]
    assert again.synonyms == {f"a{odd}b": f"v{odd}w", f"c{odd}d": "e"}
    assert again.regex_features == data.regex_features
    assert again.lookup_tables == data.lookup_tables
    assert again.responses == data.responses


def test_yaml_writer_refuses_a_synonym_with_blanks_around_it():
    carried = TrainingData(messages=[Message("go  NYC", intent="go", entities=[
        {"entity": "city", "start": 2, "end": 7, "value": "New York"}])], synonyms={"  NYC": "New York"})
    again = parse_rasa_yaml(dump_rasa_yaml(carried), "again.yml")  # the example carries it
    assert again.synonyms == {"  NYC": "New York"}
    with pytest.raises(DataError, match=r"^synonym ' NYC' of 'New York' has blanks around it"):
        dump_rasa_yaml(TrainingData(synonyms={" NYC": "New York"}))


def test_yaml_item_with_a_list_as_key_is_one_line():
    # found while fuzzing by hand beside the property tests: a TypeError (unhashable type)
    with pytest.raises(DataError, match=r"^nlu\.yml:2: an 'nlu' item's keys are names"):
        parse_rasa_yaml("nlu:\n- ? [a]\n  : b\n", "nlu.yml")


@pytest.mark.parametrize("reader, content, where", [
    (parse_rasa_markdown, "## regex:zip\n- [0-9\n", "data.md:2"),
    (parse_rasa_json, '{"rasa_nlu_data": {"regex_features": [{"name": "zip", "pattern": "[0-9"}]}}',
     "data.md: regex_features[0]"),
])
def test_markdown_and_json_invalid_regex_names_the_place(reader, content, where):
    # as the YAML reader did: a Markdown or JSON regex failed only at training, naming no file
    expected = rf"^{re.escape(where)}: invalid regular expression '\[0-9' in regex 'zip'"
    with pytest.raises(DataError, match=expected):
        reader(content, "data.md")


def test_json_offsets_that_are_booleans_are_dropped_with_a_warning():
    content = ('{"rasa_nlu_data": {"common_examples": [{"text": "ab", "intent": "i", '
               '"entities": [{"start": false, "end": 1, "entity": "x"}]}]}}')
    data = parse_rasa_json(content, "data.json")
    assert data.messages[0].entities == [] and "start=False" in data.load_warnings[0]


def test_yaml_nlu_must_be_a_list():
    with pytest.raises(DataError, match=r"nlu\.yml:2: 'nlu' must be a list"):
        parse_rasa_yaml("version: '3.1'\nnlu:\n  intent: greet\n", "nlu.yml")


def test_yaml_item_without_known_key():
    content = "nlu:\n- intent: a\n  examples: |\n    - x\n- intnet: greet\n  examples: |\n    - hi\n"
    with pytest.raises(DataError) as error:
        parse_rasa_yaml(content, "nlu.yml")
    message = str(error.value)
    assert message.startswith("nlu.yml:5:")
    assert "did you mean 'intent'" in message


def test_yaml_item_with_unknown_extra_key():
    content = "nlu:\n- intent: greet\n  exampels: |\n    - hi\n  examples: |\n    - hi\n"
    with pytest.raises(DataError, match=r"nlu\.yml:3: unknown key 'exampels'.*did you mean"):
        parse_rasa_yaml(content, "nlu.yml")


def test_yaml_intent_without_examples():
    content = "nlu:\n- intent: greet\n  examples: |\n    - hi\n- intent: bye\n"
    with pytest.raises(DataError, match=r"nlu\.yml:5: intent 'bye' has no examples"):
        parse_rasa_yaml(content, "nlu.yml")
    with pytest.raises(DataError, match="has no examples"):
        parse_rasa_yaml("nlu:\n- intent: bye\n  examples: |\n\n", "nlu.yml")


def test_yaml_bad_annotation_names_line():
    content = 'nlu:\n- intent: book\n  examples: |\n    - hi\n    - book [Paris]{"entity": city}\n'
    with pytest.raises(DataError) as error:
        parse_rasa_yaml(content, "nlu.yml")
    assert str(error.value).startswith("nlu.yml:5: invalid JSON")
    assert "book [Paris]" in str(error.value)


def test_yaml_invalid_regex():
    content = "nlu:\n- regex: zip\n  examples: |\n    - [0-9\n"
    with pytest.raises(DataError, match=r"nlu\.yml:4: invalid regular expression"):
        parse_rasa_yaml(content, "nlu.yml")


def test_yaml_bad_retrieval_intent_name():
    with pytest.raises(DataError, match="intent/response_key"):
        parse_rasa_yaml("nlu:\n- intent: faq/\n  examples: |\n    - x\n", "nlu.yml")


@pytest.mark.parametrize("name", ["faq/", "/ask_name", "faq/ask/name"])
def test_markdown_and_json_bad_retrieval_intent_name(name):
    with pytest.raises(DataError, match=r"^nlu\.md:1: .*intent/response_key"):
        parse_rasa_markdown(f"## intent:{name}\n- x\n", "nlu.md")
    bad = {"rasa_nlu_data": {"common_examples": [{"text": "x", "intent": name}]}}
    with pytest.raises(DataError, match=r"common_examples\[0\].*intent/response_key"):
        parse_rasa_json(json.dumps(bad), "nlu.json")


def test_retrieval_intents_written_back_with_full_name(tmp_path):
    # read: intent "faq" + key "faq/ask_name"; written: "faq/ask_name" in every format
    data = parse_yaml(YAML_DATA)
    for suffix in ("yml", "json"):
        again = load_data(write_data(data, tmp_path / f"out.{suffix}"))
        faq = [m for m in again.messages if m.intent_response_key]
        assert [(m.intent, m.intent_response_key) for m in faq] == [
            ("faq", "faq/ask_name"), ("faq", "faq/ask_name")
        ]


def test_yaml_line_without_dash_is_skipped_with_warning(caplog):
    content = "nlu:\n- intent: greet\n  examples: |\n    - hi\n    hello\n"
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        data = parse_yaml(content)
    assert "nlu.yml:5: ignored line 'hello'" in caplog.text
    assert [m.text for m in data.messages] == ["hi"]


# --- Markdown ---------------------------------------------------------------------------------
MARKDOWN_DATA = textwrap.dedent(
    """\
    <!-- a comment
         over two lines -->
    ## intent:greet
    - hey
    * hello [there](who)
      + good morning <!-- inline comment -->

    ## intent:faq/ask_name
    - what's your name
    ## synonym:New York
    - NYC
    - big apple
    ## regex:zipcode
    - [0-9]{5}
    ## lookup:banks
    - JPMC
    - Bank of America
    ## intent:move
    - I live in [LA](city:Los Angeles) now
    """
)


def test_markdown_sections():
    data = parse_rasa_markdown(MARKDOWN_DATA, "nlu.md")
    assert [(m.text, m.intent) for m in data.messages] == [
        ("hey", "greet"),
        ("hello there", "greet"),
        ("good morning", "greet"),
        ("what's your name", "faq"),
        ("I live in LA now", "move"),
    ]
    assert data.messages[1].entities == [{"entity": "who", "start": 6, "end": 11, "value": "there"}]
    assert data.messages[3].intent_response_key == "faq/ask_name"
    assert data.synonyms == {"NYC": "New York", "big apple": "New York", "LA": "Los Angeles"}
    assert data.regex_features == [{"name": "zipcode", "pattern": "[0-9]{5}"}]
    assert data.lookup_tables == [{"name": "banks", "elements": ["JPMC", "Bank of America"]}]


def test_markdown_unknown_section_names_line():
    content = "<!-- one\ntwo -->\n## intent:a\n- x\n## intnet:b\n- y\n"
    with pytest.raises(DataError) as error:
        parse_rasa_markdown(content, "nlu.md")
    assert str(error.value).startswith("nlu.md:5: unknown section")
    assert "did you mean 'intent'" in str(error.value)


def test_markdown_items_before_the_first_section_are_skipped_as_rasa_1_did():
    content = "# My bot\n\nContents:\n- [greet](#greet)\n- [bye](#bye)\n\n## intent:greet\n- hi\n"
    data = parse_rasa_markdown(content, "nlu.md")
    assert [(m.text, m.intent, m.entities) for m in data.messages] == [("hi", "greet", [])]


def test_markdown_bad_annotation_names_line():
    with pytest.raises(DataError, match=r"nlu\.md:3: invalid JSON"):
        parse_rasa_markdown('## intent:a\n- x\n- [y]{"entity": }\n', "nlu.md")


def test_markdown_lookup_file(tmp_path):
    (tmp_path / "banks.txt").write_text("JPMC\n\nBank of America\n", encoding="utf-8")
    (tmp_path / "nlu.md").write_text(
        "## intent:a\n- x\n## lookup:banks\nbanks.txt\n", encoding="utf-8"
    )
    data = load_data(tmp_path / "nlu.md")
    assert data.lookup_tables == [{"name": "banks", "elements": ["JPMC", "Bank of America"]}]


def test_markdown_missing_lookup_file(tmp_path):
    (tmp_path / "nlu.md").write_text("## lookup:banks\nmissing.txt\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"lookup table file 'missing\.txt' not found"):
        load_data(tmp_path / "nlu.md")


# --- JSON -------------------------------------------------------------------------------------
JSON_DATA = {
    "rasa_nlu_data": {
        "common_examples": [
            {"text": "hey", "intent": "greet", "entities": []},
            {
                "text": "fly to Berlin",
                "intent": "travel",
                "entities": [
                    {"start": 7, "end": 13, "entity": "city", "role": "destination"},
                ],
            },
            {
                "text": "I live in NYC",
                "intent": "move",
                "entities": [{"start": 10, "end": 13, "value": "New York", "entity": "city"}],
                "metadata": {"example": {"source": "x"}},
            },
            {"text": "what's your name", "intent": "faq/ask_name"},
        ],
        "regex_features": [{"name": "zipcode", "pattern": "[0-9]{5}"}],
        "lookup_tables": [{"name": "banks", "elements": ["JPMC"]}],
        "entity_synonyms": [{"value": "credit", "synonyms": ["credit card", "credit acc"]}],
    }
}


def test_json_reader():
    data = parse_rasa_json(json.dumps(JSON_DATA), "nlu.json")
    assert [m.intent for m in data.messages] == ["greet", "travel", "move", "faq"]
    assert data.messages[1].entities == [
        {"entity": "city", "start": 7, "end": 13, "value": "Berlin", "role": "destination"}
    ]
    assert data.messages[2].metadata == {"example": {"source": "x"}}
    assert data.messages[3].intent_response_key == "faq/ask_name"
    # the annotation's value is no listed synonym, as in Rasa's JSON reader (the mapper learns it)
    assert data.synonyms == {"credit card": "credit", "credit acc": "credit"}
    assert data.regex_features == [{"name": "zipcode", "pattern": "[0-9]{5}"}]
    assert data.lookup_tables == [{"name": "banks", "elements": ["JPMC"]}]


def test_json_syntax_error_names_line():
    with pytest.raises(DataError, match=r"^nlu\.json:3: invalid JSON"):
        parse_rasa_json('{\n "rasa_nlu_data": {\n "common_examples": [,]}}', "nlu.json")


def test_json_without_root_key():
    with pytest.raises(DataError, match="rasa_nlu_data"):
        parse_rasa_json('{"nlu": []}', "nlu.json")


def test_json_entity_offsets_that_do_not_fit_drop_the_annotation_not_the_file():
    bad = {"rasa_nlu_data": {"common_examples": [
        {"text": "hi there", "intent": "a", "entities": [
            {"start": 0, "end": 9, "entity": "x"}, {"start": 3, "end": 8, "entity": "y"}]},
        {"text": "ho", "intent": "a", "entities": [{"start": 2, "end": 1, "entity": "z"}]},
    ]}}
    data = parse_rasa_json(json.dumps(bad), "nlu.json")
    assert [m.text for m in data.messages] == ["hi there", "ho"]
    assert data.messages[0].entities == [{"entity": "y", "start": 3, "end": 8, "value": "there"}]
    assert data.messages[1].entities == []
    assert len(data.load_warnings) == 2
    assert data.load_warnings[0].startswith(
        "nlu.json: common_examples[0].entities[0]: entity 'x' at start=0, end=9 does not fit "
        "the text 'hi there' (8 characters)")
    assert "common_examples[1].entities[0]: entity 'z'" in data.load_warnings[1]


def test_json_writer_groups_synonyms_and_full_intent_names():
    data = parse_rasa_json(json.dumps(JSON_DATA), "nlu.json")
    written = json.loads(dump_rasa_json(data))["rasa_nlu_data"]
    assert written["common_examples"][3]["intent"] == "faq/ask_name"
    assert written["common_examples"][1]["entities"] == [
        {"entity": "city", "start": 7, "end": 13, "value": "Berlin", "role": "destination"}
    ]
    assert sorted(map(tuple, (sorted(s["synonyms"]) for s in written["entity_synonyms"]))) == [
        ("credit acc", "credit card"),  # NYC -> New York stays in its annotation's value
    ]
    assert written["common_examples"][2]["entities"][0]["value"] == "New York"


# --- round trips ------------------------------------------------------------------------------
def test_round_trip_yaml_json_yaml(tmp_path):
    original = parse_yaml(YAML_DATA)
    original.responses = {}  # not part of the JSON format
    yaml_path = write_data(original, tmp_path / "a.yml")
    from_yaml = load_data(yaml_path)
    json_path = write_data(from_yaml, tmp_path / "b.json")
    from_json = load_data(json_path)
    yaml_again = write_data(from_json, tmp_path / "c.yml")
    final = load_data(yaml_again)
    for data in (from_yaml, from_json, final):
        assert data.fingerprint() == original.fingerprint()
        assert [m.metadata for m in data.messages] == [m.metadata for m in original.messages]
    assert yaml_path.read_text(encoding="utf-8") == yaml_again.read_text(encoding="utf-8")


def test_yaml_writer_output():
    text = dump_rasa_yaml(parse_yaml(YAML_DATA))
    assert "- intent: check_balance\n  metadata:\n    sentiment: neutral\n  examples: |\n" in text
    assert "    - What's my [credit](account) balance?\n" in text
    assert '    - I live in [NYC]{"entity": "city", "value": "New York"}\n' in text
    assert "- intent: faq/ask_name\n" in text
    assert "- text: hi\n    metadata:\n      sentiment: happy\n" in text
    assert "utter_faq/ask_name:" in text


def test_yaml_writer_keeps_intent_metadata_groups_apart():
    data = TrainingData(
        messages=[
            Message("a", intent="x", metadata={"intent": {"k": 1}}),
            Message("b", intent="x"),
            Message("c", intent="x", metadata={"intent": {"k": 1}}),
        ]
    )
    back = parse_yaml(dump_rasa_yaml(data))
    assert [(m.text, m.metadata) for m in back.messages] == [
        ("a", {"intent": {"k": 1}}),
        ("c", {"intent": {"k": 1}}),
        ("b", None),
    ]


def test_yaml_writer_skips_examples_without_intent(caplog):
    data = TrainingData(messages=[Message("a", intent="x"), Message("b")])
    with caplog.at_level(logging.WARNING, logger="nlu_engine"):
        text = dump_rasa_yaml(data)
    assert "1 examples without an intent" in caplog.text
    assert [m.text for m in parse_yaml(text).messages] == ["a"]


def test_markdown_to_yaml_round_trip():
    data = parse_rasa_markdown(MARKDOWN_DATA, "nlu.md")
    assert parse_yaml(dump_rasa_yaml(data)).fingerprint() == data.fingerprint()


# --- loading ----------------------------------------------------------------------------------
def _write(path: Path, content: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


def test_load_directory_mixed_formats(tmp_path):
    _write(tmp_path / "b" / "nlu.yml", "nlu:\n- intent: yaml_intent\n  examples: |\n    - y\n")
    _write(tmp_path / "a.md", "## intent:md_intent\n- m\n")
    _write(tmp_path / "c.json", json.dumps(JSON_DATA))
    _write(tmp_path / "config.yml", "language: en\npipeline:\n- name: WhitespaceTokenizer\n")
    _write(tmp_path / "domain.yml", "intents: [greet]\nresponses:\n  utter_hi:\n  - text: hi\n")
    _write(tmp_path / "README.md", "# My bot\nSome notes.\n")
    _write(tmp_path / "package.json", '{"name": "x"}')
    _write(tmp_path / "notes.txt", "## intent:ignored\n- z\n")
    _write(tmp_path / ".hidden" / "nlu.yml", "nlu:\n- intent: hidden\n  examples: |\n    - h\n")
    data = load_data(tmp_path)
    # sorted order: a.md, b/nlu.yml, c.json (domain/config/README/package.json add no examples)
    assert [m.text for m in data.messages][:2] == ["m", "y"]
    assert data.intents == sorted(["md_intent", "yaml_intent", "greet", "travel", "move",
                                   "faq"])
    assert data.responses == {"utter_hi": [{"text": "hi"}]}
    assert data.regex_features == [{"name": "zipcode", "pattern": "[0-9]{5}"}]


def test_load_list_of_paths(tmp_path):
    a = _write(tmp_path / "a.yml", "nlu:\n- intent: a\n  examples: |\n    - x\n")
    b = _write(tmp_path / "b.md", "## intent:b\n- y\n")
    data = load_data([str(b), a])
    assert [m.intent for m in data.messages] == ["b", "a"]
    assert len(load_data([a, a]).messages) == 1


def test_explicit_file_without_nlu_data(tmp_path):
    config = _write(tmp_path / "config.yml", "language: en\npipeline: []\n")
    with pytest.raises(DataError, match=r"config\.yml: holds no NLU training data"):
        load_data(config)
    readme = _write(tmp_path / "README.md", "# notes\n")
    with pytest.raises(DataError, match="holds no NLU training data"):
        load_data(readme)


def test_directory_without_nlu_data(tmp_path):
    _write(tmp_path / "config.yml", "language: en\n")
    with pytest.raises(DataError, match="no NLU training data found"):
        load_data(tmp_path)


def test_missing_path():
    with pytest.raises(DataError, match=r"nowhere/nlu\.yml: not found"):
        load_data("nowhere/nlu.yml")


def test_malformed_file_in_directory_is_an_error(tmp_path):
    _write(tmp_path / "nlu.yml", "nlu:\n- intent: a\n  examples: [\n")
    with pytest.raises(DataError, match=r"nlu\.yml:\d+: invalid YAML"):
        load_data(tmp_path)


def test_load_file_detects_format_by_content(tmp_path):
    md = _write(tmp_path / "data.txt", "## intent:a\n- x\n")
    js = _write(tmp_path / "data.nlu", json.dumps(JSON_DATA))
    assert load_file(md).intents == ["a"]
    assert len(load_file(js).messages) == 4


def test_write_data_formats(tmp_path):
    data = parse_yaml(YAML_DATA)
    assert write_data(data, tmp_path / "x.json").read_text().startswith('{\n  "rasa_nlu_data"')
    assert write_data(data, tmp_path / "x.data", format="json").read_text().startswith("{")
    assert write_data(data, tmp_path / "sub" / "x.yaml").read_text().startswith("version:")
    with pytest.raises(DataError, match="Markdown"):
        write_data(data, tmp_path / "x.md")


def test_non_utf8_file(tmp_path):
    path = tmp_path / "nlu.yml"
    path.write_bytes("nlu:\n- intent: caf\xe9\n".encode("latin-1"))
    with pytest.raises(DataError, match="not UTF-8"):
        load_data(path)


# --- the shared benchmark data sets -----------------------------------------------------------
needs_datasets = pytest.mark.skipif(not DATASETS.is_dir(), reason="shared datasets not present")


@needs_datasets
@pytest.mark.parametrize(
    ("relative", "examples", "duplicates", "intents", "entity_types", "regexes"),
    [
        ("SNIPS/train.md", 12860, 224, 7, 39, 0),
        ("SNIPS/test.md", 699, 1, 7, 39, 0),
        ("NLU-Evaluation-Data/KFold_1/test.md", 1076, 0, 64, 45, 0),
        ("NLU-Evaluation-Data/KFold_1/train.md", 9960, 0, 64, 54, 67),
    ],
)
def test_shared_datasets(relative, examples, duplicates, intents, entity_types, regexes):
    path = DATASETS / relative
    if not path.is_file():
        pytest.skip(f"{path} not present")
    project = read_project(path)
    data = project.data
    assert len(data.messages) == examples
    assert sum(project.duplicates.values()) == duplicates  # exact repeats, dropped as Rasa does
    assert len(data.intents) == intents
    assert len(data.entity_types) == entity_types
    assert len(data.regex_features) == regexes
    # every line of the file that is an item is accounted for
    items = sum(1 for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip().startswith("- "))
    assert items == examples + duplicates + regexes
    for message in data.messages:
        for entity in message.entities:
            assert message.text[entity["start"] : entity["end"]] == entity["value"]


@needs_datasets
def test_snips_first_example_exactly():
    path = DATASETS / "SNIPS" / "train.md"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    first = load_data(path).messages[0]
    assert first.intent == "PlayMusic"
    assert first.text == "listen to westbam alumb allergic on google music"
    assert [(e["entity"], e["value"]) for e in first.entities] == [
        ("artist", "westbam"),
        ("album", "allergic"),
        ("service", "google music"),
    ]


@needs_datasets
def test_kfold_regex_sections():
    path = DATASETS / "NLU-Evaluation-Data" / "KFold_1" / "train.md"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    data = load_data(path)
    assert data.regex_features[0] == {"name": "alarm_key_0", "pattern": "alarm"}
    assert len({r["name"] for r in data.regex_features}) == 67
