"""ResponseSelector: a response is selected for a retrieval intent, in Rasa's output form.

Hand-made data: retrieval intent ``faq`` with ``ask_name`` / ``ask_weather`` / ``ask_age``
(6 examples each), ``chitchat`` with two keys, ordinary intents, and a ``responses:`` section.
"""

from __future__ import annotations

import json
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.model import Model
from nlu_engine.assembly.model import train as train_archive
from nlu_engine.assembly.persistence import save_archive
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.assembly.registry import COMPONENTS
from nlu_engine.classifiers.diet.component import DIETClassifier
from nlu_engine.classifiers.response_selector import ResponseSelector
from nlu_engine.contract.component import config_fields
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.rasa_yaml import parse_rasa_yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SELECTOR = "nlu_engine.classifiers.response_selector.ResponseSelector"

DATA = textwrap.dedent(
    """\
    version: "3.1"
    nlu:
    - intent: greet
      examples: |
        - hi
        - hello
        - hey there
        - good morning
        - hello bot
        - hi friend
    - intent: goodbye
      examples: |
        - bye
        - goodbye
        - see you later
        - good night
        - bye bye
        - see you soon
    - intent: faq/ask_name
      examples: |
        - what is your name
        - what's your name
        - who are you
        - tell me your name
        - how should I call you
        - do you have a name
    - intent: faq/ask_weather
      examples: |
        - what is the weather like
        - how is the weather today
        - is it going to rain
        - will it be sunny tomorrow
        - what's the weather forecast
        - is it cold outside
    - intent: faq/ask_age
      examples: |
        - how old are you
        - what is your age
        - when were you born
        - are you old
        - tell me your age
        - how many years old are you
    - intent: chitchat/ask_mood
      examples: |
        - how are you
        - how are you doing
        - are you happy
        - how do you feel
        - are you ok
    - intent: chitchat/thank
      examples: |
        - thanks
        - thank you
        - thank you very much
        - many thanks
        - cheers for that
    responses:
      utter_faq/ask_name:
      - text: I'm Bot, a demo assistant.
      utter_faq/ask_weather:
      - text: I can't see outside, sorry.
      - text: No idea, look out of the window.
      utter_faq/ask_age:
      - text: I was born this year.
      utter_chitchat/ask_mood:
      - text: I'm fine, thanks.
      utter_chitchat/thank:
      - text: You're welcome!
      utter_greet:
      - text: Hello!
    """
)

#: fast settings: a higher learning rate for few epochs; on this data a compiled step is so much
#: faster than an eager one that compiling pays off from about 10 epochs
FAST = {"learning_rate": 0.005, "show_progress": False}
TEXTS = ["what is your name", "how old are you", "what's the weather like", "hello", "thank you"]


def data(keep: tuple[str, ...] | None = None) -> TrainingData:
    """The hand-made data, optionally only the examples whose (full) intent is in ``keep``."""
    parsed = parse_rasa_yaml(DATA, "hand_made.yml")
    assert parsed is not None
    if keep is not None:
        parsed = parsed.with_messages(
            [m for m in parsed.messages if (m.intent_response_key or m.intent) in keep]
        )
    return parsed


def pipeline_config(*steps: dict[str, Any], classifier: bool = True) -> dict[str, Any]:
    pipeline: list[dict[str, Any]] = [
        {"name": "WhitespaceTokenizer"},
        {"name": "CountVectorsFeaturizer"},
        {"name": "CountVectorsFeaturizer", "analyzer": "char_wb", "min_ngram": 1, "max_ngram": 4},
    ]
    if classifier:
        pipeline.append({"name": "LogisticRegressionClassifier"})
    return {"language": "en", "pipeline": [*pipeline, *steps]}


def trained(config: dict[str, Any], training_data: TrainingData) -> Pipeline:
    pipeline = Pipeline.build(load_config(config))
    pipeline.train(training_data, log=None)
    return pipeline


