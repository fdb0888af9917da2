"""The values users wrote, by entity type: annotations, lookup tables, synonyms."""

from __future__ import annotations

from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.entity_values import collect, normalize


def test_values_of_every_source_by_type() -> None:
    messages = [Message("to NYC now", intent="x", entities=[
        {"start": 3, "end": 6, "value": "New York", "entity": "city"}]),
        Message("to nyc", intent="x",
                entities=[{"start": 3, "end": 6, "value": "New York", "entity": "city"}]),
        Message("bad", intent="x", entities=[{"start": 2, "end": 1, "entity": "city"}])]
    data = TrainingData(messages=messages, synonyms={"NYC": "New York", "the big apple": "New York",
                                                     "LA": "Los Angeles"},
                        lookup_tables=[{"name": "city", "elements": ["Rome", "rome ", ""]},
                                       {"name": "food", "elements": ["pizza"]}])
    values = collect(data)
    assert values.types == ["city", "food"]
    assert dict(values.annotated["city"]) == {"NYC": 1, "nyc": 1}
    assert values.listed["city"] == {"rome": "Rome", "new york": "New York", "nyc": "NYC",
                                     "the big apple": "the big apple"}
    assert values.surfaces("city") == ["NYC", "Rome", "New York", "the big apple"]
    bare = collect(data, lookup_tables=False, synonyms=False)
    assert bare.types == ["city"] and bare.listed == {}


def test_normalize() -> None:
    assert normalize("  New\t York ") == "new york"
