"""Token tags for entities and back: the side of entity extraction that needs no network.

Training: ``entity_tags(tokens, entities)`` gives one tag per token — BILOU tags (``B-city``
begin, ``I-city`` inside, ``L-city`` last, ``U-city`` unit, ``O`` outside) or plain type names.
An annotation whose ends differ from token boundaries only by characters no token holds (the
final ``.`` of ``u. s. d.``, which the tokenizer drops) is tagged on the tokens inside it; one
that cuts a token is skipped (``misaligned_entities``). Rasa skips both. ``trailing_punctuation``
learns, per entity type, whether such dropped punctuation after an entity's last token belongs
to the entity (``u. s. d.``) or not (``in paris.``), so that prediction can give it back.

Inference: ``spans_to_entities(text, tokens, tags, confidences)`` turns predicted tags into
entity dicts with Rasa's rules (``EntityExtractorMixin.convert_predictions_into_entities``):

1. BILOU tags are first repaired (``ensure_consistent_bilou``): a ``B-`` run ends at the next
   ``L-``, or before the first tag that is neither ``I-`` nor ``L-`` (``B-a I-a O`` becomes
   ``B-a L-a O``); a run with mixed types takes the type with the best harmonic mean of mean
   confidence and share of tokens; an ``I-``/``L-`` without a ``B-`` before it starts a run of
   its own (a lone ``L-a`` or ``I-a`` becomes ``U-a``).
2. Runs of tokens (``tags_to_spans``) are split again where the role or group changes, and
   where the characters between two tokens are not a single character, or are up to three of
   ``.``, ``,``, ``;`` and space while ``split_entities_by_comma`` is true for that type.
3. ``value`` is ``text[start:end]``; each confidence is the minimum over the entity's tokens.

Tag sequences are read by one reader with conlleval's chunking rules (``conlleval_spans``):
``tags_to_spans`` reads repaired BILOU (or plain type names) with it, and evaluation reads gold
and predicted tags of any scheme with it. ``bilou_constraints`` says which tag sequences a CRF
may decode, and ``f1_score`` is the F1 that training and evaluation both report.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from nlu_engine.contract.message import Token

#: the tag of a token outside every entity (what models are trained on and predict)
OUTSIDE_TAG = "O"
#: Rasa's label, in evaluation reports, for a token outside every entity (no tag of a model)
NO_ENTITY_LABEL = "no_entity"
BEGIN, INSIDE, LAST, UNIT = "B-", "I-", "L-", "U-"
BILOU_PREFIXES = (BEGIN, INSIDE, LAST, UNIT)
TagName = Literal["entity", "role", "group"]
#: ``(type, first_token, last_token)``, both token indices inclusive
TokenSpan = tuple[str, int, int]
# Characters that may sit between two tokens of one entity when entities are not split by comma.
SINGLE_ENTITY_JOINERS = frozenset(".,; ")
# A single annotation is no rule: SNIPS's one "[keep their heads ringin'](object_name)" would
# otherwise extend every object_name over a following quote.
TRAILING_MIN_MARGIN = 2


def bilou_prefix(tag: str) -> str | None:
    """``"B-"``, ``"I-"``, ``"L-"``, ``"U-"`` or None."""
    return tag[:2] if tag[:2] in BILOU_PREFIXES else None


def tag_without_prefix(tag: str) -> str:
    """``"B-city"`` -> ``"city"``; ``"O"`` and plain names are returned unchanged."""
    return tag[2:] if tag[:2] in BILOU_PREFIXES else tag


# --- entities -> tags ------------------------------------------------------------------------
def entity_tags(
    tokens: Sequence[Token],
    entities: Sequence[Mapping[str, Any]],
    tag: TagName = "entity",
    bilou: bool = True,
) -> list[str]:
    """One tag per token for the entities' ``tag`` attribute (type, role or group).

    Entities without that attribute are ignored (their tokens get ``O``). With ``bilou``, an
    entity is tagged on the tokens it covers unless it cuts a token (see ``token_span``);
    without it, a token takes the label of the entity it overlaps most, as Rasa does.
    """
    labelled = [
        (int(e["start"]), int(e["end"]), str(e[tag]))
        for e in entities
        if e.get(tag) is not None and str(e[tag]) not in ("", OUTSIDE_TAG)
    ]
    tags = [OUTSIDE_TAG] * len(tokens)
    if bilou:
        for start, end, label in labelled:
            span = token_span(tokens, start, end)
            if span is None:
                continue
            first, last = span
            if first == last:
                tags[first] = UNIT + label
                continue
            tags[first] = BEGIN + label
            for i in range(first + 1, last):
                tags[i] = INSIDE + label
            tags[last] = LAST + label
        return tags
    for i, token in enumerate(tokens):
        best, best_overlap = OUTSIDE_TAG, 0
        for start, end, label in labelled:
            overlap = min(token.end, end) - max(token.start, start)
            if overlap > best_overlap:
                best, best_overlap = label, overlap
        tags[i] = best
    return tags


def token_span(tokens: Sequence[Token], start: int, end: int) -> tuple[int, int] | None:
    """First and last token inside the characters ``[start, end)``; None if it cuts a token.

    Characters between the span's ends and its outer tokens belong to no token (whitespace or
    punctuation the tokenizer dropped), so ``u. s. d.`` covers the tokens ``u``, ``s``, ``d``.
    """
    inside = []
    for i, token in enumerate(tokens):
        if token.start < end and token.end > start:
            if token.start < start or token.end > end:
                return None
            inside.append(i)
    return (inside[0], inside[-1]) if inside else None


def misaligned_entities(
    tokens: Sequence[Token], entities: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Entities that cut a token or cover none (BILOU tagging skips them)."""
    return [e for e in entities if token_span(tokens, int(e["start"]), int(e["end"])) is None]


