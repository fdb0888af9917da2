"""Generated input for the property-based tests of the readers (hypothesis strategies).

``training_data()`` draws well-formed NLU data (examples with entities, roles, groups and synonym
values, synonyms, regexes, lookup tables, responses) from an alphabet chosen to hit the readers'
syntax: brackets, braces, colons, quotes, ``#``/``-``/``*`` item marks, slashes, backslashes,
form feeds and other characters Python counts as line breaks, combining marks, right-to-left and
CJK text, emoji. ``mutated(text)`` breaks a valid document a few characters at a time, so the
readers see input that is almost right, which is where their error paths are.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from nlu_engine.contract.errors import NLUError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.annotations import synonyms_from_entities

# syntax of the three formats, whitespace Python's str.splitlines() breaks on, and other scripts
SYNTAX = "[](){}:,\"'/\\#-*+|>&!%@`<=?~^$.;"
ODD_SPACE = "\t\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\u00a0\u200b\u200d"
SCRIPTS = "aeznqABZ019 éüßñ中文字東京🙂👍🏽\u0301\u05e9\u05dc\u0627\u0644"
ALPHABET = SYNTAX + ODD_SPACE + SCRIPTS
LETTERS = "abcdefghijklmnopqrstuvwxyz_"

fragments = st.text(alphabet=ALPHABET, min_size=1, max_size=12)
# the readers strip every item (a synonym, pattern, element or response), as Rasa's do
words = fragments.map(str.strip).filter(bool)
names = st.text(alphabet=LETTERS + "0123456789 éü中-.:@", min_size=1, max_size=10).map(str.strip).filter(bool)
plain_names = st.text(alphabet=LETTERS, min_size=1, max_size=8)


def _is_example(drawn: tuple[str, list[dict[str, Any]]]) -> bool:
    """The readers strip every example: one with blanks around it (in Python's sense) is not
    what a reader can give back."""
    return bool(drawn[0]) and drawn[0].strip() == drawn[0]


@st.composite
def _examples(draw: Any) -> tuple[str, list[dict[str, Any]]]:
    """An example's text and its entities (offsets computed from the drawn pieces)."""
    pieces = draw(st.lists(st.one_of(fragments.map(lambda w: ("text", w)),
                                     st.tuples(fragments, names, st.none() | names, st.none() | names,
                                               st.none() | words).map(lambda e: ("entity", e))),
                           min_size=1, max_size=5))
    text, entities = "", []
    for kind, piece in pieces:
        if kind == "text":
            text += piece
            continue
        surface, entity, role, group, value = piece
        start = len(text)
        text += surface
        annotation: dict[str, Any] = {"entity": entity, "start": start, "end": len(text),
                                      "value": surface if value is None else value}
        annotation.update({k: v for k, v in (("role", role), ("group", group)) if v is not None})
        entities.append(annotation)
    return text, entities


examples = _examples().filter(_is_example)


@st.composite
def training_data(draw: Any, responses: bool = True) -> TrainingData:
    """Well-formed NLU data of a few intents (plain or retrieval), synonyms, regexes, lookups."""
    data = TrainingData()
    for intent in draw(st.lists(st.one_of(names, st.tuples(plain_names, plain_names).map("/".join)),
                                min_size=1, max_size=3, unique=True)):
        for text, entities in draw(st.lists(examples, min_size=1, max_size=3)):
            base, key = (intent.split("/")[0], intent) if "/" in intent else (intent, None)
            data.messages.append(Message(text, intent=base, entities=entities, intent_response_key=key))
            data.synonyms.update(synonyms_from_entities(text, entities))  # as the readers do
    for surface, value in draw(st.dictionaries(words, words, max_size=3)).items():
        if surface != value:
            data.synonyms[surface] = value
    data.regex_features = [{"name": n, "pattern": p}
                           for n, p in draw(st.lists(st.tuples(names, words), max_size=3))]
    tables = draw(st.dictionaries(names, st.lists(words, min_size=1, max_size=3), max_size=2))
    data.lookup_tables = [{"name": n, "elements": e} for n, e in tables.items()]
    if responses:
        data.responses = draw(st.dictionaries(
            plain_names.map(lambda n: f"utter_{n}"),
            st.lists(st.fixed_dictionaries({"text": words}), min_size=1, max_size=2), max_size=2))
    return data


@st.composite
def mutated(draw: Any, text: str) -> str:
    """``text`` with a few characters deleted, inserted or replaced (from the syntax alphabet)."""
    for _ in range(draw(st.integers(1, 6))):
        position = draw(st.integers(0, len(text)))
        insert = draw(st.text(alphabet=ALPHABET + "\n ", min_size=0, max_size=4))
        cut = draw(st.integers(0, 4))
        text = text[:position] + insert + text[position + cut:]
    return text


def assert_one_line(error: NLUError, source: str) -> None:
    """A reader's refusal: one line that names the file it read."""
    message = str(error)
    assert "\n" not in message and "\r" not in message, message
    assert source in message, message


def summary(data: TrainingData, responses: bool = False) -> dict[str, Any]:
    """What a round trip must keep: examples (as a multiset, since writers group them by intent),
    entities, synonyms, regexes, lookups (and responses where the format carries them)."""
    kept: dict[str, Any] = {
        "examples": sorted(
            (m.text, m.intent or "", m.intent_response_key or "",
             sorted(sorted((k, str(v)) for k, v in e.items()) for e in m.entities))
            for m in data.messages),
        "synonyms": dict(sorted(data.synonyms.items())),
        "regexes": sorted((r["name"], r["pattern"]) for r in data.regex_features),
        "lookups": sorted((t["name"], list(t["elements"])) for t in data.lookup_tables),
    }
    if responses:
        kept["responses"] = data.responses
    return kept
