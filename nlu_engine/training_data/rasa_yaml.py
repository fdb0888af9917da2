"""Reader and writer for Rasa 3 YAML NLU data.

    version: "3.1"
    nlu:
    - intent: check_balance
      metadata: {sentiment: neutral}           # optional, for every example of the item
      examples: |
        - what's my [credit](account) balance?
    - intent: greet
      examples:                                # extended form, per-example metadata
      - text: hi
        metadata: {sentiment: neutral}
    - intent: faq/ask_name                     # retrieval intent
      examples: |
        - what's your name?
    - synonym: credit
      examples: |
        - credit card account
    - regex: account_number
      examples: |
        - \\d{10,12}
    - lookup: banks
      examples: |
        - JPMC
    - lookup: cities                           # a file with one element a line (our extension:
      examples: |                              # Rasa 3 reads files only in Markdown and JSON),
        - data/lookups/cities.txt              # or `examples: data/lookups/cities.txt`
    responses:
      utter_faq/ask_name:
      - text: I'm a bot.

Other top-level keys (``stories``, ``rules``, domain keys, ...) are ignored. Errors name the
file and line. A lookup file's path is relative to the data file's folder or to the working folder
(as in Rasa). Metadata is stored like Rasa does: ``Message.metadata`` is
``{"intent": <item metadata>, "example": <example metadata>}`` with only the keys present.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import yaml

from nlu_engine.contract.errors import DataError, closest, yaml_problem
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.annotations import (
    parse_annotated,
    synonyms_from_entities,
    to_annotated,
)
from nlu_engine.training_data.rasa_markdown import (
    checked_pattern,
    expand_lookup_files,
    read_lookup_file,
    split_retrieval_intent,
)
from nlu_engine.training_data.yaml_limits import Loader, checked_root

logger = logging.getLogger(__name__)

KEY_NLU = "nlu"
KEY_RESPONSES = "responses"
ITEM_KINDS = ("intent", "synonym", "regex", "lookup")
_ITEM_KEYS = {*ITEM_KINDS, "examples", "metadata"}
WRITE_VERSION = "3.1"



def parse_rasa_yaml(
    content: str, source: str = "<yaml>", base_dir: Path | None = None
) -> TrainingData | None:
    """Parse Rasa YAML text; ``None`` when it holds neither ``nlu:`` nor ``responses:``.
    ``base_dir`` is where lookup-table files are looked for first."""
    loader = Loader(content)
    try:
        root = checked_root(loader)
        return None if root is None else _Reader(loader, source, base_dir).read(root)
    except yaml.YAMLError as error:
        line, problem = yaml_problem(error, content)
        raise DataError(
            f"{source}{line}: invalid YAML ({problem}); fix the syntax there "
            "(examples belong in an indented 'examples: |' block of '- text' lines)"
        ) from None
    finally:
        loader.dispose()


class _Reader:
    """Walks the composed node tree so every error can name a line."""

    def __init__(self, loader: Any, source: str, base_dir: Path | None = None) -> None:
        self.loader = loader
        self.source = source
        self.base_dir = base_dir

    def where(self, node: yaml.Node, line_offset: int = 0) -> str:
        return f"{self.source}:{node.start_mark.line + 1 + line_offset}"

    def value(self, node: yaml.Node) -> Any:
        return self.loader.construct_object(node, deep=True)

    def read(self, root: yaml.Node) -> TrainingData | None:
        if not isinstance(root, yaml.MappingNode):
            return None  # a YAML list or scalar: not Rasa data
        data = TrainingData()
        found = False
        for key_node, value_node in root.value:
            key = self.value(key_node)
            if key == KEY_NLU:
                found = True
                self.read_nlu(key_node, value_node, data)
            elif key == KEY_RESPONSES:
                found = True
                responses = self.value(value_node)
                if responses is None:
                    continue
                if not isinstance(responses, dict):
                    raise DataError(
                        f"{self.where(value_node)}: 'responses' must be a mapping of "
                        "'utter_name' to a list of responses"
                    )
                data.responses.update(responses)
        return data if found else None

    def read_nlu(self, key: yaml.Node, node: yaml.Node, data: TrainingData) -> None:
        if isinstance(node, yaml.ScalarNode) and self.value(node) is None:
            return  # `nlu:` with nothing under it
        if not isinstance(node, yaml.SequenceNode):
            raise DataError(
                f"{self.where(key)}: 'nlu' must be a list of items like "
                "'- intent: greet' with an 'examples: |' block"
            )
        lookups: dict[str, list[str]] = {}
        for item in node.value:
            self.read_item(item, data, lookups)
        data.lookup_tables.extend(
            {"name": n, "elements": expand_lookup_files(e, self.base_dir, f"{self.source}: lookup '{n}'")}
            for n, e in lookups.items()
        )

    def read_item(self, node: yaml.Node, data: TrainingData, lookups: dict[str, list[str]]) -> None:
        if not isinstance(node, yaml.MappingNode):
            raise DataError(
                f"{self.where(node)}: an 'nlu' item must be a mapping such as "
                "'- intent: greet' with an 'examples: |' block"
            )
        fields = {}
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if isinstance(key, list | dict):  # `? [a]`: a YAML key that is no name
                raise DataError(f"{self.where(key_node)}: an 'nlu' item's keys are names such as "
                                "'intent' and 'examples'")
            fields[key] = value_node
        kinds = [kind for kind in ITEM_KINDS if kind in fields]
        if len(kinds) != 1:
            found = ", ".join(repr(str(k)) for k in fields) or "none"
            hint = "".join(closest(str(k), ITEM_KINDS) for k in fields if k not in _ITEM_KEYS)
            raise DataError(
                f"{self.where(node)}: an 'nlu' item needs exactly one of 'intent', 'synonym', "
                f"'regex' or 'lookup' (found keys: {found}){hint}"
            )
        for key, value_node in fields.items():
            if key not in _ITEM_KEYS:
                raise DataError(
                    f"{self.where(value_node)}: unknown key '{key}' in an 'nlu' item"
                    f"{closest(str(key), _ITEM_KEYS)}; allowed are "
                    f"'{kinds[0]}', 'examples' and 'metadata'"
                )
        kind = kinds[0]
        name_node = fields[kind]
        name = self.value(name_node)
        if not isinstance(name, str | int | float) or isinstance(name, bool) or name == "":
            raise DataError(f"{self.where(name_node)}: '{kind}' needs a name, e.g. '{kind}: greet'")
        name = str(name)
        examples_node = fields.get("examples")
        if kind == "lookup" and _is_plain_text(examples_node):
            # `examples: data/lookups/cities.txt`: a file with one element a line
            path = str(self.value(examples_node)).strip()
            lookups.setdefault(name, []).extend(
                read_lookup_file(path, self.base_dir, self.where(examples_node)))
            return
        examples = list(self.examples(examples_node, kind, name, node))
        if kind == "intent":
            self.add_intent(name, name_node, fields, examples, data)
        elif kind == "synonym":
            for text, _, _ in examples:
                data.synonyms[text] = name
        elif kind == "regex":
            for text, _, line in examples:
                pattern = checked_pattern(text, name, f"{self.source}:{line}")
                data.regex_features.append({"name": name, "pattern": pattern})
        else:
            lookups.setdefault(name, []).extend(text for text, _, _ in examples)

    def add_intent(
        self,
        name: str,
        name_node: yaml.Node,
        fields: dict[Any, yaml.Node],
        examples: list[tuple[str, Any, int]],
        data: TrainingData,
    ) -> None:
        # a retrieval intent "faq/ask_name" is intent "faq" with that response key (as in Rasa)
        intent, response_key = split_retrieval_intent(name, self.where(name_node))
        intent_metadata = self.value(fields["metadata"]) if "metadata" in fields else None
        for text, example_metadata, line in examples:
            plain, entities = parse_annotated(text, f"{self.source}:{line}")
            metadata: dict[str, Any] = {}
            if intent_metadata is not None:
                metadata["intent"] = intent_metadata
            if example_metadata is not None:
                metadata["example"] = example_metadata
            data.messages.append(
                Message(
                    text=plain,
                    intent=intent,
                    entities=entities,
                    metadata=metadata or None,
                    intent_response_key=response_key,
                )
            )
            data.synonyms.update(synonyms_from_entities(plain, entities))

    def examples(
        self, node: yaml.Node | None, kind: str, name: str, item: yaml.Node
    ) -> list[tuple[str, Any, int]]:
        """``(text, example metadata, line)`` for each example of an item."""
        missing = DataError(
            f"{self.where(item)}: {kind} '{name}' has no examples; add an 'examples: |' "
            "block with one '- example' line each"
        )
        if node is None:
            raise missing
        found: list[tuple[str, Any, int]] = []
        if isinstance(node, yaml.ScalarNode):
            block = self.value(node)
            if block is None:
                raise missing
            if not isinstance(block, str):
                raise DataError(
                    f"{self.where(node)}: 'examples' of {kind} '{name}' must be a '|' block "
                    "of '- example' lines"
                )
            first = node.start_mark.line + 1 + (1 if node.style in ("|", ">") else 0)
            for offset, raw in enumerate(block.splitlines()):
                line = raw.strip()
                if not line:
                    continue
                if not line.startswith("-"):
                    logger.warning(
                        f"{self.source}:{first + offset}: ignored line {line!r} in {kind} "
                        f"'{name}'; each example must start with '- '"
                    )
                    continue
                text = line[1:].strip()
                if text:
                    found.append((text, None, first + offset))
        elif isinstance(node, yaml.SequenceNode):
            for entry in node.value:
                found.append(self.extended_example(entry, kind, name))
        else:
            raise DataError(
                f"{self.where(node)}: 'examples' of {kind} '{name}' must be a '|' block of "
                "'- example' lines or a list of 'text:'/'metadata:' entries"
            )
        if not found:
            raise missing
        return found

    def extended_example(self, node: yaml.Node, kind: str, name: str) -> tuple[str, Any, int]:
        line = node.start_mark.line + 1
        if isinstance(node, yaml.ScalarNode):
            text = self.value(node)
            if isinstance(text, str | int | float) and str(text).strip():
                return str(text).strip(), None, line
        if isinstance(node, yaml.MappingNode):
            entry = self.value(node)
            unknown = set(entry) - {"text", "metadata"}
            if isinstance(entry.get("text"), str) and entry["text"].strip() and not unknown:
                return entry["text"].strip(), entry.get("metadata"), line
        raise DataError(
            f"{self.source}:{line}: each example of {kind} '{name}' in the list form needs "
            "'text:' (and optionally 'metadata:')"
        )


def _is_plain_text(node: yaml.Node | None) -> bool:
    """A plain (unquoted, not a ``|`` block) non-empty string scalar (PyYAML's style is None,
    libyaml's '')."""
    return (isinstance(node, yaml.ScalarNode) and not node.style and node.tag.endswith(":str")
            and bool(node.value.strip()))


# --- writing ---------------------------------------------------------------------------------
class _Block(str):
    """A string dumped as a YAML literal block (``|``)."""


class _Dumper(yaml.SafeDumper):
    pass


# YAML reads these as line breaks wherever they stand unescaped (a '|' block, plain or '...'
# scalars): only the double-quoted style escapes them, so a string holding one is written so.
_YAML_BREAKS = ("\x85", "\u2028", "\u2029")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = '"' if any(c in value for c in _YAML_BREAKS) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _represent_block(dumper: yaml.SafeDumper, value: _Block) -> yaml.Node:
    style = '"' if any(c in value for c in _YAML_BREAKS) else "|"
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style=style)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Block, _represent_block)


