"""Read one NLU data file (and find the data files of a folder); write data back out.

``project.load_data`` takes a file, a directory (searched recursively) or a list of both, and
reads each file here. Formats may be mixed; each file's format comes from its extension, then
its content:

- ``.yml`` / ``.yaml``: Rasa 3 YAML (files without ``nlu:`` or ``responses:`` — a config or the
  rest of a domain — are skipped while scanning a directory);
- ``.md``: Rasa 1 Markdown (skipped in a directory when it has no ``## intent:``-style section),
  or Rasa 1's Markdown of retrieval responses (``## name`` / ``* faq/ask_x`` / ``- text``);
- ``.json``: Rasa JSON (skipped in a directory when it has no ``rasa_nlu_data``).

A file named explicitly must hold NLU data (or Rasa's stories and rules, which are skipped). Files
and folders whose name starts with ``.`` are not searched. ``project.read_project`` reads a whole
Rasa project: the same files, the domain's responses, and counts of what is not NLU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from nlu_engine.contract.errors import DataError
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.rasa_json import (
    ROOT_KEY,
    from_rasa_json_dict,
    load_json,
    write_rasa_json,
)
from nlu_engine.training_data.rasa_markdown import (
    RESPONSES_MARKER,
    SECTION_HEADER,
    STORY_ACTION,
    parse_markdown_responses,
    parse_rasa_markdown,
    read_text_file,
)
from nlu_engine.training_data.rasa_yaml import parse_rasa_yaml, write_rasa_yaml

DATA_EXTENSIONS = (".yml", ".yaml", ".md", ".json")
Format = Literal["yaml", "markdown", "json"]


def data_files(directory: Path) -> list[Path]:
    """Candidate data files under ``directory`` (recursive, sorted, no hidden names)."""
    return sorted(
        path
        for path in directory.rglob("*")
        if path.is_file()
        and path.suffix.lower() in DATA_EXTENSIONS
        and not any(part.startswith(".") for part in path.relative_to(directory).parts)
    )


def load_file(path: str | Path, explicit: bool = True) -> TrainingData | None:
    """The NLU data of one file.

    With ``explicit=False`` (directory scanning) a file without NLU data gives ``None``; with
    ``explicit=True`` it is a ``DataError``.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: not found; check the training data path")
    content = read_text_file(path)
    fmt = detect_format(path, content)
    data: TrainingData | None = None
    if fmt == "yaml":
        data = parse_rasa_yaml(content, source=str(path), base_dir=path.parent)
    elif fmt == "markdown":
        if SECTION_HEADER.search(content):
            data = parse_rasa_markdown(content, source=str(path), base_dir=path.parent)
        elif RESPONSES_MARKER.search(content) and not STORY_ACTION.search(content):
            data = parse_markdown_responses(content, source=str(path))
    else:
        document = load_json(content, str(path))
        if isinstance(document, dict) and ROOT_KEY in document:
            if not isinstance(document[ROOT_KEY], dict):
                raise DataError(f"{path}: '{ROOT_KEY}' must be an object with 'common_examples'")
            data = from_rasa_json_dict(document[ROOT_KEY], str(path), path.parent)
    if data is not None and is_empty(data):
        data = None
    if data is None and explicit:
        raise DataError(
            f"{path}: holds no NLU training data; expected Rasa YAML with 'nlu:' (or "
            "'responses:'), Markdown with '## intent:NAME' sections (or Rasa 1's responses), "
            f"or JSON with '{ROOT_KEY}'"
        )
    return data


def detect_format(path: Path, content: str) -> Format:
    """The data format of a file, from its extension, else from its content."""
    suffix = path.suffix.lower()
    if suffix in (".yml", ".yaml"):
        return "yaml"
    if suffix == ".md":
        return "markdown"
    if suffix == ".json":
        return "json"
    stripped = content.lstrip()
    if stripped.startswith("{") and ROOT_KEY in stripped:
        return "json"
    if SECTION_HEADER.search(content):
        return "markdown"
    return "yaml"


def is_empty(data: TrainingData) -> bool:
    """Whether ``data`` holds nothing: no examples, synonyms, regexes, lookups or responses."""
    return not (
        data.messages
        or data.synonyms
        or data.regex_features
        or data.lookup_tables
        or data.responses
    )


def write_data(
    data: TrainingData, path: str | Path, format: Literal["yaml", "json"] | None = None
) -> Path:
    """Write ``data`` as Rasa YAML or JSON (default: from the extension, ``.json`` or YAML)."""
    path = Path(path)
    if format is None:
        if path.suffix.lower() == ".md":
            raise DataError(
                f"{path}: Markdown is read but not written; use a .yml or .json file name"
            )
        format = "json" if path.suffix.lower() == ".json" else "yaml"
    if format == "json":
        return write_rasa_json(data, path)
    if format == "yaml":
        return write_rasa_yaml(data, path)
    raise DataError(f"{path}: unknown data format '{format}'; use 'yaml' or 'json'")