def misaligned_notice(component: str, messages: Sequence[Any]) -> str | None:
    """One warning line naming the annotations of ``messages`` that BILOU tagging skips, or None.

    ``messages`` are training Messages (``text``, ``tokens["text"]``, ``entities``)."""
    bad = [
        f"'{message.text[int(e['start']):int(e['end'])]}' ({e['entity']}) in '{message.text}'"
        for message in messages
        for e in misaligned_entities(message.tokens.get("text", []), message.entities)
    ]
    if not bad:
        return None
    shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
    return (f"{component}: {len(bad)} entity annotation(s) do not fall on token boundaries and are "
            f"ignored: {shown}")


def _dropped_after(text: str, tokens: Sequence[Token], index: int) -> str:
    """The characters right after token ``index`` that no token holds, up to whitespace."""
    stop = tokens[index + 1].start if index + 1 < len(tokens) else len(text)
    tail = text[tokens[index].end : stop]
    for i, char in enumerate(tail):
        if char.isspace():
            return tail[:i]
    return tail


def _punctuation_key(label: str, token: Token) -> str:
    """Trailing punctuation is learned per entity type and per kind of last token: a single
    character (an initial, as in ``mary s.``) or a longer word (``in paris.``)."""
    return f"{label}\t{'initial' if len(token.text) == 1 else 'word'}"


def trailing_punctuation(
    examples: Iterable[tuple[str, Sequence[Token], Sequence[Mapping[str, Any]]]],
) -> dict[str, str]:
    """Keys (entity type, kind of last token) whose annotations include the punctuation the
    tokenizer dropped right after their last token at least ``TRAILING_MIN_MARGIN`` times more
    often than they exclude it, each with the characters those annotations included;
    ``spans_to_entities`` then extends predicted entities of that key over a run of those
    characters (``u. s. d.,`` gives ``u. s. d.``). ``examples`` are (text, tokens, entities)."""
    votes: Counter[str] = Counter()
    included: defaultdict[str, set[str]] = defaultdict(set)
    for text, tokens, entities in examples:
        for e in entities:
            label = e.get("entity")
            span = token_span(tokens, int(e["start"]), int(e["end"]))
            if not label or span is None:
                continue
            last = span[1]
            if not _dropped_after(text, tokens, last):
                continue
            key = _punctuation_key(str(label), tokens[last])
            if int(e["end"]) > tokens[last].end:
                votes[key] += 1
                included[key].update(text[tokens[last].end : int(e["end"])])
            else:
                votes[key] -= 1
    return {
        key: "".join(sorted(included[key]))
        for key, vote in sorted(votes.items())
        if vote >= TRAILING_MIN_MARGIN
    }