def to_rasa_yaml_dict(data: TrainingData) -> dict[str, Any]:
    """The YAML document (as Python objects) for ``data``; examples become ``|`` blocks."""
    items: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[Message]] = {}
    skipped = 0
    for message in data.messages:
        intent = message.intent_response_key or message.intent
        if not intent:
            skipped += 1
            continue
        intent_metadata, _ = _split_metadata(message.metadata)
        key = (intent, json.dumps(intent_metadata, sort_keys=True, default=str))
        groups.setdefault(key, []).append(message)
    if skipped:
        logger.warning(
            f"{skipped} examples without an intent cannot be written to Rasa YAML and were "
            "left out; use the JSON format to keep them"
        )
    for (intent, _), messages in groups.items():
        item: dict[str, Any] = {"intent": intent}
        intent_metadata, _ = _split_metadata(messages[0].metadata)
        if intent_metadata is not None:
            item["metadata"] = intent_metadata
        annotated = [to_annotated(m.text, m.entities, f"intent '{intent}'") for m in messages]
        example_metadata = [_split_metadata(m.metadata)[1] for m in messages]
        if any(md is not None for md in example_metadata) or any(map(_breaks_line, annotated)):
            item["examples"] = [
                {"text": text, **({"metadata": md} if md is not None else {})}
                for text, md in zip(annotated, example_metadata, strict=True)
            ]
        else:
            item["examples"] = _lines(annotated)
        items.append(item)

    synonyms: dict[str, list[str]] = {}
    for surface, value in _listed_synonyms(data).items():
        synonyms.setdefault(value, []).append(surface)
    items.extend({"synonym": v, "examples": _lines(s)} for v, s in synonyms.items())
    regexes: dict[str, list[str]] = {}
    for regex in data.regex_features:
        regexes.setdefault(regex["name"], []).append(regex["pattern"])
    items.extend({"regex": n, "examples": _lines(p)} for n, p in regexes.items())
    items.extend(
        {"lookup": t["name"], "examples": _lines(t["elements"])}
        for t in data.lookup_tables
        if t["elements"]
    )
    document: dict[str, Any] = {"version": WRITE_VERSION, "nlu": items}
    if data.responses:
        document["responses"] = data.responses
    return document


