"""EntitySynonymMapper: learned synonyms, case-insensitive mapping, processors, roles kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.extractors.synonyms import EntitySynonymMapper
from nlu_engine.training_data.annotations import parse_annotated


def data(synonyms: dict[str, str] | None = None, *annotated: str) -> TrainingData:
    messages = []
    for example in annotated:
        text, entities = parse_annotated(example)
        messages.append(Message(text, intent="x", entities=entities))
    return TrainingData(messages=messages, synonyms=synonyms or {})


def entity(value: object, **extra: object) -> dict:
    return {"entity": "city", "start": 0, "end": len(str(value)), "value": value, **extra}


def mapped(mapper: EntitySynonymMapper, *entities: dict) -> list[dict]:
    message = Message("text", entities=[dict(e) for e in entities])
    mapper.process([message])
    return message.entities


def trained() -> EntitySynonymMapper:
    mapper = EntitySynonymMapper()
    mapper.train(
        data(
            {"NYC": "New York", "the Big Apple": "New York"},
            "a table in [SF](city:San Francisco)",
            'to [the bay]{"entity": "city", "value": "San Francisco", "role": "destination"}',
            "in [Berlin](city)",
        )
    )
    return mapper


def test_learns_from_synonym_items_and_annotated_values() -> None:
    assert trained().synonyms_ == {
        "nyc": "New York",
        "the big apple": "New York",
        "sf": "San Francisco",
        "the bay": "San Francisco",
    }


def test_maps_case_insensitively_and_records_processor() -> None:
    mapper = trained()
    [result] = mapped(mapper, entity("nyc", extractor="DIETClassifier", confidence_entity=0.9))
    assert result == {
        "entity": "city", "start": 0, "end": 3, "value": "New York",
        "extractor": "DIETClassifier", "confidence_entity": 0.9,
        "processors": ["EntitySynonymMapper"],
    }
    [result] = mapped(mapper, entity("THE BIG APPLE"))
    assert result["value"] == "New York"


def test_unknown_values_are_left_alone() -> None:
    original = entity("Berlin", extractor="CRFEntityExtractor")
    assert mapped(trained(), original) == [original]


def test_roles_groups_and_earlier_processors_survive() -> None:
    [result] = mapped(
        trained(), entity("SF", role="destination", group="1", processors=["SomethingElse"])
    )
    assert result["value"] == "San Francisco"
    assert result["role"] == "destination" and result["group"] == "1"
    assert result["processors"] == ["SomethingElse", "EntitySynonymMapper"]


def test_non_string_values() -> None:
    mapper = EntitySynonymMapper()
    mapper.train(data({"1": "one"}))
    [result] = mapped(mapper, entity(1))
    assert result["value"] == "one"


def test_conflicting_definitions_warn_and_last_wins(caplog: pytest.LogCaptureFixture) -> None:
    mapper = EntitySynonymMapper()
    mapper.train(data({"LA": "Los Angeles"}, "in [la](city:Louisiana)"))
    assert "conflicting synonyms for 'la'" in caplog.text
    assert mapper.synonyms_ == {"la": "Louisiana"}


def test_persist_and_load(tmp_path: Path) -> None:
    mapper = trained()
    mapper.persist(tmp_path)
    assert (tmp_path / "synonyms.json").is_file()
    loaded = EntitySynonymMapper.load(tmp_path, mapper.config)
    assert loaded.synonyms_ == mapper.synonyms_
    assert mapped(loaded, entity("Nyc")) == mapped(mapper, entity("Nyc"))


def test_in_a_trained_model(tmp_path: Path) -> None:
    from nlu_engine.assembly.model import Model, train

    config = {
        "language": "en",
        "pipeline": [
            {"name": "WhitespaceTokenizer"},
            {"name": "CountVectorsFeaturizer"},
            {"name": "LogisticRegressionClassifier"},
            {"name": "nlu_engine.extractors.regex_entities.RegexEntityExtractor"},
            {"name": "nlu_engine.extractors.synonyms.EntitySynonymMapper"},
        ],
    }
    training = data(
        {"the big apple": "New York"},
        "weather in [NYC](city:New York)",
        "weather in [Berlin](city)",
    )
    training.lookup_tables = [{"name": "city", "elements": ["Berlin", "NYC", "the big apple"]}]
    training.messages.append(Message("bye", intent="y"))
    path = train(config, training, out=tmp_path, fixed_model_name="synonyms", log=None)
    parsed = Model.load(path).parse("rain in nyc or the Big Apple or Berlin")
    assert [(e["value"], e.get("processors")) for e in parsed["entities"]] == [
        ("New York", ["EntitySynonymMapper"]),
        ("New York", ["EntitySynonymMapper"]),
        ("Berlin", None),
    ]
    assert all(e["extractor"] == "RegexEntityExtractor" for e in parsed["entities"])
