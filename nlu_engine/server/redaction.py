"""``serve --log-redact``: what is masked in a parse result before the message log stores it.

A rule is an entity type (``--log-redact email``: the text of every ``email`` entity, and its
value, become ``[email]``) or a pattern (``--log-redact 're:\\d{4,}'``: every match becomes
``[redacted]``). Masking rewrites the stored text, so the offsets of the entities and tokens are
moved to the masked text; a masked entity keeps its type, role and group but loses its value and
``additional_info``. Patterns are also applied to every other string of the stored parse result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nlu_engine.contract.errors import NLUError

PATTERN_PREFIX = "re:"
MASK = "[redacted]"


@dataclass(frozen=True)
class Span:
    """A masked span: where it was in the text, what replaces it and where that lands."""

    start: int
    end: int
    mask: str
    new_start: int = 0
    new_end: int = 0


@dataclass(frozen=True)
class Redactor:
    """The ``--log-redact`` rules: entity types and compiled patterns."""

    entity_types: frozenset[str] = frozenset()
    patterns: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def from_rules(cls, rules: Iterable[str]) -> Redactor:
        """``TYPE`` or ``re:PATTERN`` each; a pattern that does not compile is a one-line error."""
        types: set[str] = set()
        patterns: list[re.Pattern[str]] = []
        for rule in rules:
            if rule.startswith(PATTERN_PREFIX):
                source = rule[len(PATTERN_PREFIX):]
                try:
                    pattern = re.compile(source)
                except re.error as error:
                    raise NLUError(f"--log-redact '{rule}': not a regular expression ({error})") from None
                patterns.append(pattern)
            elif rule.strip():
                types.add(rule.strip())
            else:
                raise NLUError("--log-redact needs an entity type or re:PATTERN, not an empty text")
        return cls(frozenset(types), tuple(patterns))

    def __bool__(self) -> bool:
        return bool(self.entity_types or self.patterns)

    def rules(self) -> list[str]:
        """The rules back as ``--log-redact`` values (for the worker processes' settings)."""
        return sorted(self.entity_types) + [PATTERN_PREFIX + p.pattern for p in self.patterns]

    def redact(self, result: dict[str, Any]) -> dict[str, Any]:
        """A copy of the parse ``result`` with the rules' spans masked (``result`` is untouched)."""
        text = result.get("text")
        if not isinstance(text, str):
            return self._scrub(result)
        entities = [e for e in result.get("entities") or [] if isinstance(e, dict)]
        spans = _merge(self._spans(text, entities))
        new_text = _apply(text, spans)
        redacted = {key: self._scrub(value) for key, value in result.items()
                    if key not in ("text", "entities", "text_tokens")}
        redacted["text"] = new_text
        redacted["entities"] = [self._entity(entity, spans, new_text) for entity in entities]
        if "text_tokens" in result:
            tokens = result["text_tokens"]
            redacted["text_tokens"] = _tokens(tokens, spans) if isinstance(tokens, list) else tokens
        return {key: redacted[key] for key in result}

    def _spans(self, text: str, entities: list[dict[str, Any]]) -> list[Span]:
        spans: list[Span] = []
        for entity in entities:
            kind = entity.get("entity")
            if kind not in self.entity_types:
                continue
            mask = f"[{kind}]"
            start, end = entity.get("start"), entity.get("end")
            if isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text):
                spans.append(Span(start, end, mask))
            value = entity.get("value")
            if isinstance(value, str) and value:  # the value elsewhere (a /intent{...} payload)
                spans += [Span(m.start(), m.end(), mask) for m in re.finditer(re.escape(value), text)]
        for pattern in self.patterns:
            spans += [Span(m.start(), m.end(), MASK) for m in pattern.finditer(text) if m.end() > m.start()]
        return spans

    def _entity(self, entity: dict[str, Any], spans: list[Span], new_text: str) -> dict[str, Any]:
        out = {key: self._scrub(value) for key, value in entity.items()}
        start, end = entity.get("start"), entity.get("end")
        touched = False
        if isinstance(start, int) and isinstance(end, int):
            out["start"], out["end"] = _moved(start, spans, False), _moved(end, spans, True)
            touched = any(span.start < end and start < span.end for span in spans)
        if entity.get("entity") in self.entity_types:
            out["value"] = f"[{entity['entity']}]"
            out.pop("additional_info", None)
        elif touched:
            out["value"] = new_text[out["start"]:out["end"]]
            out.pop("additional_info", None)
        return out

    def _scrub(self, value: Any) -> Any:
        """``value`` with the patterns masked in every string (dict keys are left as they are)."""
        if isinstance(value, str):
            for pattern in self.patterns:
                value = pattern.sub(MASK, value)
            return value
        if isinstance(value, dict):
            return {key: self._scrub(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._scrub(item) for item in value]
        return value


def _merge(spans: list[Span]) -> list[Span]:
    """Overlapping spans as one (two different masks merge into ``[redacted]``), in order."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            mask = last.mask if last.mask == span.mask else MASK
            merged[-1] = Span(last.start, max(last.end, span.end), mask)
        else:
            merged.append(span)
    return merged


def _apply(text: str, spans: list[Span]) -> str:
    """The masked text; fills each span's ``new_start`` / ``new_end`` in ``spans`` (in place)."""
    pieces: list[str] = []
    position = length = 0
    for index, span in enumerate(spans):
        pieces.append(text[position:span.start])
        length += span.start - position
        spans[index] = Span(span.start, span.end, span.mask, length, length + len(span.mask))
        pieces.append(span.mask)
        length += len(span.mask)
        position = span.end
    pieces.append(text[position:])
    return "".join(pieces)


def _moved(offset: int, spans: list[Span], is_end: bool) -> int:
    """Where ``offset`` of the original text lands in the masked one: inside a masked span, at
    the mask's end (an end offset) or start (a start offset)."""
    shift = 0
    for span in spans:
        if offset <= span.start:
            break
        if offset < span.end:
            return span.new_end if is_end else span.new_start
        shift = span.new_end - span.end
    return offset + shift


def _tokens(tokens: list[Any], spans: list[Span]) -> list[Any]:
    """The ``text_tokens`` offsets moved to the masked text; tokens inside one mask become one."""
    moved: list[Any] = []
    for token in tokens:
        if isinstance(token, list) and len(token) == 2 and all(isinstance(x, int) for x in token):
            token = [_moved(token[0], spans, False), _moved(token[1], spans, True)]
            if moved and moved[-1] == token:
                continue
        moved.append(token)
    return moved
