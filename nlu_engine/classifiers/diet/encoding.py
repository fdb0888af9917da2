"""DIET's messages <-> tensors: what training learns of its inputs before the network, the
label features, and messages as the arrays the network and its parse graph read.

- :func:`learn_vocabularies`: the input widths and feature blocks of the training examples,
  the labels and the tag vocabularies (a ``spec.Vocabularies``);
- :func:`label_features`: one row per label, the bag of its features (or one-hot);
- :func:`encode`: messages -> ``batching.EncodedData`` (with label and tag ids for training).

Plain functions over explicit arguments: ``component.DIETClassifier`` keeps what they return
as its attributes (``seq_vocab_``, ``intents_``, ``tag_vocab_``, ``label_blocks_``, ...) and
hands it back as a ``spec.Vocabularies`` (``DIETClassifier.vocabularies``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nlu_engine.classifiers.diet.batching import EncodedData, stack_blocks
from nlu_engine.classifiers.diet.encoders import EncoderSlot, dense_features, input_widths
from nlu_engine.classifiers.diet.spec import Vocabularies
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import bilou

#: a message's label (``DIETClassifier.label_of``): its intent, or a response key
LabelOf = Callable[[Message], str | None]


def text_features(message: Message, kind: str, sparse: bool, origins: list[str] | None):
    """The text features of ``kind`` the featurizers in ``origins`` (all when None) wrote,
    side by side, sparse or dense; None when there are none."""
    return message.features_for(TEXT, kind, sparse, origins)  # type: ignore[arg-type]


def sparse_blocks(message: Message, attribute: str, kind: str,
                  origins: list[str] | None = None) -> list[list[Any]]:
    """[origin, width] of each sparse block ``features_for`` stacks side by side, in order:
    fine-tuning maps the stored input rows block by block onto grown vocabularies."""
    return [[f.origin, int(f.matrix.shape[1])] for f in message.features
            if f.attribute == attribute and f.kind == kind and f.is_sparse
            and (not origins or f.origin in origins)]


def learn_vocabularies(data: TrainingData, examples: list[Message], labels: list[str], *,
                       origins: list[str] | None, entity_recognition: bool,
                       bilou_tags: bool) -> Vocabularies:
    """The input widths and sparse blocks of ``examples`` (the first one's: the featurizers
    give every message the same widths), ``labels`` and, with ``entity_recognition``, the tag
    vocabularies of ``data``; ``label_blocks`` left unset (:func:`label_features`)."""
    first = examples[0]
    seq = text_features(first, "sequence", True, origins)
    sent = text_features(first, "sentence", True, origins)
    dseq = text_features(first, "sequence", False, origins)
    dsent = text_features(first, "sentence", False, origins)
    seq_vocab = 0 if seq is None else int(seq.shape[1])
    dense_seq_dim = 0 if dseq is None else int(dseq.shape[1])
    if not (seq_vocab or dense_seq_dim):
        raise ConfigError(
            "DIETClassifier: the messages have no token features; add a featurizer such as "
            "CountVectorsFeaturizer before DIETClassifier"
        )
    tags = tag_vocabularies(data, bilou_tags) if entity_recognition else {}
    return Vocabularies(
        seq_vocab=seq_vocab, sent_vocab=0 if sent is None else int(sent.shape[1]),
        dense_seq_dim=dense_seq_dim, dense_sent_dim=0 if dsent is None else int(dsent.shape[1]),
        intents=tuple(labels), tags={kind: tuple(names) for kind, names in tags.items()},
        bilou=bilou_tags, seq_blocks=sparse_blocks(first, TEXT, "sequence", origins),
        sent_blocks=sparse_blocks(first, TEXT, "sentence", origins),
    )


def tag_vocabularies(data: TrainingData, bilou_tags: bool) -> dict[str, list[str]]:
    """Per tag kind the data has (``entity``, ``role``, ``group``): ``O`` and its values, each
    with the BILOU prefixes when ``bilou_tags``."""
    vocabularies: dict[str, list[str]] = {}
    for kind, values in (("entity", data.entity_types), ("role", data.roles), ("group", data.groups)):
        if not values:
            continue
        if bilou_tags:
            vocabularies[kind] = ["O"] + [f"{p}-{v}" for v in values for p in "BILU"]
        else:
            vocabularies[kind] = ["O", *values]
    return vocabularies


def label_features(examples: list[Message], labels: Sequence[str], label_of: LabelOf,
                   attribute: str) -> tuple[np.ndarray, list[list[Any]]]:
    """(a bag of the ``attribute``'s sparse features per label [N, V], in the order of
    ``labels``, and the blocks of those features); one-hot [N, N] and no blocks when not every
    label's examples carry features of the same width."""
    n = len(labels)
    rows: dict[str, np.ndarray] = {}
    for message in examples:
        label = label_of(message)
        if label in rows or label not in labels:
            continue
        seq = message.features_for(attribute, "sequence", True)
        sent = message.features_for(attribute, "sentence", True)
        parts = []
        if seq is not None:
            parts.append(np.asarray(seq.sum(axis=0)).ravel())
        elif sent is not None:
            parts.append(sent.toarray().ravel())
        if parts:
            rows[str(label)] = np.concatenate(parts)
    if len(rows) == n and n and len({r.shape for r in rows.values()}) == 1:
        first = next(m for m in examples if label_of(m) in rows)
        seq = first.features_for(attribute, "sequence", True)
        kind = "sequence" if seq is not None else "sentence"
        return (np.stack([rows[name] for name in labels]).astype(np.float32),
                sparse_blocks(first, attribute, kind))
    return np.eye(n, dtype=np.float32), []  # one-hot: a column per label


