"""The languages the engine knows, in one table: one row per language.

``language:`` in config.yml is an ISO 639-1 code (``en``, ``ja``), optionally with a region
(``zh-TW``, ``pt_BR``), or ``xx`` for "any language" (spaCy's code for it). A code not in
:data:`LANGUAGES` is a one-line ConfigError listing the known ones (:func:`check_language`).

A row says everything the engine needs of a language:

* its **scripts** (what ``nlu-engine data validate`` expects the training data to be written in);
* the **tokenizer** for a language whose writing does not put spaces between words: where a
  config's pipeline uses WhitespaceTokenizer, config validation puts it in its place
  (``nlu_engine.assembly.config``). A language that needs one the engine does not build (Khmer,
  Lao, Burmese, Tibetan) keeps WhitespaceTokenizer with a notice;
* the pre-trained **encoders** that read it (:data:`USE`, :data:`MINILM`: the names the dense
  featurizers declare themselves by, ``DenseFeaturizer.encoder``). An encoder named in no row
  is taken to read every language. This is the one place an encoder's languages are written:
  the combiner trusts an encoder's members on a message only in the languages its row lists
  (or the bot's own);
* **spaCy's** trained pipeline for it (SpacyNLP's default ``model``);
* **Duckling's** locale, Rasa's ``<code>_<CODE>`` (:func:`duckling_locale`: Duckling takes an
  unknown region as the language's default).

Adding a language, a tokenizer or an encoder's languages is a row or a cell here.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from nlu_engine.contract.errors import ConfigError

#: the code for "any language": nothing is chosen for it, WhitespaceTokenizer stays
ANY = "xx"


@dataclass(frozen=True)
class Language:
    """One row: the language's name, its scripts and what splits it into words."""

    name: str
    scripts: tuple[str, ...] = ("Latin",)
    #: the registered tokenizer that replaces WhitespaceTokenizer; None: whitespace splits words
    tokenizer: str | None = None
    #: the setup.py extra that installs that tokenizer's package
    extra: str | None = None
    #: words are not separated by spaces (with no tokenizer: a notice that entities must be
    #: whole space-separated runs)
    unspaced: bool = False
    #: the pre-trained encoders that read the language (their ``encoder`` names)
    encoders: tuple[str, ...] = ()
    #: spaCy's trained pipeline for the language (SpacyNLP's default ``model``)
    spacy_model: str | None = None


#: Universal Sentence Encoder, multilingual v3 (``featurizers/dense/sentence_encoder.py``)
USE = "universal-sentence-encoder-multilingual-3"
#: all-MiniLM-L6-v2 (``featurizers/dense/language_model.py``, diet.yml's English-only encoder)
MINILM = "all-MiniLM-L6-v2"
#: the encoders of the languages USE was trained on (its model card) and of English
_USE = (USE,)
_EN = (USE, MINILM)


def _latin(*names: tuple[str, str]) -> dict[str, Language]:
    return {code: Language(name) for code, name in names}


