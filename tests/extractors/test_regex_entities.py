"""RegexEntityExtractor: entity-named patterns only, lookup tables, case, persistence, parse output."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.contract.errors import DataError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.extractors.regex_entities import RegexEntityExtractor
from nlu_engine.training_data.annotations import parse_annotated

REGEXES = [
    {"name": "booking_id", "pattern": "[A-Z]{2}[0-9]{6}"},
    {"name": "zipcode", "pattern": "[0-9]{5}"},  # no entity of this name: unused
]
LOOKUPS = [
    {"name": "city", "elements": ["Berlin", "New York", "St. Louis"]},
    {"name": "drink", "elements": ["tea", "coffee"]},  # no entity of this name: unused
]


def data(**overrides: object) -> TrainingData:
    examples = ["check booking [AB123456](booking_id)", "a table in [Berlin](city)", "hello"]
    messages = []
    for annotated in examples:
        text, entities = parse_annotated(annotated)
        messages.append(Message(text, intent="x", entities=entities))
    sections = {"regex_features": REGEXES, "lookup_tables": LOOKUPS, **overrides}
    return TrainingData(messages=messages, **sections)  # type: ignore[arg-type]


def extract(extractor: RegexEntityExtractor, text: str) -> list[dict]:
    message = Message(text)
    extractor.process([message])
    return message.entities


def test_only_patterns_named_after_entities() -> None:
    extractor = RegexEntityExtractor()
    extractor.train(data())
    assert [p["name"] for p in extractor.patterns_] == ["booking_id", "city"]
    assert extract(extractor, "tea in 12345 with coffee") == []


def test_extracted_entities_have_extractor_and_no_confidence() -> None:
    extractor = RegexEntityExtractor()
    extractor.train(data())
    assert extract(extractor, "is QW112233 booked for new york and Berlin?") == [
        {"entity": "booking_id", "start": 3, "end": 11, "value": "QW112233",
         "extractor": "RegexEntityExtractor"},
        {"entity": "city", "start": 23, "end": 31, "value": "new york", "extractor": "RegexEntityExtractor"},
        {"entity": "city", "start": 36, "end": 42, "value": "Berlin", "extractor": "RegexEntityExtractor"},
    ]


def test_case_sensitive() -> None:
    extractor = RegexEntityExtractor(case_sensitive=True)
    extractor.train(data())
    assert [e["value"] for e in extract(extractor, "berlin or Berlin, qw112233 or QW112233")] == [
        "QW112233",
        "Berlin",
    ]


def test_word_boundaries_for_lookup_elements() -> None:
    extractor = RegexEntityExtractor()
    extractor.train(data())
    assert extract(extractor, "Berliner weisse in St. Louis")[0]["value"] == "St. Louis"
    assert len(extract(extractor, "Berliner weisse")) == 0
    loose = RegexEntityExtractor(use_word_boundaries=False)
    loose.train(data())
    assert [e["value"] for e in extract(loose, "Berliner weisse")] == ["Berlin"]


def test_switching_off_regexes_or_lookup_tables() -> None:
    only_lookups = RegexEntityExtractor(use_regexes=False)
    only_lookups.train(data())
    assert [e["entity"] for e in extract(only_lookups, "AB123456 in Berlin")] == ["city"]
    only_regexes = RegexEntityExtractor(use_lookup_tables=False)
    only_regexes.train(data())
    assert [e["entity"] for e in extract(only_regexes, "AB123456 in Berlin")] == ["booking_id"]


def test_entities_are_appended_to_existing_ones() -> None:
    extractor = RegexEntityExtractor()
    extractor.train(data())
    other = {"entity": "city", "start": 0, "end": 6, "value": "Berlin", "role": "departure",
             "extractor": "CRFEntityExtractor"}
    message = Message("Berlin to New York", entities=[dict(other)])
    extractor.process([message])
    assert message.entities[0] == other
    assert [e["value"] for e in message.entities[1:]] == ["Berlin", "New York"]


def test_no_matching_pattern_warns(caplog: pytest.LogCaptureFixture) -> None:
    extractor = RegexEntityExtractor()
    extractor.train(data(regex_features=[], lookup_tables=LOOKUPS[1:]))
    assert "RegexEntityExtractor" in caplog.text
    assert extract(extractor, "Berlin AB123456 tea") == []


def test_invalid_pattern_names_it() -> None:
    with pytest.raises(DataError, match="booking_id"):
        RegexEntityExtractor().train(data(regex_features=[{"name": "booking_id", "pattern": "[A-Z"}]))


def test_persist_and_load(tmp_path: Path) -> None:
    extractor = RegexEntityExtractor(case_sensitive=True)
    extractor.train(data())
    extractor.persist(tmp_path)
    assert (tmp_path / "regex.json").is_file()
    loaded = RegexEntityExtractor.load(tmp_path, extractor.config)
    text = "AB123456, ab123456, Berlin and berlin"
    assert extract(loaded, text) == extract(extractor, text)
    assert len(extract(loaded, text)) == 2


def test_in_a_trained_model(tmp_path: Path) -> None:
    from nlu_engine.assembly.model import Model, train

    config = {
        "language": "en",
        "pipeline": [
            {"name": "WhitespaceTokenizer"},
            {"name": "CountVectorsFeaturizer"},
            {"name": "LogisticRegressionClassifier"},
            {"name": "nlu_engine.extractors.regex_entities.RegexEntityExtractor"},
        ],
    }
    training = data()
    training.messages.append(Message("bye", intent="y"))
    path = train(config, training, out=tmp_path, fixed_model_name="regex", log=None)
    parsed = Model.load(path).parse("status of XK998877 please")
    assert parsed["entities"] == [
        {"entity": "booking_id", "start": 10, "end": 18, "value": "XK998877",
         "extractor": "RegexEntityExtractor"}
    ]
