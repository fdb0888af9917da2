"""CRFEntityExtractor: BILOU entities, confidences, roles and groups, persistence without pickle."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.extractors.crf_entity_extractor import CRFEntityExtractor
from nlu_engine.featurizers.sparse.regex import RegexFeaturizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from nlu_engine.training_data.annotations import parse_annotated
from tests.extras import requires_extra

pytestmark = requires_extra("crf")

CITIES = ["Berlin", "London", "Madrid", "Vienna", "Oslo", "Athens", "Lisbon", "Dublin", "Prague"]


def tokenized(*texts: str) -> list[Message]:
    messages = [Message(text) for text in texts]
    WhitespaceTokenizer().process(messages)
    return messages


def training_data(examples: list[tuple[str, str]], **sections: object) -> TrainingData:
    messages = []
    for intent, annotated in examples:
        text, entities = parse_annotated(annotated)
        messages.append(Message(text, intent=intent, entities=entities))
    WhitespaceTokenizer().process(messages)
    return TrainingData(messages=messages, **sections)  # type: ignore[arg-type]


def city(name: str, role: str) -> str:
    return f'[{name}]{{"entity": "city", "role": "{role}"}}'


def flight_examples() -> list[tuple[str, str]]:
    """From/to sentences in which Paris is only ever a destination and Rome only a departure."""
    examples = []
    for i, a in enumerate(CITIES):
        b = CITIES[(i + 3) % len(CITIES)]
        examples.append(("fly", f"from {city(a, 'departure')} to {city(b, 'destination')}"))
        examples.append(("fly", f"a flight to {city(a, 'destination')} from {city(b, 'departure')}"))
    examples += [
        ("fly", f"from {city('Berlin', 'departure')} to {city('Paris', 'destination')}"),
        ("fly", f"a flight to {city('Paris', 'destination')} from {city('Oslo', 'departure')}"),
        ("fly", f"from {city('Rome', 'departure')} to {city('London', 'destination')}"),
        ("fly", f"a flight to {city('Athens', 'destination')} from {city('Rome', 'departure')}"),
        ("greet", "hello there"),
        ("greet", "good morning"),
    ]
    return examples


def extract(extractor: CRFEntityExtractor, text: str) -> list[dict]:
    [message] = tokenized(text)
    extractor.process([message])
    return message.entities


def test_entities_with_bilou_spans_confidence_and_extractor() -> None:
    data = training_data(
        [
            ("inform", "I live in [New York City](city)"),
            ("inform", "I live in [Berlin](city)"),
            ("inform", "I live in [San Francisco](city)"),
            ("inform", "she moved to [Los Angeles](city)"),
            ("inform", "she moved to [Paris](city)"),
            ("inform", "I want [two](count) tickets"),
            ("inform", "I want [three](count) tickets"),
            ("inform", "I want [five](count) tickets"),
            ("inform", "we need [six](count) tickets"),
            ("greet", "hello"),
        ]
    )
    extractor = CRFEntityExtractor()
    extractor.train(data)
    entities = extract(extractor, "I live in Rio Grande")
    assert [(e["entity"], e["value"], e["start"], e["end"]) for e in entities] == [
        ("city", "Rio Grande", 10, 20)
    ]
    [entity] = entities
    assert entity["extractor"] == "CRFEntityExtractor"
    assert 0.0 < entity["confidence_entity"] <= 1.0
    assert "role" not in entity and "group" not in entity
    assert [e["value"] for e in extract(extractor, "I want four tickets")] == ["four"]
    assert extract(extractor, "hello") == []


def test_confidence_sums_bilou_variants() -> None:
    extractor = CRFEntityExtractor()
    marginals = [{"O": 0.1, "B-city": 0.5, "I-city": 0.1, "L-city": 0.05, "U-city": 0.25}]
    tags, confidences = extractor._most_likely(marginals)
    assert tags == ["B-city"]
    assert confidences == [pytest.approx(0.9)]
    plain = CRFEntityExtractor(BILOU_flag=False)
    assert plain._most_likely([{"O": 0.3, "city": 0.7}]) == (["city"], [0.7])


def test_roles_for_unseen_combinations_of_known_values() -> None:
    extractor = CRFEntityExtractor()
    extractor.train(training_data(flight_examples()))
    assert extractor.order_ == ["entity", "role"]
    entities = extract(extractor, "from Paris to Rome")
    assert [(e["entity"], e["value"], e.get("role")) for e in entities] == [
        ("city", "Paris", "departure"),
        ("city", "Rome", "destination"),
    ]
    assert all(0.5 < e["confidence_role"] <= 1.0 for e in entities)
    entities = extract(extractor, "a flight to Rome from Paris")
    assert [(e["value"], e.get("role")) for e in entities] == [
        ("Rome", "destination"),
        ("Paris", "departure"),
    ]


def test_groups_for_unseen_combinations() -> None:
    def item(size: str, topping: str, group: int) -> str:
        return (
            f'a [{size}]{{"entity": "size", "group": "{group}"}} '
            f'[{topping}]{{"entity": "topping", "group": "{group}"}}'
        )

    sizes, toppings = ["small", "medium", "large"], ["pepperoni", "hawaii", "margherita", "veggie"]
    pairs = {1: set(), 2: set()}
    examples = []
    for i in range(6):
        first = (sizes[i % 3], toppings[i % 4])
        second = (sizes[(i + 1) % 3], toppings[(i + 2) % 4])
        pairs[1].add(first)
        pairs[2].add(second)
        examples.append(("order", f"I want {item(*first, 1)} and {item(*second, 2)}"))
    # every value is known, but these pairs never shared a group in training
    assert ("large", "veggie") not in pairs[1] and ("small", "hawaii") not in pairs[1] | pairs[2]
    extractor = CRFEntityExtractor()
    extractor.train(training_data(examples))
    assert extractor.order_ == ["entity", "group"]
    entities = extract(extractor, "I want a large veggie and a small hawaii")
    assert [(e["entity"], e["value"], e.get("group")) for e in entities] == [
        ("size", "large", "1"),
        ("topping", "veggie", "1"),
        ("size", "small", "2"),
        ("topping", "hawaii", "2"),
    ]
    assert all(0.0 < e["confidence_group"] <= 1.0 for e in entities)


def test_pattern_feature_from_regex_featurizer() -> None:
    data = training_data(
        [
            ("check", "status of [AB123456](booking_id)"),
            ("check", "status of [XK998877](booking_id)"),
            ("check", "where is [QW112233](booking_id)"),
            ("check", "where is my order"),
            ("check", "status of my order"),
        ],
        regex_features=[{"name": "booking_id", "pattern": "[A-Z]{2}[0-9]{6}"}],
    )
    featurizer = RegexFeaturizer()
    featurizer.train(data)
    featurizer.process(data.messages)
    extractor = CRFEntityExtractor()
    extractor.train(data)
    [message] = tokenized("where is ZZ000111")
    featurizer.process([message])
    extractor.process([message])
    assert [(e["entity"], e["value"]) for e in message.entities] == [("booking_id", "ZZ000111")]
    # Rasa's feature names: "<window position>:pattern:<pattern name>"
    features = extractor._sequence_features(extractor._token_values(message), None)
    assert features[2]["0:pattern:booking_id"] is True
    assert features[1]["0:pattern:booking_id"] is False


def test_list_of_entities_split_at_commas() -> None:
    examples = [
        ("order", "I want [apples](fruit), [pears](fruit) and [plums](fruit)"),
        ("order", "I want [kiwis](fruit), [figs](fruit) and [limes](fruit)"),
        ("order", "get [grapes](fruit), [dates](fruit) and [melons](fruit)"),
        ("order", "get [cherries](fruit) and [lemons](fruit)"),
    ]
    extractor = CRFEntityExtractor()
    extractor.train(training_data(examples))
    assert [e["value"] for e in extract(extractor, "I want mangos, peaches and bananas")] == [
        "mangos", "peaches", "bananas",
    ]


def test_without_bilou() -> None:
    extractor = CRFEntityExtractor(BILOU_flag=False)
    extractor.train(training_data(flight_examples()))
    entities = extract(extractor, "from Madrid to Oslo")
    assert [(e["value"], e.get("role")) for e in entities] == [
        ("Madrid", "departure"),
        ("Oslo", "destination"),
    ]


def test_no_entities_trains_nothing(tmp_path: Path) -> None:
    extractor = CRFEntityExtractor()
    extractor.train(training_data([("greet", "hello"), ("bye", "goodbye")]))
    assert extractor.order_ == []
    assert extract(extractor, "hello") == []
    extractor.persist(tmp_path)
    loaded = CRFEntityExtractor.load(tmp_path, extractor.config)
    assert extract(loaded, "hello") == []


def test_persist_load_identical_without_pickle(tmp_path: Path) -> None:
    extractor = CRFEntityExtractor()
    extractor.train(training_data(flight_examples()))
    folder = tmp_path / "crf"
    folder.mkdir()
    extractor.persist(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["crf.json", "entity.crfsuite", "role.crfsuite"]
    assert not any(p.suffix in (".pkl", ".joblib") for p in folder.iterdir())
    loaded = CRFEntityExtractor.load(folder, extractor.config)
    shutil.rmtree(folder)  # the archive's temporary folder is removed after loading
    for text in ["from Paris to Rome", "a flight to Lisbon from Dublin", "hello there"]:
        assert extract(loaded, text) == extract(extractor, text)


def test_initials_keep_their_final_dot_through_training_and_loading(tmp_path: Path) -> None:
    """'u. s. d.' ends after a dot the tokenizer drops: Rasa ignores such annotations (their
    tokens train as outside any entity); here they train and prediction gives the dot back."""
    currencies = ["u. s. d.", "g. b. p.", "e. u. r.", "j. p. y."]
    examples = [("convert", f"convert [{c}](currency) to [{d}](currency) now")
                for c in currencies for d in currencies if c != d]
    examples += [("fly", f"fly to [{c}](city).") for c in CITIES]
    extractor = CRFEntityExtractor()
    extractor.train(training_data(examples))
    assert extractor.trailing_punctuation_ == {"currency\tinitial": "."}
    text = "convert j. p. y. to u. s. d. now"
    expected = [("currency", "j. p. y."), ("currency", "u. s. d.")]
    assert [(e["entity"], e["value"]) for e in extract(extractor, text)] == expected
    assert [e["value"] for e in extract(extractor, "fly to Berlin.")] == ["Berlin"]
    extractor.persist(tmp_path)
    loaded = CRFEntityExtractor.load(tmp_path, extractor.config)
    assert extract(loaded, text) == extract(extractor, text)


@pytest.mark.parametrize(
    "features",
    [
        [["low"], ["low", "bias"]],  # an even number of windows has no centre
        [["low"], ["lower"], ["low"]],  # unknown name
    ],
)
def test_bad_features(features: list[list[str]]) -> None:
    with pytest.raises(ConfigError, match="CRFEntityExtractor"):
        CRFEntityExtractor(features=features)  # type: ignore[arg-type]
