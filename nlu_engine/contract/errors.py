"""Errors a user can act on: one line naming the file, component or field and what to do."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable

#: a log level between info and warning for what the user should know but need not fix (the
#: command line shows it as ``notice: ...``)
NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")


# what would break a message's line: the user's own text quoted in it (an intent name holding a
# line break) is shown with these escaped, so a message stays one line whatever it quotes
_LINE_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r", "\x0b": "\\x0b", "\x0c": "\\x0c",
                              "\x1c": "\\x1c", "\x1d": "\\x1d", "\x1e": "\\x1e", "\x85": "\\x85",
                              "\u2028": "\\u2028", "\u2029": "\\u2029"})


class NLUError(Exception):
    """A problem in the user's input (data, config, archive, request): shown as one line, no traceback."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(str(message).translate(_LINE_BREAKS), *args)


class DataError(NLUError):
    """Training data that cannot be read."""


class ConfigError(NLUError):
    """A pipeline config that cannot be built."""


class ArchiveError(NLUError):
    """A model archive that cannot be loaded safely."""


class ArchiveMemberError(ArchiveError):
    """A file of an extracted archive that is refused (``contract.npz``): the message names the
    component's folder, the file and the array; the archive's loader adds the archive."""


def closest(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or '' when nothing is close."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


def yaml_problem(error: Exception, content: str | None = None) -> tuple[str, str]:
    """``(":line" or "", problem)`` of a PyYAML error, both fit for a one-line message.

    A syntax error has a mark; a character YAML refuses (a control character) has only a position
    in ``content``, from which the line is counted. The problem never spans lines."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    position = getattr(error, "position", None)
    line = ""
    if mark is not None:
        line = f":{mark.line + 1}"
    elif content is not None and isinstance(position, int):
        line = f":{content.count(chr(10), 0, position) + 1}"
    problem = getattr(error, "problem", None) or getattr(error, "context", None)
    if not problem:
        problem = (str(error).splitlines() or ["syntax error"])[0]
    return line, " ".join(str(problem).split()) or "syntax error"