def _listed_synonyms(data: TrainingData) -> dict[str, str]:
    """The synonyms a 'synonym:' item must list. A surface with blanks around it cannot stand in
    one (its lines are stripped): an annotated example carries it, or it is refused."""
    carried: dict[str, str] = {}
    for message in data.messages:
        carried.update(synonyms_from_entities(message.text, message.entities))
    listed = {}
    for surface, value in data.synonyms.items():
        if surface == value or (surface != surface.strip() and carried.get(surface) == value):
            continue
        if surface != surface.strip() or not surface:
            raise DataError(
                f"synonym {surface!r} of {value!r} has blanks around it, which Rasa YAML strips; "
                "strip it or use the JSON format"
            )
        listed[surface] = value
    return listed


# what str.splitlines() breaks on, as Rasa's reader and ours split an 'examples: |' block
_LINE_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def _breaks_line(text: str) -> bool:
    return not _LINE_BREAKS.isdisjoint(text)


def _lines(texts: list[str]) -> _Block | list[str]:
    """A '|' block of '- text' lines, or the list form when a text would break a line there."""
    if any(map(_breaks_line, texts)):
        return list(texts)
    return _Block("".join(f"- {text}\n" for text in texts))


def _split_metadata(metadata: dict[str, Any] | None) -> tuple[Any, Any]:
    """(intent metadata, example metadata) of a Message's metadata."""
    if not metadata:
        return None, None
    if set(metadata) <= {"intent", "example"}:
        return metadata.get("intent"), metadata.get("example")
    return None, metadata  # metadata from elsewhere (e.g. JSON): keep it per example


def dump_rasa_yaml(data: TrainingData) -> str:
    """Rasa 3 YAML text for ``data``."""
    return yaml.dump(
        to_rasa_yaml_dict(data),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=4096,
    )


def write_rasa_yaml(data: TrainingData, path: str | Path) -> Path:
    """Write ``data`` as Rasa 3 YAML; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_rasa_yaml(data), encoding="utf-8")
    return path