# --- tags -> spans ---------------------------------------------------------------------------
def ensure_consistent_bilou(
    tags: Sequence[str], confidences: Sequence[float] | None = None
) -> tuple[list[str], list[float] | None]:
    """Repair a predicted BILOU sequence (rule 1 of the module docstring).

    Returns new lists; tokens whose type changed get the winning type's score as confidence.
    """
    tags = list(tags)
    scores = list(confidences) if confidences is not None else None
    i = 0
    while i < len(tags):
        prefix = bilou_prefix(tags[i])
        if prefix is None or prefix == UNIT:
            i += 1
            continue
        last = i if prefix == LAST else _run_end(i, tags)
        types = [tag_without_prefix(t) for t in tags[i : last + 1]]
        label = types[0]
        if len(set(types)) > 1:
            weights = scores[i : last + 1] if scores is not None else [1.0] * len(types)
            label, score = _type_to_use(types, weights)
            if scores is not None:
                for j in range(i, last + 1):
                    if types[j - i] != label:
                        scores[j] = round(score, 2)
        if last == i:
            tags[i] = UNIT + label
        else:
            tags[i] = BEGIN + label
            for j in range(i + 1, last):
                tags[j] = INSIDE + label
            tags[last] = LAST + label
        i = last + 1
    return tags, scores


def _run_end(start: int, tags: Sequence[str]) -> int:
    """Index of the last token of the run starting at ``start`` (a ``B-`` or lone ``I-``)."""
    i = start + 1
    while i < len(tags):
        prefix = bilou_prefix(tags[i])
        if prefix == LAST:
            return i
        if prefix != INSIDE:
            return i - 1
        i += 1
    return len(tags) - 1


def _type_to_use(types: list[str], confidences: Sequence[float]) -> tuple[str, float]:
    """Rasa's choice for a run with mixed types: the best harmonic mean of the type's mean
    confidence and its share of the run's tokens."""
    by_type: dict[str, list[float]] = defaultdict(list)
    for label, confidence in zip(types, confidences, strict=True):
        by_type[label].append(float(confidence))
    counts = Counter(types)
    best, best_score = types[0], -1.0
    for label, values in by_type.items():
        mean = round(sum(values) / len(values), 2)
        share = round(counts[label] / len(types), 2)
        score = 2 * mean * share / (mean + share) if mean + share > 0 else 0.0
        if score > best_score:
            best, best_score = label, score
    return best, best_score


def tags_to_spans(tags: Sequence[str], bilou: bool = True) -> list[TokenSpan]:
    """``(type, first_token, last_token)`` for each entity predicted tags describe (Rasa's reading).

    With ``bilou`` the tags are repaired first (``ensure_consistent_bilou``) and a span is a
    ``U-`` token or a ``B- … L-`` run; tags without a BILOU prefix are outside. Without it, a span
    is a run of equal tags other than ``O``.
    """
    if bilou:
        repaired, _ = ensure_consistent_bilou(tags)
        return conlleval_spans(repaired, scheme="bilou")
    return conlleval_spans(tags, scheme="io")


# conlleval's chunk prefixes: B(egin), I(nside), E(nd), S(ingle); BILOU's L- and U- are E- and S-
_CHUNK_PREFIXES = {"B": "B", "I": "I", "L": "E", "E": "E", "U": "S", "S": "S"}
_OUTSIDE_TAGS = frozenset({OUTSIDE_TAG, NO_ENTITY_LABEL, ""})
TagScheme = Literal["any", "bilou", "io"]


def _chunk_tag(tag: str, scheme: TagScheme) -> tuple[str, str]:
    """``(chunk prefix, type)`` of a tag; the prefix ``O`` is outside."""
    if scheme == "io":
        return ("O", "") if tag == OUTSIDE_TAG else ("I", tag)
    if scheme == "bilou":
        prefix = bilou_prefix(tag)
        return ("O", "") if prefix is None else (_CHUNK_PREFIXES[prefix[0]], tag[2:])
    if tag in _OUTSIDE_TAGS:
        return "O", ""
    if len(tag) > 2 and tag[1] == "-" and tag[0] in _CHUNK_PREFIXES:
        return _CHUNK_PREFIXES[tag[0]], tag[2:]
    return "I", tag  # IO tags: a plain type name is inside an entity of that type