@pytest.fixture(scope="module")
def faq_pipeline() -> Pipeline:
    """LogisticRegression for the intent, ResponseSelector (defaults, 40 epochs) for faq keys."""
    faq_only = ("greet", "goodbye", "faq/ask_name", "faq/ask_weather", "faq/ask_age")
    return trained(pipeline_config({"name": SELECTOR, "epochs": 40, **FAST}), data(faq_only))


@pytest.fixture(scope="module")
def faq_results(faq_pipeline: Pipeline) -> dict[str, dict[str, Any]]:
    return dict(zip(TEXTS, faq_pipeline.parse_batch(TEXTS), strict=True))


# --- selection and output form ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "key", "responses"),
    [
        ("what is your name", "faq/ask_name", [{"text": "I'm Bot, a demo assistant."}]),
        ("how old are you", "faq/ask_age", [{"text": "I was born this year."}]),
        (
            "what's the weather like",
            "faq/ask_weather",
            [{"text": "I can't see outside, sorry."}, {"text": "No idea, look out of the window."}],
        ),
    ],
)
def test_a_response_is_selected_for_a_retrieval_intent(
    faq_results: dict[str, dict[str, Any]], text: str, key: str, responses: list[dict[str, str]]
) -> None:
    response = faq_results[text]["response_selector"]["default"]["response"]
    assert response["intent_response_key"] == key
    assert response["responses"] == responses
    assert response["utter_action"] == f"utter_{key}"
    assert response["confidence"] > 0.5


def test_output_has_rasas_shape(faq_results: dict[str, dict[str, Any]]) -> None:
    for result in faq_results.values():
        json.dumps(result, allow_nan=False)  # plain JSON
        selector = result["response_selector"]
        assert list(selector) == ["all_retrieval_intents", "default"]
        assert selector["all_retrieval_intents"] == ["faq"]
        prediction = selector["default"]
        assert list(prediction) == ["response", "ranking"]
        response = prediction["response"]
        assert list(response) == ["responses", "confidence", "intent_response_key", "utter_action"]
        assert isinstance(response["confidence"], float)
        ranking = prediction["ranking"]
        assert [list(r) for r in ranking] == [["confidence", "intent_response_key"]] * 3
        assert {r["intent_response_key"] for r in ranking} == {
            "faq/ask_name", "faq/ask_weather", "faq/ask_age"
        }
        confidences = [r["confidence"] for r in ranking]
        assert confidences == sorted(confidences, reverse=True)
        assert sum(confidences) == pytest.approx(1.0)
        assert ranking[0] == {
            "confidence": response["confidence"],
            "intent_response_key": response["intent_response_key"],
        }


def test_intent_is_left_alone_and_gets_the_full_retrieval_intent_name(
    faq_results: dict[str, dict[str, Any]],
) -> None:
    name = faq_results["what is your name"]["intent"]
    assert name["name"] == "faq"  # predicted by the intent classifier, not the selector
    assert name["full_retrieval_intent_name"] == "faq/ask_name"
    assert faq_results["how old are you"]["intent"]["full_retrieval_intent_name"] == "faq/ask_age"
    hello = faq_results["hello"]
    assert hello["intent"]["name"] == "greet"
    assert "full_retrieval_intent_name" not in hello["intent"]
    assert "response_selector" in hello  # Rasa writes a selection for every message
    assert {r["name"] for r in hello["intent_ranking"]} == {"greet", "goodbye", "faq"}


