"""LanguageIdentifier: the language each message is written in, for whoever reads it.

It writes ``message.language`` (``IdentifiedLanguage``: ``name``, an ISO 639-1 code of
``contract.languages.LANGUAGES`` or ``"unknown"``, and ``confidence`` from 0 to 1), which the
parse result shows as ``"language": {"name": ..., "confidence": ...}``. It needs only the text
(no tokens) and adds no features: a component after it reads the field, e.g. the intent combiner
to stop trusting an English-only encoder on a German message.

The model is py3langid's (BSD-3-Clause; a naive Bayes over byte n-grams of 97 languages, shipped in
its wheel as an LZMA-compressed ``.npz``, no pickle), chosen over lingua-language-detector and
gcld3 on xSID (BENCHMARKS.md, "Language identification"): the most accurate of the three there and
the fastest, ~40 µs a message. It is imported and loaded when the component trains or loads, once
per process (and once per set of ``languages``).

How it answers:

* a text with no letter (digits, emoji, punctuation, empty) is ``unknown``, confidence 0;
* otherwise the first ``MAX_CHARS`` characters are scored over the candidate languages
  (``languages``, or every language of the engine's table that py3langid knows: 86 of them), as
  probabilities;
* the bot's languages are preferred: the probability of the language most of the training
  messages are written in is multiplied by ``main_language_prior``, another one's by
  ``1 + (main_language_prior - 1) * its share / the main one's share`` (the training messages as
  the identifier reads them; one it never saw keeps 1), and all are normalised again. A message
  the identifier finds ambiguous between Indonesian and Malay is Indonesian for an Indonesian
  bot, Danish rather than Norwegian for a Danish one;
* the best language is the answer, its probability the confidence; below ``threshold`` the name
  is ``unknown`` (the confidence stays that of the best guess).

One or two words are often ``unknown``: py3langid's probabilities are tempered by the text's
length, so a word rarely reaches the threshold (BENCHMARKS.md has the shares).

Training learns only the share of the training messages in each identified language
(``training_languages_``, persisted as JSON); :meth:`LanguageIdentifier.main_languages` says
which languages the bot was trained in.
"""

from __future__ import annotations

import copy
import json
import math
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.contract.component import Component, ComponentConfig, param
from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.languages import ANY, LANGUAGES
from nlu_engine.contract.message import UNKNOWN_LANGUAGE, IdentifiedLanguage, Message
from nlu_engine.contract.training_data import TrainingData

#: what the component provides (``requires`` of a component that reads ``message.language``)
LANGUAGE = "language"
#: the package and the versions whose model and API this module was written and measured with
PACKAGE = "py3langid"
REQUIREMENT = "py3langid>=0.4,<0.5"
STATE_FILE = "language_identifier.json"
#: only the first characters of a message are read: the time grows with the length
MAX_CHARS = 1000

_IDENTIFIERS: dict[tuple[str, ...] | None, Any] = {}
_LOCK = threading.Lock()


def _load_full() -> Any:
    """py3langid's identifier over all its languages, with probabilities (call under _LOCK)."""
    if None not in _IDENTIFIERS:
        try:
            from py3langid.langid import MODEL_FILE
            from py3langid.langid import LanguageIdentifier as Py3LangId
        except ImportError:
            raise ConfigError(
                f"LanguageIdentifier needs the package '{PACKAGE}', which is not installed; "
                f"install it with `pip install '{REQUIREMENT}'` (nlu-engine's install does)"
            ) from None
        _IDENTIFIERS[None] = Py3LangId.from_model_file(MODEL_FILE, norm_probs=True)
    return _IDENTIFIERS[None]


def identifier_for(languages: tuple[str, ...]) -> Any:
    """The package's identifier restricted to ``languages`` (every language of the engine's table
    it knows when empty), built once per process and set; a code it does not know is a
    ConfigError naming it."""
    with _LOCK:
        full = _load_full()
        if languages not in _IDENTIFIERS:
            known = set(full.labels)
            unknown = [code for code in languages if code not in known]
            if unknown:
                raise ConfigError(
                    f"LanguageIdentifier: {PACKAGE} does not know the language(s) "
                    f"{', '.join(unknown)} given in 'languages'; it knows "
                    f"{', '.join(sorted(code for code in LANGUAGES if code in known))}"
                )
            restricted = copy.copy(full)  # shares the model's arrays; set_languages replaces them
            restricted.set_languages(sorted(set(languages) or set(LANGUAGES) & known))
            # set_languages keeps the columns in Fortran order, where scoring gathers rows: in C
            # order a message scores in about two thirds of the time
            restricted.nb_ptc = np.ascontiguousarray(restricted.nb_ptc)
            _IDENTIFIERS[languages] = restricted
        return _IDENTIFIERS[languages]


def identifier_probabilities(identifier: Any, text: str) -> np.ndarray:
    """The probability of each of ``identifier.nb_classes`` for ``text`` (a label the model keeps
    twice, Serbian in two scripts, has all of its probability in its first column).

    This is the one scoring step py3langid's ``classify`` and ``rank`` share (0.4's
    ``_decide``); ``rank`` would give the same numbers as a sorted list, at a third more time a
    message. ``tests/featurizers/test_language_identifier.py`` checks the two agree, so a new
    py3langid that changes it fails there.
    """
    return identifier._decide(text)