def _chunk_ends(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    return (
        prev_tag in ("E", "S")
        or (prev_tag in ("B", "I") and tag in ("B", "S", "O"))
        or (prev_tag != "O" and prev_type != type_)
    )


def _chunk_starts(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    return (
        tag in ("B", "S")
        or (prev_tag in ("E", "S", "O") and tag in ("E", "I"))
        or (tag != "O" and prev_type != type_)
    )


def conlleval_spans(tags: Sequence[str], scheme: TagScheme = "any") -> list[TokenSpan]:
    """Entity chunks ``(type, first_token, last_token)`` read from tags by conlleval's rules.

    As in conlleval, an ``I-``/``L-`` after ``O`` or after another type starts a chunk, a type
    change ends one, and ``B-``/``U-`` always start one. ``scheme`` says which tags are read:
    ``"any"`` accepts BIO (``B-x``, ``I-x``), BILOU (``L-x``, ``U-x``), IOBES (``E-x``, ``S-x``)
    and IO tags (a plain type name, as Rasa writes without BILOU), with ``O`` and ``no_entity``
    outside; ``"bilou"`` only BILOU-prefixed tags (the rest is outside); ``"io"`` every tag but
    ``O`` as a plain type name.
    """
    chunks: list[TokenSpan] = []
    start: int | None = None
    prev_tag, prev_type = "O", ""
    for i, raw in enumerate(tags):
        tag, type_ = _chunk_tag(raw, scheme)
        if start is not None and _chunk_ends(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, start, i - 1))
            start = None
        if _chunk_starts(prev_tag, tag, prev_type, type_):
            start = i
        prev_tag, prev_type = tag, type_
    if start is not None:
        chunks.append((prev_type, start, len(tags) - 1))
    return chunks


# --- what a decoder may output, and how well tags score ------------------------------------
def bilou_constraints(vocabulary: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which BILOU tag may follow which [K, K], and which may start / end a sequence [K].

    After O, L-x or U-x comes O, B-y or U-y; after B-x or I-x comes I-x or L-x.
    """
    prefix = [tag[0] if tag != OUTSIDE_TAG else "O" for tag in vocabulary]
    kind = [tag[2:] for tag in vocabulary]
    size = len(vocabulary)
    allowed = np.zeros((size, size), bool)
    for i in range(size):
        for j in range(size):
            if prefix[i] in "OLU":
                allowed[i, j] = prefix[j] in "OBU"
            else:
                allowed[i, j] = prefix[j] in "IL" and kind[j] == kind[i]
    start = np.array([p in "OBU" for p in prefix])
    end = np.array([p in "OLU" for p in prefix])
    return allowed, start, end


def f1_score(correct: float, gold: float, predicted: float) -> float:
    """F1 from counts: ``2·correct / (gold + predicted)``, the harmonic mean of precision and
    recall (0.0 when there is nothing to score).

    The one F1 of the package: DIET's token F1 while it trains and every F1 of
    ``nlu_engine.evaluation`` use it. It sits at the bottom stage so that training need not
    import the evaluation package.
    """
    total = gold + predicted
    return 2 * correct / total if total else 0.0


# --- tags -> entities ------------------------------------------------------------------------
def stored_trailing_punctuation(value: Any, where: str) -> dict[str, str]:
    """The ``trailing_punctuation`` map read back from a model file (absent: no rule)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{where}: 'trailing_punctuation' must map entity keys to characters")
    return dict(value)


def spans_to_entities(
    text: str,
    tokens: Sequence[Token],
    token_tags: Sequence[str] | Mapping[str, Sequence[str]],
    token_confidences: Sequence[float] | Mapping[str, Sequence[float]] | None = None,
    *,
    extractor: str | None = None,
    split_entities_by_comma: bool | Mapping[str, bool] = True,
    bilou: bool = True,
    trailing: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Entity dicts from per-token predictions (the module docstring gives the rules).

    Args:
        text: the message text the tokens index into.
        tokens: the message's tokens (no sentence/CLS token).
        token_tags: one tag per token — a list of entity-type tags, or a mapping
            ``{"entity": [...], "role": [...], "group": [...]}`` (role and group optional).
        token_confidences: one confidence per token, as a list (for ``entity``) or a mapping
            with the same keys as ``token_tags``; ``None`` leaves out the confidence fields.
        extractor: written into each entity as ``extractor`` when given.
        split_entities_by_comma: whether ``a, b`` of one type are two entities; a bool for
            all types or ``{type: bool}`` (a missing type uses ``True``, Rasa's default; the
            key ``"split_entities_by_comma"`` in the mapping sets that default).
        bilou: whether the tags carry BILOU prefixes (they are repaired first).
        trailing: from ``trailing_punctuation``: an entity of such a key ends after the run of
            its characters that the tokenizer dropped right after its last token.

    Returns:
        ``[{"entity", "start", "end", "value", "confidence_entity"?, "role"?,
        "confidence_role"?, "group"?, "confidence_group"?, "extractor"?}]`` in text order.
    """
    tags, confidences = _per_token(len(tokens), token_tags, token_confidences)
    entity_tags_ = list(tags["entity"])
    if bilou:
        entity_scores = confidences.get("entity") if confidences else None
        entity_tags_, repaired_scores = ensure_consistent_bilou(entity_tags_, entity_scores)
        if confidences is not None and repaired_scores is not None:
            confidences["entity"] = repaired_scores
    attribute_tags = {
        name: [tag_without_prefix(t) for t in tags[name]] for name in ("role", "group") if name in tags
    }

    entities: list[dict[str, Any]] = []
    for label, first, last in tags_to_spans(entity_tags_, bilou=bilou):
        for piece_first, piece_last in _split_span(
            text, tokens, first, last, attribute_tags, _splits(split_entities_by_comma, label), bilou
        ):
            entity = _entity(text, tokens, label, piece_first, piece_last, attribute_tags, confidences)
            chars = trailing.get(_punctuation_key(label, tokens[piece_last])) if trailing else None
            if chars:
                tail = _dropped_after(text, tokens, piece_last)
                run = len(tail) - len(tail.lstrip(chars))
                entity["end"] += run
                entity["value"] = text[entity["start"] : entity["end"]]
            entities.append(entity)
    for entity in entities:
        if extractor is not None:
            entity["extractor"] = extractor
    return entities


def _per_token(
    count: int,
    token_tags: Sequence[str] | Mapping[str, Sequence[str]],
    token_confidences: Sequence[float] | Mapping[str, Sequence[float]] | None,
) -> tuple[dict[str, Sequence[str]], dict[str, list[float]] | None]:
    """``spans_to_entities``'s tags and confidences as mappings by name (``entity``, ``role``,
    ``group``), each checked to hold one value for each of the ``count`` tokens."""
    tags = dict(token_tags) if isinstance(token_tags, Mapping) else {"entity": list(token_tags)}
    if token_confidences is None:
        confidences: dict[str, list[float]] | None = None
    elif isinstance(token_confidences, Mapping):
        confidences = {k: [float(c) for c in v] for k, v in token_confidences.items()}
    else:
        confidences = {"entity": [float(c) for c in token_confidences]}
    for name, values in tags.items():
        if len(values) != count:
            raise ValueError(f"{len(values)} {name} tags for {count} tokens")
    for name, scores in (confidences or {}).items():
        if len(scores) != count:
            raise ValueError(f"{len(scores)} {name} confidences for {count} tokens")
    return tags, confidences


def _splits(setting: bool | Mapping[str, bool], label: str) -> bool:
    if isinstance(setting, Mapping):
        return bool(setting.get(label, setting.get("split_entities_by_comma", True)))
    return bool(setting)


def _split_span(
    text: str,
    tokens: Sequence[Token],
    first: int,
    last: int,
    attribute_tags: Mapping[str, list[str]],
    split_by_comma: bool,
    bilou: bool = False,
) -> list[tuple[int, int]]:
    """Cut a tagged span where Rasa would start a new entity.

    Without BILOU, tokens join when at most one character separates them (or up to three of
    ``.,; `` when not splitting by comma). With BILOU the tags already say where an entity
    begins and ends, so a span is cut only where the role or group changes, or at a comma or
    semicolon when splitting by comma: "the uli derickson story: a film" tagged B I I I L stays one
    entity (Rasa cuts it at the colon and loses it).
    """
    pieces: list[tuple[int, int]] = []
    start = first
    for i in range(first + 1, last + 1):
        role_or_group_changed = any(values[i] != values[i - 1] for values in attribute_tags.values())
        gap = text[tokens[i - 1].end : tokens[i].start]
        if bilou:
            joined = not (split_by_comma and ("," in gap or ";" in gap))
        else:
            joined = len(gap) <= 1 or (
                not split_by_comma and len(gap) <= 3 and all(c in SINGLE_ENTITY_JOINERS for c in gap)
            )
        if role_or_group_changed or not joined:
            pieces.append((start, i - 1))
            start = i
    pieces.append((start, last))
    return pieces


def _entity(
    text: str,
    tokens: Sequence[Token],
    label: str,
    first: int,
    last: int,
    attribute_tags: Mapping[str, list[str]],
    confidences: Mapping[str, list[float]] | None,
) -> dict[str, Any]:
    start, end = tokens[first].start, tokens[last].end
    entity: dict[str, Any] = {"entity": label, "start": start, "end": end}
    if confidences is not None and "entity" in confidences:
        entity["confidence_entity"] = min(confidences["entity"][first : last + 1])
    for name in ("role", "group"):
        values = attribute_tags.get(name)
        if values is None or values[first] == OUTSIDE_TAG:
            continue
        entity[name] = values[first]
        if confidences is not None and name in confidences:
            entity[f"confidence_{name}"] = min(confidences[name][first : last + 1])
    entity["value"] = text[start:end]
    return entity
