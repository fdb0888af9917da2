"""A Rasa project's NLU: the NLU files of a data folder, the domain's responses, the rest counted.

A Rasa user's ``data/`` mixes NLU files (any of the three formats) with stories and rules, and
``domain.yml`` holds responses beside slots, forms and actions. :func:`read_project` reads what
is NLU and counts what is not:

- every file under the data paths is read as ``load_data`` reads it (files and folders, formats
  mixed, hidden names left out); ``stories``, ``rules``, ``slots``, ``forms`` and ``actions`` in
  them are counted and skipped, and the intents the stories and rules use are kept for
  ``nlu-engine data validate``;
- a YAML file that is not valid YAML is an error naming its file and line when it looks like NLU
  data (a top-level ``nlu:`` or ``responses:``, or an ``examples:`` key); otherwise (a broken
  stories file) it is skipped, and the notice says so;
- the domain (a file or a folder) gives the responses of retrieval intents (``utter_faq/ask_x``)
  for the ResponseSelector, beside the ``responses:`` of the data files, and its intents and
  entities; its other responses, slots, forms and actions are counted as skipped.

Exact duplicate examples (same text, intent and annotations, in one file or across files) are
dropped keeping the first, as Rasa's ``TrainingData`` drops them; ``duplicates`` counts the
copies dropped per example, for the notice and for ``data validate``'s warnings.

``Project.notice()`` is one line counting what was skipped and dropped; ``skipped_files`` names
the files left out entirely.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nlu_engine.contract.errors import DataError, yaml_problem
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.domain import Domain, read_domain
from nlu_engine.training_data.loading import data_files, detect_format, is_empty, load_file
from nlu_engine.training_data.rasa_markdown import read_text_file
from nlu_engine.training_data.rasa_yaml import parse_rasa_yaml
from nlu_engine.training_data.yaml_limits import safe_load

#: a YAML file that holds NLU data: its errors are errors, never a reason to skip it
NLU_MARKERS = re.compile(r"^(?:nlu|responses)\s*:|^\s+examples\s*:", re.MULTILINE)
#: top-level keys of the dialogue's data, counted and skipped
DIALOGUE_DATA_KEYS = ("stories", "rules", "slots", "forms", "actions")
_DIALOGUE_MARKERS = re.compile(rf"^(?:{'|'.join(DIALOGUE_DATA_KEYS)})\s*:", re.MULTILINE)

logger = logging.getLogger(__name__)


def load_data(paths: str | Path | Iterable[str | Path]) -> TrainingData:
    """All NLU data found at ``paths`` (a file, a directory, or a list of them), merged.

    Files are read in the order given; a directory's files in sorted path order. Stories, rules
    and other dialogue data beside the NLU files are skipped (:func:`read_project` counts
    them); a file left out because it is broken and not NLU data is named in a warning, as is
    each entity annotation dropped for offsets that do not fit its text; exact duplicate examples
    are dropped (the first kept), counted in one warning.
    """
    project = read_project(paths)
    for entry in project.skipped_files:
        logger.warning(f"skipped {entry}")
    for warning in project.data.load_warnings:
        logger.warning(warning)
    if project.duplicate_notice():
        logger.warning(project.duplicate_notice())
    return project.data


@dataclass
class Project:
    """What a Rasa project's data paths (and domain) hold for NLU."""

    data: TrainingData
    domain: Domain | None = None
    #: dialogue parts that were skipped: kind (stories, rules, slots, ...) -> count
    skipped: Counter[str] = field(default_factory=Counter)
    #: the files those parts came from
    skipped_sources: list[str] = field(default_factory=list)
    #: files left out entirely: "path: why"
    skipped_files: list[str] = field(default_factory=list)
    #: intents the stories and rules use -> the files using them
    story_intents: dict[str, list[str]] = field(default_factory=dict)
    #: (text, intent or retrieval intent) of an exact duplicate example -> copies dropped
    duplicates: Counter[tuple[str, str]] = field(default_factory=Counter)

    def notice(self) -> str | None:
        """One line counting what was skipped and the duplicates dropped (None when neither);
        the files left out entirely are in ``skipped_files``, for a warning each."""
        parts = []
        if self.skipped:
            counts = ", ".join(f"{n} {_plural(kind, n)}" for kind, n in sorted(self.skipped.items()))
            parts.append(f"skipped what is not NLU: {counts} (in {', '.join(self.skipped_sources)})")
        if self.duplicate_notice():
            parts.append(str(self.duplicate_notice()))
        return "; ".join(parts) or None

    def duplicate_notice(self) -> str | None:
        """One line counting the exact duplicate examples dropped (None when there were none)."""
        dropped = sum(self.duplicates.values())
        if not dropped:
            return None
        return (f"dropped {dropped} exact duplicate example{'s' if dropped > 1 else ''} (same "
                "text, intent and annotations), keeping the first of each, as Rasa does; "
                "'nlu-engine data validate' lists them")


