"""Which of the combiner's members a message's language lets it trust: each member's languages
from the encoders it reads (the language table), the bot's own languages, the sets of members."""

from __future__ import annotations

from types import SimpleNamespace

from nlu_engine.classifiers.diet.component import DIETClassifier
from nlu_engine.classifiers.language_views import (
    OTHER,
    View,
    member_languages,
    member_sets,
    trained_languages,
    trusted,
    view_of,
)
from nlu_engine.contract.component import Component
from nlu_engine.contract.languages import USE, encoder_languages
from nlu_engine.contract.message import Message
from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer
from nlu_engine.featurizers.dense.sentence_encoder import UniversalSentenceEncoderFeaturizer
from nlu_engine.featurizers.sparse.count_vectors import CountVectorsFeaturizer


def placed(*components: Component) -> list[Component]:
    for index, component in enumerate(components):
        component.index = index
    return list(components)


def test_a_member_reads_what_every_encoder_it_reads_knows() -> None:
    use, minilm = UniversalSentenceEncoderFeaturizer(), LanguageModelFeaturizer()
    both = DIETClassifier()
    only_use = DIETClassifier(featurizers=["UniversalSentenceEncoderFeaturizer_1"])
    before = placed(CountVectorsFeaturizer(), use, minilm, both, only_use)
    found = member_languages(before)
    assert found["UniversalSentenceEncoderFeaturizer_1"] == sorted(encoder_languages(USE) or [])
    assert found["LanguageModelFeaturizer_2"] == ["en"]
    assert found["DIETClassifier_3"] == []  # reads the n-gram counts: the bot's languages only
    assert found["DIETClassifier_4"] == found["UniversalSentenceEncoderFeaturizer_1"]
    assert "CountVectorsFeaturizer_0" not in found  # learnt from the data: no encoder
    english_only = member_languages(placed(minilm, DIETClassifier()))
    assert english_only == {"LanguageModelFeaturizer_0": ["en"], "DIETClassifier_1": ["en"]}


def test_the_bots_languages_are_its_config_and_those_found_on_enough_examples() -> None:
    def said(code: str | None) -> Message:
        message = Message(text="x")
        message.language = None if code is None else SimpleNamespace(name=code)  # type: ignore[attr-defined]
        return message

    examples = [said("en")] * 280 + [said("de")] * 20 + [said("nl")] * 3 + [said("unknown")] * 5
    assert trained_languages("en", examples) == ["de", "en"]  # 3 Dutch ones: misidentified noise
    assert trained_languages("en-GB", []) == ["en"]
    assert trained_languages("xx", [said(None)]) == []


def test_each_language_outside_the_bots_trusts_the_members_that_read_it() -> None:
    languages = {"multi": ["de", "en"], "english": ["en"], "DIET": [], "custom": None}
    # the n-gram head (not named): learnt from the training data, it reads the bot's languages only
    names = ["multi", "english", "DIET", "n-grams", "custom"]
    assert trusted(languages, names, "de") == (0, 4)
    assert trusted(languages, names, OTHER) == (4,)  # an encoder no row names reads every language
    assert member_sets(languages, names, ["en"]) == [(0, 4), (4,)]
    del languages["custom"]
    names.pop()
    assert member_sets(languages, names, ["en"]) == [(), (0,)]
    views = [View(()), View((0,))]
    message = Message(text="Wie wird das Wetter?")
    assert view_of(message, languages, names, ["en"], views) is None  # not identified
    for code, expected in (("de", views[1]), ("sw", views[0]), ("en", None), ("unknown", None)):
        message.language = SimpleNamespace(name=code)  # type: ignore[attr-defined]
        assert view_of(message, languages, names, ["en"], views) is expected
    assert view_of(message, languages, names, ["en"], []) is None


def test_a_close_language_counts_as_the_bots_and_only_a_sure_guess_leaves_no_member() -> None:
    languages = {"multi": ["de", "en", "it"]}
    names, views = ["multi", "n-grams"], [View(()), View((0,))]
    message = Message(text="Tolong setel alarm jam tujuh pagi")
    message.language = SimpleNamespace(name="ms", confidence=0.97)  # type: ignore[attr-defined]
    assert view_of(message, languages, names, ["id"], views) is None  # Malay: an Indonesian bot's own
    assert view_of(message, languages, names, ["en"], views) is views[0]  # no member reads it
    message.language = SimpleNamespace(name="ms", confidence=0.6)  # type: ignore[attr-defined]
    assert view_of(message, languages, names, ["en"], views) is None  # unsure: the whole combination
    message.language = SimpleNamespace(name="it", confidence=0.6)  # type: ignore[attr-defined]
    assert view_of(message, languages, names, ["en"], views) is views[1]  # read by a member: its view