def test_persist_and_load_give_identical_output(
    faq_pipeline: Pipeline, faq_results: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    archive = save_archive(faq_pipeline, tmp_path / "faq.tar.gz", {})
    with tarfile.open(archive) as tar:
        names = {Path(n).name for n in tar.getnames() if "ResponseSelector" in n}
        responses_member = next(m for m in tar.getmembers() if m.name.endswith("responses.json"))
        stored = json.load(tar.extractfile(responses_member))  # type: ignore[arg-type]
    assert {"selector.json", "responses.json", "weights.npz", "label_features.npz",
            "diet.json"} <= names
    assert sorted(stored) == ["utter_faq/ask_age", "utter_faq/ask_name", "utter_faq/ask_weather"]
    model = Model.load(archive)
    assert model.parse_batch(TEXTS) == list(faq_results.values())
    before, after = faq_pipeline.components[-1], model.pipeline.components[-1]
    learned = {k for k in vars(before) if k.endswith("_") and not k.startswith("_")}
    assert learned == {k for k in vars(after) if k.endswith("_") and not k.startswith("_")}
    assert {"all_retrieval_intents_", "responses_", "intents_", "weights_"} <= learned


# --- which examples a selector trains on ------------------------------------------------------
@pytest.fixture(scope="module")
def two_selectors() -> Pipeline:
    """One selector per retrieval intent, both writing into ``response_selector``."""
    tiny = {"epochs": 20, "dense_dimension": {"text": 64, "label": 64},
            "concat_dimension": {"text": 64, "label": 64}, **FAST}
    return trained(
        pipeline_config(
            {"name": SELECTOR, "retrieval_intent": "faq", **tiny},
            {"name": SELECTOR, "retrieval_intent": "chitchat", **tiny},
        ),
        data(),
    )


def test_retrieval_intent_filter(two_selectors: Pipeline) -> None:
    faq, chitchat = two_selectors.components[-2:]
    assert isinstance(faq, ResponseSelector) and isinstance(chitchat, ResponseSelector)
    assert faq.intents_ == ["faq/ask_age", "faq/ask_name", "faq/ask_weather"]
    assert chitchat.intents_ == ["chitchat/ask_mood", "chitchat/thank"]
    assert sorted(chitchat.responses_) == ["utter_chitchat/ask_mood", "utter_chitchat/thank"]
    result = two_selectors.parse_batch(["thank you very much"])[0]
    selector = result["response_selector"]
    assert list(selector) == ["all_retrieval_intents", "faq", "chitchat"]
    assert selector["all_retrieval_intents"] == ["chitchat", "faq"]
    assert {r["intent_response_key"] for r in selector["faq"]["ranking"]} == set(faq.intents_)
    assert {r["intent_response_key"] for r in selector["chitchat"]["ranking"]} == set(
        chitchat.intents_
    )
    assert selector["chitchat"]["response"]["intent_response_key"] == "chitchat/thank"
    assert selector["chitchat"]["response"]["responses"] == [{"text": "You're welcome!"}]
    # the intent's own selector names the full retrieval intent
    assert result["intent"]["name"] == "chitchat"
    assert result["intent"]["full_retrieval_intent_name"] == "chitchat/thank"


def test_no_retrieval_intents_trains_and_writes_nothing(tmp_path: Path) -> None:
    config = pipeline_config({"name": SELECTOR, "epochs": 2, **FAST}, classifier=False)
    archive = train_archive(config, data(("greet", "goodbye")), out=tmp_path,
                            fixed_model_name="plain", log=None)
    with tarfile.open(archive) as tar:
        files = sorted(Path(n).name for n in tar.getnames() if "ResponseSelector/" in n)
    assert files == ["responses.json", "selector.json"]
    model = Model.load(archive)
    selector = model.pipeline.components[-1]
    assert isinstance(selector, ResponseSelector)
    assert selector.intents_ == [] and selector.all_retrieval_intents_ == []
    result = model.parse("hello there")
    assert "response_selector" not in result
    assert result["intent"] == {"name": None, "confidence": 0.0}  # it never writes the intent


def test_retrieval_intent_missing_from_data_warns(caplog: pytest.LogCaptureFixture) -> None:
    selector = ResponseSelector(retrieval_intent="smalltalk", **FAST)
    selector.train(data(("greet", "faq/ask_name")))
    assert "no training examples of retrieval intent 'smalltalk'" in caplog.text
    assert selector.intents_ == [] and selector.all_retrieval_intents_ == ["faq"]


def test_use_text_as_label_selects_by_response_text() -> None:
    keep = ("faq/ask_name", "faq/ask_weather", "faq/ask_age")
    config = pipeline_config(
        {"name": SELECTOR, "epochs": 20, "use_text_as_label": True, **FAST}, classifier=False
    )
    pipeline = trained(config, data(keep))
    selector = pipeline.components[-1]
    assert isinstance(selector, ResponseSelector)
    # the labels are the first response text of each key
    assert selector.intents_ == sorted(
        ["I'm Bot, a demo assistant.", "I can't see outside, sorry.", "I was born this year."]
    )
    result = pipeline.parse_batch(["what is your name"])[0]["response_selector"]["default"]
    assert result["response"]["intent_response_key"] == "faq/ask_name"  # resolved back to the key
    assert result["response"]["responses"] == [{"text": "I'm Bot, a demo assistant."}]
    assert {r["intent_response_key"] for r in result["ranking"]} == set(keep)


def test_key_without_responses_answers_with_the_key(caplog: pytest.LogCaptureFixture) -> None:
    training_data = data(("faq/ask_name", "faq/ask_age"))
    del training_data.responses["utter_faq/ask_age"]
    config = pipeline_config({"name": SELECTOR, "epochs": 10, **FAST}, classifier=False)
    pipeline = trained(config, training_data)
    assert "no responses for utter_faq/ask_age" in caplog.text
    response = pipeline.parse_batch(["how old are you"])[0]["response_selector"]["default"]
    assert response["response"]["intent_response_key"] == "faq/ask_age"
    assert response["response"]["responses"] == [{"text": "faq/ask_age"}]  # Rasa's fallback


# --- configuration -----------------------------------------------------------------------------
def test_defaults_follow_rasas_response_selector() -> None:
    config = ResponseSelector().get_config()
    assert config["hidden_layers_sizes"] == {"text": [256, 128], "label": [256, 128]}
    assert config["number_of_transformer_layers"] == 0
    assert config["transformer_size"] is None
    assert config["dense_dimension"] == config["concat_dimension"] == {"text": 512, "label": 512}
    assert config["connection_density"] == 1.0 and config["scale_loss"] is True
    assert config["learning_rate_schedule"] == "constant"  # Rasa's: it learns within 20 epochs
    assert config["use_all_labels_as_negatives"] == "auto"  # DIET's: every response past 20
    assert config["use_sparse_input_dropout"] is False
    assert config["use_dense_input_dropout"] is False
    assert config["sparse_regularization"] == "rasa"  # Rasa's L2 rule: faster on its demo bot
    assert config["retrieval_intent"] is None and config["use_text_as_label"] is False
    assert config["entity_recognition"] is False and config["intent_classification"] is True
    # every DIETClassifier parameter, in DIET's order, plus the selector's own two
    diet = DIETClassifier().get_config()
    assert list(config) == [*diet, "retrieval_intent", "use_text_as_label"]
    assert list(config_fields(ResponseSelector.Config)) == list(config)
    changed = {n for n in diet if config[n] != diet[n]}
    assert changed == {
        "hidden_layers_sizes", "transformer_size", "number_of_transformer_layers", "dense_dimension",
        "concat_dimension", "scale_loss", "learning_rate_schedule", "use_sparse_input_dropout",
        "use_dense_input_dropout", "entity_recognition", "sparse_regularization",
    }
    params = ResponseSelector(dense_dimension={"text": 64}).network_params()
    assert (params.text_dense_dimension, params.label_dense_dimension) == (64, 512)
    assert params.transformer_size == 256


def test_entity_recognition_cannot_be_turned_on() -> None:
    config = pipeline_config({"name": SELECTOR, "entity_recognition": True})
    with pytest.raises(ConfigError, match="'entity_recognition' must be one of False"):
        load_config(config)


def test_no_sentence_features_without_transformer_is_a_config_error() -> None:
    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "LexicalSyntacticFeaturizer"},
        {"name": SELECTOR, "epochs": 1, **FAST},
    ]}
    with pytest.raises(ConfigError, match="sentence features"):
        trained(config, data(("faq/ask_name", "faq/ask_age")))


