"""Which of the combiner's members a message's language lets it trust (``combiner.py``).

A member of the intent combination reads features: a sentence head its encoder's vector, DIET
every featurizer before it, the n-gram head the training data's own words. An encoder reads the
languages its rows of the language table name (``contract.languages``: all-MiniLM-L6-v2 English,
the Universal Sentence Encoder sixteen). Within the bot's own languages every member's weight
was fitted on held-out examples of those languages, so every member is trusted. On a message in
another language, a member whose encoders do not read that language sees noise, and an English
bot's MiniLM head would outvote the multilingual encoder's on a German message.

So each member knows the languages it can read (:func:`member_languages`): a sentence head its
encoder's (None: every language, for an encoder no row names); a member that reads features learnt
from the training data alone (the n-gram head, DIET over the sparse counts) none beyond the
bot's own, since its vocabulary is the training data's: on xSID, the n-gram head ranked 28-36 % of
another language's messages right, and without it the multilingual encoder's head alone ranked 3
to 6 points more of them right than the two together. For each set of members some language leaves trusted the
combiner fits a **view**: the same combination (weights by likelihood, the sign test, the one
calibration, the in-scope score on the view's own sentence vectors) over those members only, on
the same held-out predictions. At parse, a message the language identifier placed in a language
outside the bot's picks the view of that language's trusted members; a message in the bot's
language, or whose language is unknown, the full combination. A language no member's encoder
reads leaves no member: every intent is as likely, and the fallback answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from nlu_engine.classifiers.calibration import Calibration
from nlu_engine.contract.component import Component, DenseFeaturizer, Featurizer, IntentClassifier
from nlu_engine.contract.languages import ANY, LANGUAGES, base_language, close_languages
from nlu_engine.contract.message import Message

#: a language identified on at least this many training examples (and this share of them) is
#: one of the bot's own: every member was weighed on it
MIN_TRAINED_EXAMPLES = 10
MIN_TRAINED_SHARE = 0.03
#: a language code no encoder names (every language the table's encoders leave out)
OTHER = "other"
#: the identifier's confidence that sends a message no member reads to the fallback; below it
#: the whole combination ranks it (the bot's own messages the identifier took for a language
#: no encoder reads were guesses below 0.8 on xSID)
SURE_TO_LEAVE_NOTHING = 0.9


@dataclass
class View:
    """The combination over some members: their indices in the combiner's list, their weights
    and the calibration fitted on what they predicted held out."""

    members: tuple[int, ...]
    weights: list[float] = field(default_factory=list)
    calibration: Calibration = field(default_factory=Calibration)
    #: the sentence heads' origins among the members (the in-scope score's vectors)
    origins: list[str] = field(default_factory=list)


def encoder_languages_before(before: Sequence[Component]) -> dict[str, frozenset[str] | None]:
    """Each dense featurizer's origin -> the languages its encoder reads (None: every one)."""
    return {c.origin(): c.languages() for c in before if isinstance(c, DenseFeaturizer)}


def member_languages(before: Sequence[Component]) -> dict[str, list[str] | None]:
    """The languages each possible member reads beyond the bot's own, by member name: a
    sentence head by its featurizer's origin (its encoder's languages; None: every language), a
    recorded scorer by its scorer name (the languages every dense featurizer it reads knows;
    none when it reads a sparse featurizer's counts, learnt from the training data). A member
    not named here (the n-gram head) reads none."""
    encoders = encoder_languages_before(before)
    found: dict[str, list[str] | None] = {
        origin: sorted(languages) if languages is not None else None
        for origin, languages in encoders.items()}
    for i, component in enumerate(before):
        if not isinstance(component, IntentClassifier):
            continue
        read = [c for c in before[:i] if isinstance(c, Featurizer)
                and component.reads_features_from(c.origin())]
        if any(not isinstance(c, DenseFeaturizer) for c in read):
            found[component.scorer_name()] = []
            continue
        known = [languages for c in read if (languages := encoders[c.origin()]) is not None]
        found[component.scorer_name()] = sorted(frozenset.intersection(*known)) if known else None
    return found


def trained_languages(language: str, examples: Sequence[Message]) -> list[str]:
    """The bot's own languages: the config's, and each one the identifier found on enough
    training examples (a bot with some German examples beside its English ones)."""
    counts = Counter(found for m in examples if (found := identified(m)) is not None)
    floor = max(MIN_TRAINED_EXAMPLES, MIN_TRAINED_SHARE * len(examples))
    own = {base_language(language)} if language != ANY else set()
    return sorted(own | {code for code, n in counts.items() if n >= floor})


def identified(message: Message) -> str | None:
    """The message's language as the identifier wrote it (its base code), or None when it was
    not identified or is unknown."""
    language = getattr(message, "language", None)
    name = getattr(language, "name", None) if language is not None else None
    if not name or name == "unknown":
        return None
    return base_language(str(name))


def trusted(languages: dict[str, list[str] | None], names: Sequence[str], code: str) -> tuple[int, ...]:
    """The indices of the members (``names``) that read language ``code``, one outside the
    bot's (a member ``languages`` does not name reads none)."""
    return tuple(i for i, name in enumerate(names)
                 if name in languages and ((read := languages[name]) is None or code in read))


def member_sets(languages: dict[str, list[str] | None], names: Sequence[str],
                own: Sequence[str]) -> list[tuple[int, ...]]:
    """Every set of members a language outside ``own`` leaves trusted, when it is not all of
    them: one per distinct set, over the table's languages and one no encoder names."""
    everyone = tuple(range(len(names)))
    codes = [code for code in LANGUAGES if code != ANY and code not in own] + [OTHER]
    sets = {trusted(languages, names, code) for code in codes}
    return sorted(s for s in sets if s != everyone)


def view_of(message: Message, languages: dict[str, list[str] | None], names: Sequence[str],
            own: Sequence[str], views: Sequence[View]) -> View | None:
    """The view a message takes: None (the full combination) when its language is unknown, one
    of the bot's or close to one (``contract.languages.CLOSE``: an Indonesian request the
    identifier takes for Malay) or read by every member; else the view of its language's trusted
    members, and a view of none (the fallback) only when the identifier is sure
    (``SURE_TO_LEAVE_NOTHING``): an unsure guess at a language no member reads is more often one
    of the bot's own messages than a foreign one."""
    code = identified(message)
    if code is None or not views or any(code in close_languages(o) for o in own):
        return None
    members = trusted(languages, names, code if code in LANGUAGES else OTHER)
    if not members and float(getattr(message.language, "confidence", 1.0)) < SURE_TO_LEAVE_NOTHING:
        return None
    return next((view for view in views if view.members == members), None)
