"""LanguageIdentifier: the right language on clear sentences, unknown without letters, the bot's
languages preferred, the parse result's field, persist/load, and its errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import nlu_engine.featurizers.language_identifier as module
from nlu_engine.assembly.model import Model, train
from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.languages import LANGUAGES
from nlu_engine.contract.message import IdentifiedLanguage, Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.language_identifier import (
    STATE_FILE,
    LanguageIdentifier,
    identifier_for,
    identifier_probabilities,
)

ENGLISH = ["hello, how are you today", "book me a flight to Boston tomorrow morning",
           "what is the weather like in London", "play some jazz music please",
           "add this song to my favourite playlist", "I would like to order a pizza"]
INDONESIAN = ["Saya mau pesan tiket pesawat ke Jakarta besok",
              "tolong putar lagu terbaru dari penyanyi itu", "berapa suhu di kota ini besok pagi",
              "tambahkan lagu ini ke daftar putar saya", "saya ingin memesan meja untuk dua orang"]
CLEAR = {
    "de": "Ich möchte morgen früh einen Flug nach Berlin buchen",
    "fr": "Je voudrais réserver une table pour deux personnes ce soir",
    "es": "¿Qué tiempo va a hacer mañana en Madrid?",
    "it": "Vorrei ascoltare una canzone dei Beatles, per favore",
    "nl": "Kun je een nummer van deze artiest afspelen alsjeblieft",
    "tr": "Yarın sabah İstanbul'a bir uçak bileti almak istiyorum",
    "ru": "Какая погода будет завтра в Москве?",
    "zh": "我想预订明天早上去北京的机票",
    "ja": "明日の東京の天気を教えてください",
    "ko": "내일 서울 날씨가 어떤지 알려 주세요",
    "ar": "أريد حجز طاولة لشخصين الليلة",
    "el": "Θέλω να κλείσω ένα τραπέζι για δύο άτομα απόψε",
    "en": "Could you please tell me what the weather will be like tomorrow?",
}
NO_LETTERS = ["", "   ", "12345", "3.14 + 2,71 = 5.85", "😀🎉👍", "!!!???", "-- ... --", "\u0301\u0301"]


def data(texts: list[str]) -> TrainingData:
    return TrainingData(messages=[Message(text=text, intent="any") for text in texts])


def trained(texts: list[str] = ENGLISH, **params: object) -> LanguageIdentifier:
    component = LanguageIdentifier(**params)
    component.train(data(texts))
    return component


def identified(component: LanguageIdentifier, texts: list[str]) -> list[IdentifiedLanguage]:
    messages = [Message(text=text) for text in texts]
    component.process(messages)
    assert all(m.language is not None for m in messages)
    return [m.language for m in messages]  # type: ignore[misc]


def test_clear_sentences_get_their_language() -> None:
    answers = identified(trained(), list(CLEAR.values()))
    assert [a.name for a in answers] == list(CLEAR)
    assert all(0.2 <= a.confidence <= 1.0 for a in answers)


def test_text_without_letters_is_unknown_with_confidence_zero() -> None:
    for answer in identified(trained(), NO_LETTERS):
        assert answer == IdentifiedLanguage("unknown", 0.0)


@pytest.mark.parametrize("text", [
    "hello 你好 Привет مرحبا", "ok", "x", "Straße 123 😀 東京", "\ud800 lone surrogate",
    "word " * 100_000, "ab\x00cd", "I want ein Bier bitte",
])
def test_mixed_odd_and_huge_texts_answer_a_known_code_or_unknown(text: str) -> None:
    (answer,) = identified(trained(), [text])
    assert answer.name in LANGUAGES or answer.name == "unknown"
    assert 0.0 <= answer.confidence <= 1.0


def test_training_learns_the_share_of_each_language() -> None:
    component = trained(ENGLISH * 4 + [CLEAR["de"]] * 6)
    assert component.training_languages_ == {"en": 0.8, "de": 0.2}
    assert component.main_languages() == ("en", "de")
    assert trained(ENGLISH * 4 + [CLEAR["de"]] * 6, main_language_share=0.5).main_languages() == ("en",)


def test_the_bots_language_is_preferred_where_the_identifier_hesitates() -> None:
    ambiguous = "bagaimana cuaca hari ini"  # py3langid alone: Malay 0.52, Indonesian 0.48
    assert trained(ENGLISH, main_language_prior=1.0).identify(ambiguous).name == "ms"
    indonesian_bot = trained(INDONESIAN)
    assert indonesian_bot.main_languages()[0] == "id"
    assert indonesian_bot.identify(ambiguous).name == "id"
    # a clear sentence of another language keeps its language for any bot
    assert indonesian_bot.identify(CLEAR["de"]).name == "de"


def test_threshold_turns_an_unsure_answer_into_unknown_keeping_its_confidence() -> None:
    text = "ciao"
    loose, strict = trained(threshold=0.0).identify(text), trained(threshold=0.99).identify(text)
    assert loose.name != "unknown" and loose.confidence < 0.99
    assert strict == IdentifiedLanguage("unknown", loose.confidence)


def test_languages_restrict_the_answers() -> None:
    component = trained(languages=["en", "de"], threshold=0.0)
    answers = identified(component, [CLEAR["fr"], CLEAR["it"], CLEAR["de"]])
    assert {a.name for a in answers} <= {"en", "de"}
    assert answers[2].name == "de"


def test_a_language_code_the_engine_does_not_know_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"'languages'.*'english'"):
        LanguageIdentifier(languages=["en", "english"])
    with pytest.raises(ConfigError, match="'xx'"):
        LanguageIdentifier(languages=["xx"])


def test_a_language_the_package_does_not_know_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"does not know the language.*bo"):
        trained(languages=["en", "bo"])


def test_a_missing_package_is_one_line_naming_the_pip_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "_IDENTIFIERS", {})
    monkeypatch.setitem(sys.modules, "py3langid", None)
    monkeypatch.setitem(sys.modules, "py3langid.langid", None)
    with pytest.raises(ConfigError, match=r"pip install 'py3langid>=0.4,<0.5'") as error:
        trained()
    assert "\n" not in str(error.value)


def test_the_model_loads_once_per_process_and_set_of_languages() -> None:
    assert identifier_for(()) is identifier_for(())
    assert identifier_for(("en", "de")) is identifier_for(("en", "de"))
    assert identifier_for(("en", "de")) is not identifier_for(())
    assert trained()._identifier() is trained()._identifier()


def test_probabilities_agree_with_the_packages_own_ranking() -> None:
    """identifier_probabilities reads py3langid's scoring step directly: a py3langid whose
    scoring changed fails here rather than answering differently."""
    identifier = identifier_for(())
    for text in [*CLEAR.values(), "bagaimana cuaca hari ini", "ok"]:
        probabilities = identifier_probabilities(identifier, text)
        ranked = dict(identifier.rank(text))
        by_label: dict[str, float] = {}
        for label, probability in zip(identifier.nb_classes, probabilities.tolist(), strict=True):
            by_label.setdefault(label, probability)  # an aliased label's first column
        assert by_label == pytest.approx(ranked, abs=1e-6)
        assert abs(sum(by_label.values()) - 1.0) < 1e-4


def test_persist_and_load_give_identical_output(tmp_path: Path) -> None:
    component = trained(ENGLISH * 3 + INDONESIAN, languages=[])
    texts = [*CLEAR.values(), *NO_LETTERS, "bagaimana cuaca hari ini", "ciao"]
    component.persist(tmp_path)
    state = json.loads((tmp_path / STATE_FILE).read_text(encoding="utf-8"))
    assert state["training_languages"] == component.training_languages_
    loaded = LanguageIdentifier.load(tmp_path, component.config)
    assert loaded.training_languages_ == component.training_languages_
    assert identified(loaded, texts) == identified(component, texts)


def test_a_broken_state_file_is_an_archive_error(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text('{"training_languages": [1, 2]}', encoding="utf-8")
    with pytest.raises(ArchiveError, match=STATE_FILE):
        LanguageIdentifier.load(tmp_path, LanguageIdentifier.Config())


STEPS = [{"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
         {"name": "LogisticRegressionClassifier"}]


@pytest.mark.parametrize("with_identifier", [True, False])
def test_the_parse_result_has_the_language_only_with_the_component(
        tmp_path: Path, tiny_data_path: Path, with_identifier: bool) -> None:
    from nlu_engine.training_data import load_data

    steps = [{"name": "LanguageIdentifier"}, *STEPS] if with_identifier else STEPS
    archive = train({"language": "en", "pipeline": steps}, load_data(tiny_data_path),
                    out=tmp_path, fixed_model_name="model", log=None)
    result = Model.load(archive).parse(CLEAR["de"])
    if with_identifier:
        assert result["language"]["name"] == "de"
        assert set(result["language"]) == {"name", "confidence"}
        assert 0.0 <= result["language"]["confidence"] <= 1.0
    else:
        assert "language" not in result
        assert set(result) == {"text", "intent", "entities", "text_tokens", "intent_ranking"}


def test_a_message_without_a_language_parses_as_before() -> None:
    message = Message(text="hi")
    assert "language" not in message.as_parse_result()
    message.language = IdentifiedLanguage("en", 0.75)
    assert message.as_parse_result()["language"] == {"name": "en", "confidence": 0.75}


def test_a_non_finite_language_confidence_is_refused_as_every_confidence_is() -> None:
    message = Message(text="hi", language=IdentifiedLanguage("en", float("nan")))
    with pytest.raises(ValueError, match=r"language\.confidence"):
        message.as_parse_result()