LANGUAGES: dict[str, Language] = {
    # words split by a segmenter (a dictionary package, an optional extra)
    "zh": Language("Chinese", ("Han",), "JiebaTokenizer", "zh", unspaced=True, encoders=_USE,
                   spacy_model="zh_core_web_md"),
    "ja": Language("Japanese", ("Kana", "Han"), "SudachiTokenizer", "ja", unspaced=True,
                   encoders=_USE, spacy_model="ja_core_news_md"),
    "ko": Language("Korean", ("Hangul",), "KiwiTokenizer", "ko", encoders=_USE,
                   spacy_model="ko_core_news_md"),
    "th": Language("Thai", ("Thai",), "PyThaiNLPTokenizer", "th", unspaced=True, encoders=_USE),
    # unspaced, with no segmenter built in
    "km": Language("Khmer", ("Khmer",), unspaced=True),
    "lo": Language("Lao", ("Lao",), unspaced=True),
    "my": Language("Burmese", ("Myanmar",), unspaced=True),
    "bo": Language("Tibetan", ("Tibetan",), unspaced=True),
    # spaced, not in the Latin script
    "ru": Language("Russian", ("Cyrillic",), encoders=_USE, spacy_model="ru_core_news_md"),
    **{code: Language(name, ("Cyrillic",)) for code, name in (
        ("uk", "Ukrainian"), ("bg", "Bulgarian"), ("be", "Belarusian"),
        ("mk", "Macedonian"), ("kk", "Kazakh"), ("ky", "Kyrgyz"), ("mn", "Mongolian"),
        ("tg", "Tajik"))},
    "sr": Language("Serbian", ("Cyrillic", "Latin")),
    "ar": Language("Arabic", ("Arabic",), encoders=_USE),
    **{code: Language(name, ("Arabic",)) for code, name in (
        ("fa", "Persian"), ("ur", "Urdu"), ("ps", "Pashto"), ("ku", "Kurdish"))},
    **{code: Language(name, ("Devanagari",)) for code, name in (
        ("hi", "Hindi"), ("mr", "Marathi"), ("ne", "Nepali"))},
    "el": Language("Greek", ("Greek",)),
    "he": Language("Hebrew", ("Hebrew",)),
    "yi": Language("Yiddish", ("Hebrew",)),
    "bn": Language("Bengali", ("Bengali",)),
    "pa": Language("Punjabi", ("Gurmukhi",)),
    "gu": Language("Gujarati", ("Gujarati",)),
    "ta": Language("Tamil", ("Tamil",)),
    "te": Language("Telugu", ("Telugu",)),
    "kn": Language("Kannada", ("Kannada",)),
    "ml": Language("Malayalam", ("Malayalam",)),
    "si": Language("Sinhala", ("Sinhala",)),
    "ka": Language("Georgian", ("Georgian",)),
    "hy": Language("Armenian", ("Armenian",)),
    "am": Language("Amharic", ("Ethiopic",)),
    # spaced, in the Latin script
    "en": Language("English", encoders=_EN, spacy_model="en_core_web_md"),
    **{code: Language(name, encoders=_USE, spacy_model=f"{code}_core_news_md") for code, name in (
        ("de", "German"), ("fr", "French"), ("es", "Spanish"), ("it", "Italian"),
        ("nl", "Dutch"), ("pt", "Portuguese"), ("pl", "Polish"))},
    "tr": Language("Turkish", encoders=_USE),
    **_latin(("sv", "Swedish"), ("da", "Danish"), ("no", "Norwegian"),
             ("nb", "Norwegian Bokmål"), ("nn", "Norwegian Nynorsk"), ("fi", "Finnish"),
             ("is", "Icelandic"), ("cs", "Czech"), ("sk", "Slovak"), ("sl", "Slovenian"),
             ("hr", "Croatian"), ("bs", "Bosnian"), ("ro", "Romanian"), ("hu", "Hungarian"),
             ("et", "Estonian"), ("lv", "Latvian"), ("lt", "Lithuanian"), ("ca", "Catalan"),
             ("gl", "Galician"), ("eu", "Basque"), ("ga", "Irish"), ("cy", "Welsh"),
             ("mt", "Maltese"), ("sq", "Albanian"), ("lb", "Luxembourgish"),
             ("af", "Afrikaans"), ("sw", "Swahili"), ("id", "Indonesian"), ("ms", "Malay"),
             ("tl", "Tagalog"), ("vi", "Vietnamese"), ("az", "Azerbaijani"), ("uz", "Uzbek"),
             ("la", "Latin"), ("eo", "Esperanto"), ("yo", "Yoruba"), ("ha", "Hausa"),
             ("zu", "Zulu"), ("xh", "Xhosa"), ("so", "Somali")),
    ANY: Language("any language", ()),
}


#: languages so close that a language identifier often takes one for the other on a short
#: message (Indonesian and Malay, the Scandinavian languages, Serbian, Croatian and Bosnian):
#: a bot in one of them counts the others as its own (``close_languages``)
CLOSE: tuple[frozenset[str], ...] = (
    frozenset({"id", "ms"}), frozenset({"da", "no", "nb", "nn"}), frozenset({"sr", "hr", "bs"}),
    frozenset({"kk", "ky"}), frozenset({"cs", "sk"}), frozenset({"nl", "af"}),
    frozenset({"ru", "uk", "be"}), frozenset({"pt", "gl"}),
)


def close_languages(language: str) -> frozenset[str]:
    """``language``'s base code and those of the languages close to it (:data:`CLOSE`)."""
    code = base_language(language)
    return frozenset({code}).union(*(group for group in CLOSE if code in group))


def base_language(language: str) -> str:
    """``zh-TW``, ``pt_BR`` -> ``zh``, ``pt``."""
    return language.replace("_", "-").split("-")[0].lower()


def check_language(language: object, where: str) -> str:
    """``language`` if the engine knows it (its base code is in :data:`LANGUAGES`); a one-line
    ConfigError listing the known codes otherwise."""
    if not isinstance(language, str) or base_language(language) not in LANGUAGES:
        shown = language if isinstance(language, str) else repr(language)
        known = ", ".join(sorted(code for code in LANGUAGES if code != ANY))
        raise ConfigError(
            f"{where}: language '{shown}' is not known; use an ISO 639-1 code (a region may "
            f"follow: zh-TW, pt-BR) among {known}, or '{ANY}' for any language"
        )
    return language


def language_of(language: str) -> Language:
    """The table's row for a checked code (``zh-TW`` -> Chinese)."""
    return LANGUAGES[base_language(language)]


