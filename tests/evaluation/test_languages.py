"""The test messages' script against the model's ``language:`` (``evaluation.languages``)."""

import pytest

from nlu_engine.contract.languages import MIN_LETTERS
from nlu_engine.evaluation.languages import compare_scripts

KAZAKH = ["ертең таңғы жетіде оятқыш қой", "Алматыда ауа райы қандай", "play [музыка]"]
ITALIAN = ["sveglia alle sette domani mattina", "che tempo fa a Roma"]
JAPANESE = ["明日の朝七時に目覚ましをかけて", "東京の天気はどうですか"]


def test_cyrillic_test_data_against_an_italian_model_is_a_notice_with_the_shares() -> None:
    found = compare_scripts("it", KAZAKH)
    letters = sum(ch.isalpha() for text in KAZAKH for ch in text)
    latin = sum(ch.isalpha() and ch.isascii() for text in KAZAKH for ch in text)
    assert found["model_language"] == "it" and found["letters"] == letters
    assert found["scripts"] == {"Cyrillic": round((letters - latin) / letters, 4),
                                "Latin": round(latin / letters, 4)}
    assert found["main_script"] == "Cyrillic"
    notice = found["notice"]
    assert notice.startswith(f"the test data is mostly in the Cyrillic script "
                             f"({100 * (letters - latin) / letters:.0f}% of its {letters} letters)")
    assert "language: it (Italian, written in Latin)" in notice and "\n" not in notice


@pytest.mark.parametrize("language", ["it", "da", "en", "sr", "xx"])
def test_latin_test_data_under_a_latin_language_says_nothing(language: str) -> None:
    # Italian under a Danish model: the same script, and no guess among Latin-script languages
    found = compare_scripts(language, ITALIAN)
    assert found["notice"] is None and found["main_script"] == "Latin"


def test_latin_test_data_under_a_cyrillic_language_names_the_script_only() -> None:
    notice = compare_scripts("kk", ITALIAN)["notice"]
    assert notice.startswith("the test data is mostly in the Latin script (100% of")
    assert "language: kk (Kazakh, written in Cyrillic)" in notice
    assert "Italian" not in notice


def test_a_script_only_one_language_is_written_in_names_the_language() -> None:
    korean = ["오늘 서울 날씨 어때요", "내일 아침 일곱 시에 알람 맞춰줘"]
    assert compare_scripts("en", korean)["notice"].startswith(
        "the test data is mostly in the Hangul script (Korean, 100% of its 22 letters)")
    japanese = compare_scripts("zh", JAPANESE)["notice"]
    assert japanese.startswith("the test data is mostly in Japanese (kana and Han) (100% of")
    assert compare_scripts("ja", JAPANESE)["notice"] is None


def test_too_few_letters_or_none_say_nothing() -> None:
    assert compare_scripts("it", ["ёж"])["notice"] is None
    short = "я" * (MIN_LETTERS - 1)
    assert compare_scripts("it", [short])["main_script"] is None
    empty = compare_scripts("it", ["123 !!", ""])
    assert empty == {"model_language": "it", "letters": 0, "scripts": {}, "main_script": None,
                     "notice": None}
