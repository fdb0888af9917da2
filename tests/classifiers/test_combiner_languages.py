"""An English bot (the shipped ``diet.yml``) asked in German: its English-only encoder
(all-MiniLM-L6-v2) is not trusted on a message the language identifier finds German, so the
multilingual sentence encoder answers, and German requests are not sent to the fallback more
often than English ones of the same kind (issue 56, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.assembly.model import Model, train

#: the shipped pipeline, small and short enough for a test
FAST = ["DIETClassifier.epochs=1", "DIETClassifier.transformer_size=16",
        "DIETClassifier.number_of_transformer_layers=1", "ResponseSelector.epochs=1"]

TRAIN = {
    "weather": ["what's the weather like today", "will it rain tomorrow", "how hot is it outside",
                "is it going to snow this weekend", "weather forecast for the next days",
                "do I need an umbrella today", "how cold will it be tonight", "is it sunny now"],
    "set_alarm": ["wake me up at seven", "set an alarm for 6 am", "set an alarm for tomorrow morning",
                  "I need an alarm at half past five", "alarm at 8 please", "wake me at noon",
                  "create an alarm for monday at 9", "please set my alarm for 7:30"],
    "play_music": ["play some jazz", "put on my favourite song", "play music by the beatles",
                   "I want to hear some rock", "start my playlist", "play a song for me",
                   "turn on some relaxing music", "play the latest album of adele"],
    "book_table": ["book a table for two tonight", "reserve a table at an italian restaurant",
                   "I need a table for four at 8", "make a dinner reservation for friday",
                   "book a restaurant for tomorrow", "get me a table for three",
                   "reserve dinner for two at seven", "find me a table at a sushi place"],
}
#: the same requests, phrased anew, in English and in German
ENGLISH = [("weather", "what will the weather be tomorrow"), ("weather", "is it raining right now"),
           ("set_alarm", "set an alarm for seven in the morning"), ("set_alarm", "wake me up at six"),
           ("play_music", "play some music by queen"), ("play_music", "I would like to hear jazz"),
           ("book_table", "book a table for two people tonight"),
           ("book_table", "reserve a table at a restaurant for friday")]
GERMAN = [("weather", "wie wird das Wetter morgen"), ("weather", "regnet es gerade"),
          ("set_alarm", "stelle einen Wecker für sieben Uhr morgens"), ("set_alarm", "weck mich um sechs"),
          ("play_music", "spiel etwas Musik von Queen"), ("play_music", "ich möchte Jazz hören"),
          ("book_table", "reserviere einen Tisch für zwei Personen heute Abend"),
          ("book_table", "reserviere einen Tisch in einem Restaurant für Freitag")]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    folder = tmp_path_factory.mktemp("english-bot")
    lines = ["nlu:"]
    for intent, texts in TRAIN.items():
        lines += [f"- intent: {intent}", "  examples: |", *(f"    - {t}" for t in texts)]
    (folder / "nlu.yml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    archive = train("diet", str(folder / "nlu.yml"), out=str(folder), fixed_model_name="m",
                    overrides=FAST, log=None)
    return Model.load(Path(archive))


def fallback_rate(model: Model, requests: list[tuple[str, str]]) -> tuple[float, float]:
    """(share sent to the fallback, share ranked right) of ``requests``."""
    results = model.parse_batch([text for _, text in requests])
    fallback = sum(r["intent"]["name"] == "nlu_fallback" for r in results) / len(results)
    right = sum(r["intent"]["name"] == intent for (intent, _), r in zip(requests, results, strict=True))
    return fallback, right / len(results)


def test_german_requests_to_an_english_bot_are_not_sent_to_the_fallback_more_often(model: Model) -> None:
    english_fallback, english_right = fallback_rate(model, ENGLISH)
    german_fallback, german_right = fallback_rate(model, GERMAN)
    assert german_fallback <= english_fallback + 1 / len(GERMAN)  # one request of eight at most
    assert german_right >= 0.75 and english_right >= 0.75


def test_a_german_request_is_ranked_without_the_english_only_members(model: Model) -> None:
    from nlu_engine.classifiers.combiner import IntentCombiner
    from nlu_engine.classifiers.language_views import view_of
    from nlu_engine.contract.message import Message

    combiner = next(c for c in model.pipeline.components if isinstance(c, IntentCombiner))
    names = [m.name for m in combiner.members_]
    assert combiner.own_languages_ == ["en"]
    messages = model.pipeline.process([Message(text=text) for _, text in GERMAN + ENGLISH])
    views = [view_of(m, combiner.member_languages_, names, combiner.own_languages_, combiner.views_)
             for m in messages]
    for view in views[:len(GERMAN)]:  # German: the multilingual encoder's head alone
        assert view is not None
        assert [names[i] for i in view.members] == [
            n for n in names if n.startswith("UniversalSentenceEncoder")]
    assert views[len(GERMAN):] == [None] * len(ENGLISH)  # English: the full combination


def test_the_parse_says_the_language(model: Model) -> None:
    english, german, digits = model.parse_batch(["wake me up at six", "weck mich um sechs Uhr", "12345"])
    assert english["language"]["name"] == "en" and german["language"]["name"] == "de"
    assert digits["language"] == {"name": "unknown", "confidence": 0.0}