def encode(messages: list[Message], vocabularies: Vocabularies, origins: list[str] | None,
           label_of: LabelOf | None = None, slots: Sequence[EncoderSlot] = ()) -> EncodedData:
    """The messages as arrays; with ``label_of`` (training) their label and tag ids too. The
    dense columns of fine-tuned encoders (``slots``) are left out: the network computes them."""
    lengths = np.array([max(len(m.tokens.get(TEXT, [])), 1) for m in messages], np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    seq_blocks = [m.sparse_blocks(TEXT, "sequence", origins) for m in messages]
    sent_blocks = [m.sparse_blocks(TEXT, "sentence", origins) for m in messages]
    without = {slot.encoder.origin() for slot in slots}
    seq_dim, sent_dim = input_widths(vocabularies.dense_seq_dim, vocabularies.dense_sent_dim, list(slots))
    dense_seq, dense_sent = [], []
    for message, n in zip(messages, lengths, strict=True):
        if seq_dim:
            d = dense_features(message, "sequence", origins, without)
            dense_seq.append(d if d is not None and d.shape[0] == n else
                             np.zeros((n, seq_dim), np.float32))
        if sent_dim:
            d = dense_features(message, "sentence", origins, without)
            dense_sent.append(d if d is not None else np.zeros((1, sent_dim), np.float32))
    tags: dict[str, np.ndarray] = {}
    label_ids = np.full(len(messages), -1, np.int32)
    if label_of is not None:
        index = {name: i for i, name in enumerate(vocabularies.intents)}
        label_ids = np.array([index.get(label_of(m) or "", -1) for m in messages], np.int32)
        tags = tag_ids(messages, lengths, vocabularies)
    return EncodedData(
        lengths=lengths,
        offsets=offsets,
        seq=stack_blocks(seq_blocks, lengths, vocabularies.seq_vocab),
        sent=stack_blocks(sent_blocks, np.ones(len(messages), np.int64), vocabularies.sent_vocab),
        dense_seq=np.concatenate(dense_seq).astype(np.float32) if dense_seq else None,
        dense_sent=np.concatenate(dense_sent).astype(np.float32) if dense_sent else None,
        label_ids=label_ids,
        tags=tags,
    )


def tag_ids(messages: list[Message], lengths: np.ndarray,
            vocabularies: Vocabularies) -> dict[str, np.ndarray]:
    """Per tag kind: the tag id of every token of the messages, in order [sum(lengths)] (``O``
    for a tag the vocabulary does not know; messages without tokens count one)."""
    tags: dict[str, np.ndarray] = {}
    for kind, vocabulary in vocabularies.tags.items():
        ids = {tag: i for i, tag in enumerate(vocabulary)}
        per_token = []
        for message, n in zip(messages, lengths, strict=True):
            tokens = message.tokens.get(TEXT, [])
            names = bilou.entity_tags(tokens, message.entities, kind, vocabularies.bilou)
            row = [ids.get(t, 0) for t in names] or [0]
            per_token.append(np.array(row[:n] + [0] * (n - len(row)), np.int32))
        tags[kind] = np.concatenate(per_token) if per_token else np.zeros(0, np.int32)
    return tags
