"""The test messages' writing against the model's ``language:``, for ``nlu-engine test``.

A model tested on another language than it was trained in is scored only as far as its
multilingual sentence encoder carries it (BENCHMARKS.md, "One bot across languages"): the
report says so. What is detected is the script most letters are written in
(``contract.languages.script_counts``), one pass over the characters: two languages written in
the same script (Italian and Danish) are not told apart, and nothing is guessed among them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nlu_engine.contract.languages import (
    LANGUAGES,
    foreign_script,
    language_of,
    main_script,
    script_counts,
    script_users,
)


def compare_scripts(model_language: str, texts: Iterable[str]) -> dict[str, Any]:
    """``summary.json``'s ``test_language``: the model's language, the letters counted, each
    script's share of them, the main script and ``notice``, a line for the user when the test
    data is mostly written in a script the model's language is not (else None)."""
    counts = script_counts(texts)
    letters = sum(counts.values())
    found = foreign_script(model_language, counts)
    notice = None
    if found is not None:
        row = language_of(model_language)
        users = script_users(found.script)
        # a script only one known language is written in names it (Hangul: Korean)
        named = f"{LANGUAGES[users[0]].name}, " if len(users) == 1 and found.script != "Kana" else ""
        notice = (
            f"the test data is mostly in {found.written} ({named}{found.share:.0f}% of its "
            f"{found.letters} letters), the model was trained with language: {model_language} "
            f"({row.name}, written in {' and '.join(row.scripts)}); its scores measure the model "
            "on a language it was not trained in"
        )
    return {
        "model_language": model_language,
        "letters": letters,
        "scripts": {script: round(n / letters, 4) for script, n in counts.most_common()},
        "main_script": main_script(counts),
        "notice": notice,
    }