def encoder_languages(encoder: str) -> frozenset[str] | None:
    """The codes of the languages whose rows name ``encoder``; None (every language) when no
    row names it."""
    codes = frozenset(code for code, row in LANGUAGES.items() if encoder in row.encoders)
    return codes or None


def duckling_locale(language: str) -> str:
    """Duckling's locale for a code, as Rasa sends it: ``<code>_<CODE>`` (``en_EN``)."""
    return f"{language}_{language.upper()}"


#: Unicode character-name prefixes -> script, for the letters :func:`script_counts` counts
_SCRIPT_PREFIXES = (
    ("CJK", "Han"), ("HIRAGANA", "Kana"), ("KATAKANA", "Kana"), ("HALFWIDTH KATAKANA", "Kana"),
    ("HANGUL", "Hangul"), ("LATIN", "Latin"), ("FULLWIDTH LATIN", "Latin"),
    ("CYRILLIC", "Cyrillic"), ("GREEK", "Greek"), ("ARABIC", "Arabic"), ("HEBREW", "Hebrew"),
    ("THAI", "Thai"), ("LAO", "Lao"), ("KHMER", "Khmer"), ("MYANMAR", "Myanmar"),
    ("TIBETAN", "Tibetan"), ("DEVANAGARI", "Devanagari"), ("BENGALI", "Bengali"),
    ("GURMUKHI", "Gurmukhi"), ("GUJARATI", "Gujarati"), ("TAMIL", "Tamil"),
    ("TELUGU", "Telugu"), ("KANNADA", "Kannada"), ("MALAYALAM", "Malayalam"),
    ("SINHALA", "Sinhala"), ("GEORGIAN", "Georgian"), ("ARMENIAN", "Armenian"),
    ("ETHIOPIC", "Ethiopic"),
)


def script_of(char: str) -> str | None:
    """The script of a letter (``"Han"``, ``"Kana"``, ``"Latin"``, ...); None for anything else."""
    if not char.isalpha():
        return None
    name = unicodedata.name(char, "")
    return next((script for prefix, script in _SCRIPT_PREFIXES if name.startswith(prefix)), None)


def script_counts(texts: Iterable[str]) -> Counter[str]:
    """How many letters of each script ``texts`` hold."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(script for script in map(script_of, text) if script)
    return counts


#: fewer letters than this in the training data say nothing about its script
MIN_LETTERS = 20
#: Han text with at least this share of kana is Japanese
KANA_SHARE = 0.1


def main_script(counts: Counter[str]) -> str | None:
    """The script most letters are written in (``"Kana"`` for Japanese, whose text mixes kana and
    Han); None below :data:`MIN_LETTERS` letters."""
    total = sum(counts.values())
    if total < MIN_LETTERS:
        return None
    japanese = counts["Kana"] + counts["Han"]
    if counts["Kana"] >= KANA_SHARE * japanese and japanese > total / 2:
        return "Kana"
    return counts.most_common(1)[0][0]


@dataclass(frozen=True)
class ScriptShare:
    """The script most of some texts' letters are written in (:func:`main_script`)."""

    script: str
    #: the letters counted
    letters: int
    #: the percent of them in that script (for Japanese, kana and Han together)
    share: float

    @property
    def written(self) -> str:
        """``Japanese (kana and Han)`` or ``the Cyrillic script``."""
        return "Japanese (kana and Han)" if self.script == "Kana" else f"the {self.script} script"


def foreign_script(language: str, counts: Counter[str]) -> ScriptShare | None:
    """The script most of the ``counts`` letters are in, when ``language`` is not written in it;
    None when it is, when ``language`` is ``xx`` or when the letters are too few to say."""
    row = language_of(language)
    script = main_script(counts)
    if not row.scripts or script is None or script in row.scripts:
        return None
    letters = sum(counts.values())
    held = counts["Kana"] + counts["Han"] if script == "Kana" else counts[script]
    return ScriptShare(script, letters, 100 * held / letters)


def script_users(script: str) -> list[str]:
    """The codes of the languages mainly written in ``script``, in the table's order."""
    return [code for code, row in LANGUAGES.items() if row.scripts[:1] == (script,)]


def script_mismatch(language: str, texts: Iterable[str]) -> str | None:
    """A one-line warning when ``texts`` are mostly written in a script ``language`` is not
    written in (Japanese text under ``language: en``); None when they fit or say too little."""
    found = foreign_script(language, script_counts(texts))
    if found is None:
        return None
    row = language_of(language)
    users = script_users(found.script)
    hint = f" (e.g. {', '.join(users[:4])})" if users else ""
    return (
        f"the training data is mostly written in {found.written} ({found.share:.0f}% of its "
        f"{found.letters} letters), but language is '{language}' ({row.name}, written in "
        f"{' and '.join(row.scripts)}); set language: in the config to the data's language{hint}"
    )
