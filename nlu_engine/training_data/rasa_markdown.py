"""Reader for Rasa 1.x Markdown NLU data (no writer: the format is deprecated).

    ## intent:greet
    - hey
    - I live in [Berlin](city)
    ## synonym:New York
    - NYC
    ## regex:zipcode
    - [0-9]{5}
    ## lookup:banks
    - JPMC
    ## lookup:cities
    data/cities.txt          <- a file with one element a line

Items may start with ``-``, ``*`` or ``+`` and be indented; ``<!-- ... -->`` comments (also over
several lines) are ignored, as are other non-item lines and, as Rasa 1.x did, items before the
first section (a table of contents).

Rasa 1.x also kept the responses of retrieval intents in Markdown, a file of its own, which
``parse_markdown_responses`` reads (``* faq/ask_name`` is the response ``utter_faq/ask_name``)::

    ## ask name
    * faq/ask_name
      - I'm a bot.
"""

from __future__ import annotations

import re
from pathlib import Path

from nlu_engine.contract.errors import DataError, closest
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.annotations import parse_annotated, synonyms_from_entities

SECTIONS = ("intent", "synonym", "regex", "lookup")

_COMMENT = re.compile(r"<!--[\s\S]*?--!*>")
_HEADER = re.compile(r"##\s*(?P<section>[^:]+?)\s*:\s*(?P<title>.+?)\s*$")
_ITEM = re.compile(r"[-*+]\s*(?P<item>.*)$")
# Cheap test for "this file holds Rasa Markdown NLU data".
SECTION_HEADER = re.compile(r"^\s*##\s*(intent|synonym|regex|lookup)\s*:", re.MULTILINE)
# Rasa 1.x's test for response Markdown: a "##" line, a "* intent/key" line, a "- text" line.
RESPONSES_MARKER = re.compile(r"##\s*.*\n\*[^:]*/.*\n\s*-.*")
# A step of Rasa 1.x Markdown stories ("  - utter_greet"): such a file is stories, not responses.
STORY_ACTION = re.compile(r"^\s*-\s*(?:utter|respond|action)_\w*\s*$", re.MULTILINE)


def parse_rasa_markdown(
    content: str, source: str = "<markdown>", base_dir: Path | None = None
) -> TrainingData:
    """Parse Rasa Markdown text; ``source`` names it in errors."""
    # Blank out comments but keep their line breaks so line numbers stay right.
    content = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), content)
    data = TrainingData()
    section: str | None = None
    title = ""
    intent, response_key = "", None
    lookups: dict[str, list[str]] = {}
    for number, raw in enumerate(content.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        where = f"{source}:{number}"
        header = _HEADER.match(line)
        if header:
            section, title = header.group("section").lower(), header.group("title")
            if section not in SECTIONS:
                raise DataError(
                    f"{where}: unknown section '## {header.group('section')}:'"
                    f"{closest(section, SECTIONS)}; use one of "
                    + ", ".join(f"'## {s}:'" for s in SECTIONS)
                )
            if section == "lookup":
                lookups.setdefault(title, [])
            if section == "intent":  # a retrieval intent "faq/ask_name" is intent "faq"
                intent, response_key = split_retrieval_intent(title, where)
            continue
        item = _ITEM.match(line)
        if item is None:
            if section == "lookup":  # a file with the table's elements
                lookups[title].extend(read_lookup_file(line, base_dir, where))
            continue
        text = item.group("item").strip()
        if not text:
            continue
        if section is None:  # a table of contents or other text before the first section
            continue
        if section == "intent":
            plain, entities = parse_annotated(text, where)
            data.messages.append(
                Message(plain, intent=intent, entities=entities, intent_response_key=response_key)
            )
            data.synonyms.update(synonyms_from_entities(plain, entities))
        elif section == "synonym":
            data.synonyms[text] = title
        elif section == "regex":
            data.regex_features.append({"name": title, "pattern": checked_pattern(text, title, where)})
        else:
            lookups[title].append(text)
    data.lookup_tables = [{"name": n, "elements": e} for n, e in lookups.items()]
    return data


def parse_markdown_responses(content: str, source: str = "<markdown>") -> TrainingData:
    """The responses of a Rasa 1.x response Markdown file, read as Rasa 1.x read them.

    A ``#`` line starts a block, ``* faq/ask_name`` names its retrieval intent, ``- text`` lines
    are its responses (``\\n`` in them is a line break). Other lines are skipped, each named in
    ``load_warnings``, as Rasa 1.x skipped them with a warning.
    """
    content = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), content)
    data = TrainingData()
    key: str | None = None
    for number, raw in enumerate(content.splitlines(), start=1):
        line = raw.strip()
        if line.startswith("#"):
            key = None
        elif line.startswith("*"):
            name = line[1:].strip()
            key = name if name.startswith("utter_") else f"utter_{name}"
            data.responses.setdefault(key, [])
        elif line.startswith("-") and key is not None:
            data.responses[key].append({"text": line[1:].strip().replace("\\n", "\n")})
        elif line:
            data.load_warnings.append(
                f"{source}:{number}: skipped {line[:60]!r}: a response is one '- text' line "
                "under a '* intent/key' line (write a line break as \\n)"
            )
    data.responses = {k: v for k, v in data.responses.items() if v}
    return data