def test_rasa_suggested_config_trains(monkeypatch: pytest.MonkeyPatch) -> None:
    """pipelines/rasa_suggested.yml (DIETClassifier + ResponseSelector + fallback), few epochs."""
    if "ResponseSelector" not in COMPONENTS:  # until the registry names it
        monkeypatch.setitem(COMPONENTS, "ResponseSelector",
                            "nlu_engine.classifiers.response_selector:ResponseSelector")
    overrides = [f"{name}.{key}={value}" for name in ("DIETClassifier", "ResponseSelector")
                 for key, value in (("epochs", 2), ("run_eagerly", "true"),
                                    ("show_progress", "false"))]
    config = load_config(PROJECT_ROOT / "nlu_engine" / "pipelines" / "rasa_suggested.yml", overrides)
    assert [s.name for s in config.steps][-2:] == ["ResponseSelector", "FallbackClassifier"]
    pipeline = Pipeline.build(config)
    pipeline.train(data(), log=None)
    result = pipeline.parse_batch(["what is your name"])[0]
    assert set(result["response_selector"]) == {"all_retrieval_intents", "default"}
    assert result["response_selector"]["all_retrieval_intents"] == ["chitchat", "faq"]
    assert result["intent"]["name"] in {"greet", "goodbye", "faq", "chitchat", "nlu_fallback"}