def read_project(
    paths: str | Path | Iterable[str | Path], domain: str | Path | Domain | None = None
) -> Project:
    """The NLU of data files and folders (and of a domain), with what was skipped counted."""
    if isinstance(paths, str | Path):
        paths = [paths]
    targets = [Path(p) for p in paths]
    if not targets:
        raise DataError("no training data path given; name a data file or directory")
    project = Project(data=TrainingData())
    parts: list[TrainingData] = []
    seen: set[Path] = set()
    for target in targets:
        if not target.exists():
            raise DataError(f"{target}: not found; check the training data path")
        files = data_files(target) if target.is_dir() else [target]
        found = [_read_file(p, project, explicit=not target.is_dir())
                 for p in files if p.resolve() not in seen]
        seen.update(p.resolve() for p in files)
        found_parts = [data for data in found if data is not None]
        if target.is_dir() and not found_parts and not project.skipped:
            raise DataError(
                f"{target}: no NLU training data found in this directory; add Rasa "
                "YAML (nlu:), Markdown (## intent:) or JSON (rasa_nlu_data) files"
            )
        parts.extend(found_parts)
    if not parts:
        raise DataError(f"{', '.join(map(str, targets))}: no NLU training data (nlu: items) found")
    data = parts[0]
    for part in parts[1:]:
        data = data.merge(part)
    data.messages, project.duplicates = drop_duplicates(data.messages)
    project.data = data
    if domain is not None:
        _add_domain(project, domain if isinstance(domain, Domain) else read_domain(domain))
    return project


def drop_duplicates(messages: list[Message]) -> tuple[list[Message], Counter[tuple[str, str]]]:
    """The examples without exact repeats (the first kept, the order unchanged), and the copies
    dropped per ``(text, intent)``. Exact means all Rasa compares: text, intent (with its
    retrieval key), entity annotations and metadata."""
    kept: list[Message] = []
    seen: set[str] = set()
    dropped: Counter[tuple[str, str]] = Counter()
    for message in messages:
        key = json.dumps([message.text, message.intent, message.intent_response_key,
                          message.entities, message.metadata], sort_keys=True, default=str)
        if key in seen:
            dropped[(message.text, message.intent_response_key or message.intent or "")] += 1
        else:
            seen.add(key)
            kept.append(message)
    return kept, dropped


def _read_file(path: Path, project: Project, explicit: bool) -> TrainingData | None:
    """The NLU data of one file (None when it has none); its dialogue parts are counted."""
    content = read_text_file(path)
    if detect_format(path, content) != "yaml":
        return load_file(path, explicit=explicit)
    looks_nlu = NLU_MARKERS.search(content) is not None
    if not looks_nlu:
        # not NLU data: a broken file is skipped, not an error (Rasa reads the stories)
        try:
            document = safe_load(content)
        except yaml.YAMLError as error:
            line, problem = yaml_problem(error, content)
            project.skipped_files.append(f"{path}{line}: not valid YAML ({problem}), and no NLU "
                                         "data in it; fix it before Rasa reads it")
            return None
        _count_dialogue(document, path, project)
    data = parse_rasa_yaml(content, source=str(path), base_dir=path.parent)  # errors name the line
    if looks_nlu and _DIALOGUE_MARKERS.search(content):  # NLU and stories in one file
        _count_dialogue(safe_load(content), path, project)  # parse_rasa_yaml read it: no bomb
    if data is not None and not is_empty(data):
        return data
    if explicit and not _DIALOGUE_MARKERS.search(content):
        return load_file(path, explicit=True)  # raises: an explicit file must hold something
    return None


def _count_dialogue(document: Any, path: Path, project: Project) -> None:
    if not isinstance(document, dict):
        return
    counted = False
    for key in DIALOGUE_DATA_KEYS:
        items = document.get(key)
        if isinstance(items, list | dict) and items:
            project.skipped[key] += len(items)
            counted = True
        if key in ("stories", "rules") and isinstance(items, list):
            for intent in _step_intents(items):
                users = project.story_intents.setdefault(intent, [])
                if str(path) not in users:
                    users.append(str(path))
    if counted and str(path) not in project.skipped_sources:
        project.skipped_sources.append(str(path))


def _step_intents(blocks: list[Any]) -> list[str]:
    """The intents of the user steps of stories or rules (``- intent: x`` and ``- or:`` lists)."""
    found = []
    for block in blocks:
        steps = block.get("steps") if isinstance(block, dict) else None
        for step in steps if isinstance(steps, list) else []:
            if not isinstance(step, dict):
                continue
            options = step.get("or") if isinstance(step.get("or"), list) else [step]
            for option in options:
                intent = option.get("intent") if isinstance(option, dict) else None
                if isinstance(intent, str) and intent and intent not in found:
                    found.append(intent)
    return found


def add_domain_responses(data: TrainingData, domain: Domain) -> None:
    """The domain's retrieval responses join the data's (the data's win on a clash)."""
    data.responses = {**domain.retrieval_responses(), **data.responses}


def _add_domain(project: Project, domain: Domain) -> None:
    """The domain's retrieval responses join the data's; its dialogue parts are counted."""
    project.domain = domain
    add_domain_responses(project.data, domain)
    other = len(domain.responses) - len(domain.retrieval_responses())
    counts = {**domain.dialogue, **({"responses": other} if other else {})}
    for kind, number in counts.items():
        project.skipped[kind] += number
    if counts:
        project.skipped_sources.extend(s for s in domain.sources if s not in project.skipped_sources)


def _plural(kind: str, number: int) -> str:
    """``stories`` -> ``story`` for one; the kinds are plural nouns."""
    if number != 1:
        return kind
    return {"stories": "story"}.get(kind, kind[:-1])