def split_retrieval_intent(name: str, where: str) -> tuple[str, str | None]:
    """``(intent, intent_response_key)`` of an intent name, as Rasa stores them.

    ``"faq/ask_name"`` (a retrieval intent) gives ``("faq", "faq/ask_name")``; ``"greet"`` gives
    ``("greet", None)``. A name with an empty part or a second ``/`` is a DataError.
    """
    if "/" not in name:
        return name, None
    if name.count("/") > 1 or not all(name.split("/")):
        raise DataError(
            f"{where}: retrieval intent '{name}' must have the form "
            "'intent/response_key' ('/' is reserved for that)"
        )
    return name.split("/", 1)[0], name


def checked_pattern(pattern: str, name: str, where: str) -> str:
    """``pattern`` if it compiles; else a one-line DataError naming the place and the regex."""
    try:
        re.compile(pattern)
    except re.error as error:
        raise DataError(f"{where}: invalid regular expression {pattern!r} in regex '{name}' "
                        f"({error}); fix the pattern") from None
    return pattern


def read_lookup_file(name: str, base_dir: Path | None, where: str) -> list[str]:
    """The elements of a lookup-table file (one a line), relative to ``base_dir`` or the cwd."""
    candidates = [Path(name)] if Path(name).is_absolute() else []
    if base_dir is not None and not candidates:
        candidates.append(base_dir / name)
    candidates.append(Path(name))
    for candidate in candidates:
        if candidate.is_file():
            text = read_text_file(candidate)
            return [line.strip() for line in text.splitlines() if line.strip()]
    raise DataError(missing_lookup_file(name, where))


def missing_lookup_file(name: str, where: str) -> str:
    """The message for a lookup-table file found neither beside the data file nor in the cwd."""
    return (f"{where}: lookup table file '{name}' not found; give a path relative to the data "
            "file, or list the elements as '- element' lines")


def lookup_file(name: str, base_dir: Path | None) -> Path | None:
    """The file ``name`` names, relative to ``base_dir`` or the working folder; None if neither."""
    path = Path(name)
    candidates = [path] if path.is_absolute() else [*([base_dir / name] if base_dir else []), path]
    try:
        return next((c for c in candidates if c.is_file()), None)
    except OSError:  # a name too long or otherwise impossible as a path: an element, not a file
        return None


def expand_lookup_files(elements: list[str], base_dir: Path | None, where: str) -> list[str]:
    """A lookup table's elements with its file read (Rasa's Markdown and JSON forms; in YAML, our
    extension): when the first element names an existing file (``- data/lookups/cities.txt``),
    that file's lines take its place."""
    if not elements or lookup_file(elements[0], base_dir) is None:
        return elements
    return read_lookup_file(elements[0], base_dir, where) + elements[1:]


def read_text_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError(f"{path}: not found; check the path") from None
    except UnicodeDecodeError as error:
        raise DataError(
            f"{path}: not UTF-8 text (byte {error.start}); save the file as UTF-8"
        ) from None