def test_full_retrieval_intent_name_agrees_with_the_intent() -> None:
    def ranked(*keys: str) -> dict[str, Any]:
        return {"response": {"intent_response_key": keys[0]},
                "ranking": [{"confidence": 0.5, "intent_response_key": k} for k in keys]}

    selection = {"all_retrieval_intents": ["chitchat", "faq"],
                 "default": ranked("chitchat/thank", "faq/ask_age", "faq/ask_name")}
    message = Message("how old", intent="faq", response_selector=selection)
    # the default selector's best key of this intent (Rasa would give None here)
    assert message.as_parse_result()["intent"]["full_retrieval_intent_name"] == "faq/ask_age"
    # a selector trained for the intent wins over the default one
    message.response_selector = {**selection, "faq": ranked("faq/ask_name", "faq/ask_age")}
    assert message.full_retrieval_intent_name() == "faq/ask_name"
    for intent in ("greet", "nlu_fallback", None):  # not a retrieval intent: no key at all
        message.intent = intent
        assert "full_retrieval_intent_name" not in message.as_parse_result()["intent"]
    # a gold example read from data
    gold = Message("what is your name", intent="faq", intent_response_key="faq/ask_name")
    assert gold.as_parse_result()["intent"]["full_retrieval_intent_name"] == "faq/ask_name"


# --- quality floor -------------------------------------------------------------------------------
FLOOR_DATA = {  # 8 responses, 6 training questions each, near neighbours among them
    "chitchat/how_are_you": ["how are you", "how are you doing", "how's it going", "are you ok",
                             "how do you feel today", "how is your day"],
    "chitchat/how_built": ["how were you built", "how were you made", "what are you built with",
                           "what software powers you", "which framework made you",
                           "what technology do you run on"],
    "chitchat/who_made": ["who made you", "who created you", "who built you", "who is your creator",
                          "which company made you", "who are your developers"],
    "faq/share_album": ["how do I share an album", "share my photos with family",
                        "send an album to a friend", "how can others see my album",
                        "invite someone to my album", "make a shared album"],
    "faq/stop_sharing": ["how do I stop sharing an album", "unshare my album",
                         "remove someone from my album", "stop others seeing my photos",
                         "disable the share link", "make my album private again"],
    "faq/delete_account": ["how do I delete my account", "delete my account", "close my account",
                           "remove my account", "erase my account for good", "get rid of my account"],
    "faq/reset_password": ["I forgot my password", "reset my password", "I can't log in",
                           "my password does not work", "I lost my password", "get a new password"],
    "out_of_scope/weather": ["what's the weather like", "will it rain today", "is it sunny outside",
                             "what's the forecast", "how hot is it today", "is it going to snow"],
}
FLOOR_TEST = [
    ("how are you today", "chitchat/how_are_you"), ("how is it going today", "chitchat/how_are_you"),
    ("how were you built", "chitchat/how_built"), ("what software were you built with", "chitchat/how_built"),
    ("who created you", "chitchat/who_made"), ("which company built you", "chitchat/who_made"),
    ("how can I share my album", "faq/share_album"), ("share an album with a friend", "faq/share_album"),
    ("how can I stop sharing my album", "faq/stop_sharing"), ("unshare an album", "faq/stop_sharing"),
    ("I want to delete my account", "faq/delete_account"), ("close my account please", "faq/delete_account"),
    ("I forgot my password again", "faq/reset_password"), ("reset password", "faq/reset_password"),
    ("will it rain tomorrow", "out_of_scope/weather"),
    ("what's the weather forecast", "out_of_scope/weather"),
]


