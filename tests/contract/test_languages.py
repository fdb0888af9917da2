"""The language table (``contract.languages``): one row per language, and the encoders'
languages read from it, the one way an encoder declares them."""

from __future__ import annotations

from nlu_engine.contract.languages import (
    LANGUAGES,
    MINILM,
    USE,
    duckling_locale,
    encoder_languages,
    language_of,
)
from nlu_engine.extractors.duckling import DucklingEntityExtractor
from nlu_engine.featurizers.dense.language_model import LanguageModelFeaturizer
from nlu_engine.featurizers.dense.sentence_encoder import UniversalSentenceEncoderFeaturizer
from nlu_engine.loaders.spacy_nlp import SpacyNLP


def test_an_encoder_reads_the_languages_whose_rows_name_it() -> None:
    # the Universal Sentence Encoder's model card: 15 language codes (zh and zh-TW are one row)
    assert encoder_languages(USE) == frozenset(
        {"ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh"})
    assert encoder_languages(MINILM) == frozenset({"en"})
    assert encoder_languages("an encoder no row names") is None
    assert all(isinstance(row.encoders, tuple) for row in LANGUAGES.values())


def test_dense_featurizers_declare_their_encoder_and_read_its_languages_from_the_table() -> None:
    use = UniversalSentenceEncoderFeaturizer()
    assert use.encoder() == USE and use.languages() == encoder_languages(USE)
    minilm = LanguageModelFeaturizer(model_weights="sentence-transformers/all-MiniLM-L6-v2")
    assert minilm.encoder() == MINILM and minilm.languages() == frozenset({"en"})
    assert LanguageModelFeaturizer().languages() == frozenset({"en"})  # the default weights
    # a step's languages: narrows them; weights no row names read every language
    assert LanguageModelFeaturizer(model_weights="/models/my-bert", languages=["de-CH"]).languages() == {"de"}
    assert LanguageModelFeaturizer(model_weights="/models/my-bert").languages() is None


def test_spacy_and_duckling_read_their_defaults_from_the_row() -> None:
    assert language_of("de-AT").spacy_model == "de_core_news_md"
    nlp = SpacyNLP()
    nlp.language = "en"
    assert nlp.model_name() == "en_core_web_md"
    duckling = DucklingEntityExtractor()
    duckling.language = "fr"
    assert duckling.locale() == duckling_locale("fr") == "fr_FR"  # Rasa's <code>_<CODE>


def test_close_languages_are_groups_of_known_codes() -> None:
    from nlu_engine.contract.languages import CLOSE, close_languages

    assert all(code in LANGUAGES for group in CLOSE for code in group)
    assert close_languages("id") == {"id", "ms"} and close_languages("sr-Latn") == {"sr", "hr", "bs"}
    assert close_languages("en") == {"en"}