def has_letters(text: str) -> bool:
    return any(character.isalpha() for character in text)


class LanguageIdentifier(Component):
    """Writes ``message.language``: the message's language and the identifier's confidence."""

    provides = (LANGUAGE,)
    requires = ()
    processes_training_data = True  # a later component may read the training messages' language

    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        #: the languages to choose among, ISO 639-1 codes (empty: every language of the engine's
        #: table the package knows)
        languages: list[str] = param([])
        #: below this confidence the answer is "unknown"
        threshold: float = param(0.2, low=0.0, high=1.0)
        #: a language that makes at least this share of the training messages is one of the bot's
        #: (``main_languages``)
        main_language_share: float = param(0.1, low=0.0, high=1.0)
        #: the probability of the bot's main language is multiplied by this, another's that the
        #: training messages are written in by 1 + (this - 1) * its share / the main one's share
        #: (1: no preference); 5 was chosen on xSID's valid.md (BENCHMARKS.md)
        main_language_prior: float = param(5.0, low=1.0, high=1000.0)

        def validate(self) -> None:
            super().validate()
            wrong = [code for code in self.languages if code not in LANGUAGES or code == ANY]
            if wrong:
                raise ConfigError(
                    f"parameter 'languages': {', '.join(map(repr, wrong))} is not an ISO 639-1 code "
                    "the engine knows; use codes such as en, de, zh (contract/languages.py)"
                )

    config: Config

    def _identifier(self) -> Any:
        found = getattr(self, "_package", None)
        if found is None:
            found = self._package = identifier_for(tuple(self.config.languages))
        return found

    def main_languages(self) -> tuple[str, ...]:
        """The languages the bot was trained in: those that make at least ``main_language_share``
        of the training messages, commonest first."""
        shares = getattr(self, "training_languages_", None)
        if shares is None:
            raise RuntimeError(f"{self.component_name()} must be trained or loaded before use.")
        return tuple(code for code, share in shares.items()
                     if share > 0 and share >= self.config.main_language_share)

    def train(self, data: TrainingData) -> None:
        answers = [self._identify(m.text, None, threshold=0.0) for m in data.messages]
        counts = Counter(answer.name for answer in answers if answer.name != UNKNOWN_LANGUAGE)
        total = max(len(answers), 1)
        self.training_languages_: dict[str, float] = {
            code: round(n / total, 6) for code, n in counts.most_common()}

    def process(self, messages: list[Message]) -> None:
        weights = self._prior_weights()
        for message in messages:
            message.language = self._identify(message.text, weights)

    def identify(self, text: str) -> IdentifiedLanguage:
        """The language of one text, as ``process`` writes it."""
        return self._identify(text, self._prior_weights())

    def _prior_weights(self) -> np.ndarray | None:
        """Per language of the identifier, ``1 + (main_language_prior - 1) * share / top share``
        (``share``: of the training messages): the bot's main language weighs
        ``main_language_prior``, one it never saw 1. None when that changes nothing."""
        shares = self.training_languages_
        factor = self.config.main_language_prior
        if factor == 1.0 or not shares:
            return None
        top = max(shares.values())
        classes = self._identifier().nb_classes
        return np.array([1.0 + (factor - 1.0) * shares.get(code, 0.0) / top for code in classes],
                        dtype=np.float32)

    def _identify(self, text: str, weights: np.ndarray | None,
                  threshold: float | None = None) -> IdentifiedLanguage:
        text = text[:MAX_CHARS] if isinstance(text, str) else ""
        if not has_letters(text):
            return IdentifiedLanguage(UNKNOWN_LANGUAGE, 0.0)
        identifier = self._identifier()
        probabilities = identifier_probabilities(identifier, text)
        if weights is not None:
            probabilities *= weights  # a new array each call: changed in place
        best = int(probabilities.argmax())
        total = float(probabilities.sum())
        confidence = float(probabilities[best]) / total if total > 0 else 0.0
        if not math.isfinite(confidence):  # no number the parse result could not carry
            return IdentifiedLanguage(UNKNOWN_LANGUAGE, 0.0)
        confidence = min(max(confidence, 0.0), 1.0)
        if confidence < (self.config.threshold if threshold is None else threshold):
            return IdentifiedLanguage(UNKNOWN_LANGUAGE, confidence)
        return IdentifiedLanguage(str(identifier.nb_classes[best]), confidence)

    def persist(self, directory: Path) -> None:
        from importlib.metadata import version

        state = {"training_languages": self.training_languages_, "package": PACKAGE,
                 "package_version": version(PACKAGE)}
        (directory / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, config: ComponentConfig) -> LanguageIdentifier:
        component = cls(config)
        file = directory / STATE_FILE
        try:
            shares = json.loads(file.read_text(encoding="utf-8"))["training_languages"]
            component.training_languages_ = {str(code): float(share)
                                             for code, share in shares.items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
            raise ArchiveError(f"{file}: not a language identifier's state ({error})") from None
        component._identifier()  # the model loads with the archive, not on the first message
        return component