def test_a_small_retrieval_set_is_learned_in_20_epochs() -> None:
    """At the 20 epochs migrating users compare at, the defaults tell near neighbours apart (how
    are you / how were you built; share / stop sharing) with confidence (with the learning rate
    decaying, as before issue 32, 7 of the 16 held-out questions were right, at a median 0.28)."""
    from nlu_engine.training_data.rasa_markdown import split_retrieval_intent

    messages = []
    for key, texts in FLOOR_DATA.items():
        intent, response_key = split_retrieval_intent(key, "floor")
        messages += [Message(text=t, intent=intent, intent_response_key=response_key) for t in texts]
    responses = {f"utter_{key}": [{"text": f"answer {key}"}] for key in FLOOR_DATA}
    pipeline = trained(pipeline_config({"name": SELECTOR, "epochs": 20, "show_progress": False},
                                       classifier=False),
                       TrainingData(messages=messages, responses=responses))
    results = pipeline.parse_batch([text for text, _ in FLOOR_TEST])
    chosen = [r["response_selector"]["default"]["response"] for r in results]
    right = [c["confidence"] for c, (_, key) in zip(chosen, FLOOR_TEST, strict=True)
             if c["intent_response_key"] == key]
    assert len(right) / len(FLOOR_TEST) >= 0.75  # 13 of 16 when written
    assert sorted(right)[len(right) // 2] >= 0.5  # the median right answer is a confident one


@pytest.mark.slow
def test_a_selector_trained_long_on_the_example_bot_neither_spikes_nor_freezes(tmp_path: Path) -> None:
    """The curve `make demo` showed before the scale_loss cap (issue 51): on the example bot's
    FAQ with the default pipeline's features, 300 epochs, the loss jumped to hundreds within
    single epochs from about epoch 160, and the base loss crept up and then froze. Without the
    cap this test fails (a loss of 137 after epoch 60 against a median of 4.6 before it); with
    it the curve keeps falling."""
    config = """\
language: en
pipeline:
  - name: WhitespaceTokenizer
  - name: CountVectorsFeaturizer
  - name: CountVectorsFeaturizer
    analyzer: char_wb
    min_ngram: 1
    max_ngram: 5
  - name: UniversalSentenceEncoderFeaturizer
  - name: ResponseSelector
    epochs: 300
    random_seed: 42
"""
    from nlu_engine.training_data import load_data

    (tmp_path / "config.yml").write_text(config, encoding="utf-8")
    pipeline = Pipeline.build(load_config(tmp_path / "config.yml"))
    pipeline.train(load_data(PROJECT_ROOT / "data" / "nlu.yml"), log=None)
    selector = pipeline.components[-1]
    losses = [epoch["t_loss"] for epoch in selector.history_["epochs"]]
    assert len(losses) == 300
    learned = float(np.median(losses[40:60]))
    assert max(losses[60:]) < 2 * learned  # no spike
    assert float(np.median(losses[-40:])) <= learned  # no creeping up
    assert len({round(loss, 3) for loss in losses[-40:]}) > 10  # not frozen
