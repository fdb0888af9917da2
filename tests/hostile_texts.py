"""Text that breaks tokenizers (issue 43): combining marks, zero-width joiners, emoji sequences,
right-to-left text and its controls, NUL and other control characters, form feeds and other
characters Python counts as line breaks, mixed scripts, Chinese with Latin words.

Every tokenizer, the sentence encoder and ``/model/parse`` must take each of them without
crashing, with offsets that index the text exactly (``text[start:end] == token.text``).
"""

from __future__ import annotations

HOSTILE_TEXTS = [
    "cafe\u0301 na\u0308ive re\u0301sume\u0301",  # decomposed accents (combining marks)
    "\u0301\u0308 a text that starts with combining marks",
    "family 👨\u200d👩\u200d👧\u200d👦, thumbs 👍🏽, flag 🏳️\u200d🌈, 🇩🇪🇫🇷 in a row",
    "zero\u200bwidth\u200cnon\u200djoiner",
    "\u200d",
    "مرحبا بالعالم hello עברית שלום",
    "\u202eevil\u202c right-to-left override \u200f\u200e marks",
    "nul\x00byte and \x01\x02\x1f controls",
    "form\x0cfeed\x0bvtab\x1cfs\x1dgs\x1ers\x85nel\u2028ls\u2029ps",
    "tab\tseparated\r\nwindows line",
    "Ελληνικά и кириллица mixed 日本語 テキスト 한국어",
    "我想去Berlin看看iPhone 15 Pro怎么样",
    "播放Taylor Swift的Love Story",
    "ＦＵＬＬＷＩＤＴＨ　ｔｅｘｔ　１２３",
    "\ufeffa byte order mark first",
    "a\ud800lone surrogate",
    "🙂",
    "\x00",
    "\x0c",
    "ﷺ ﷽ long ligatures",
    "İstanbul ǅemal ß STRASSE",
]
