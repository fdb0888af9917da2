"""A featurizer's encoder fine-tuned inside DIET: where its features sit, and its inputs.

The pipeline hands DIET the encoders a featurizer offers (``component.TrainableEncoder``). The
featurizer has written its frozen features on the training messages, so DIET learns their
width from them as from any dense featurizer's. The training batches leave those columns out
(``dense_features``, ``input_widths``); in the network (``model.DIETNetwork``), each encoder's
Keras layer computes them from the encoder's own inputs, which travel in every batch under the
slot's ``prefix``, and puts them back in their place. DIET's code knows no particular encoder:
only the protocol.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nlu_engine.contract.component import TrainableEncoder
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import TEXT, Features, Message


@dataclass(frozen=True)
class EncoderSlot:
    """One fine-tuned encoder in DIET's graph (the network builds its Keras layer:
    ``DIETNetwork.encoder_layers``)."""

    encoder: TrainableEncoder
    prefix: str  # its inputs' names in a batch: prefix + the encoder's own key
    seq_columns: tuple[int, int]  # [start, stop) of its columns in the dense token features
    sent_columns: tuple[int, int] | None  # ... in the dense sentence features (None: none)
    #: the tuned weights its layer starts from (``TrainableEncoder.build``; None: pretrained)
    start: dict[str, np.ndarray] | None = None


def dense_columns(
    message: Message, kind: str, origins: list[str] | None, origin: str
) -> tuple[int, int] | None:
    """Where ``origin``'s columns sit among a message's dense ``kind`` features of the text, in
    the order ``Message.features_for`` stacks them; None when it wrote none."""
    start = 0
    for features in message.features:
        if features.attribute != TEXT or features.kind != kind or features.is_sparse:
            continue
        if origins and features.origin not in origins:
            continue
        width = int(features.matrix.shape[-1])
        if features.origin == origin:
            return start, start + width
        start += width
    return None


def encoder_slots(
    encoders: Sequence[TrainableEncoder], example: Message, origins: list[str] | None,
    starts: Sequence[dict[str, np.ndarray] | None] = (),
) -> list[EncoderSlot]:
    """A slot per encoder, its columns read from a featurized training example; ``starts``: the
    tuned weights each encoder's layer starts from (none: the pretrained ones)."""
    slots = []
    for index, encoder in enumerate(encoders):
        origin = encoder.origin()
        seq = dense_columns(example, "sequence", origins, origin)
        if seq is None:
            raise ConfigError(
                f"DIETClassifier: the training messages carry no token features from '{origin}', "
                "the encoder it was given to fine-tune; put that featurizer before DIETClassifier"
            )
        slots.append(EncoderSlot(encoder, f"encoder{index}_", seq,
                                 dense_columns(example, "sentence", origins, origin),
                                 starts[index] if index < len(starts) else None))
    return slots


def ragged_inputs(slots: list[EncoderSlot], messages: list[Message]) -> dict[str, list[np.ndarray]]:
    """Every slot's inputs for ``messages``: name -> one array per message (its own length)."""
    inputs: dict[str, list[np.ndarray]] = {}
    for slot in slots:
        per_message = slot.encoder.encode_inputs(messages)
        for key in per_message[0] if per_message else ():
            inputs[slot.prefix + key] = [arrays[key] for arrays in per_message]
    return inputs


def dense_features(
    message: Message, kind: str, origins: list[str] | None, without: set[str]
) -> np.ndarray | None:
    """A message's dense ``kind`` features of the text stacked as ``Message.features_for`` stacks
    them, leaving out the origins ``without`` (None when nothing is left)."""
    found = [
        f.matrix for f in message.features
        if f.attribute == TEXT and f.kind == kind and not f.is_sparse
        and (not origins or f.origin in origins) and f.origin not in without
    ]
    return np.concatenate(found, axis=-1).astype(np.float32) if found else None


def input_widths(seq_dim: int, sent_dim: int, slots: list[EncoderSlot]) -> tuple[int, int]:
    """The widths of the dense token and sentence features a training batch carries: all but the
    columns the slots' layers compute in the graph."""
    seq = sum(stop - start for start, stop in (s.seq_columns for s in slots))
    sent = sum(stop - start for start, stop in (s.sent_columns for s in slots if s.sent_columns))
    return seq_dim - seq, sent_dim - sent


def _recomputed_features(
    messages: list[Message], encoders: Sequence[TrainableEncoder]
) -> list[list[Features]]:
    """Each message's features with the encoders' computed anew by their featurizers (with the
    weights the encoders hold now), each where the old one sat: the columns keep the order the
    messages stack them in at parse time."""
    origins = {encoder.origin() for encoder in encoders}
    copies = [dataclasses.replace(m, features=[]) for m in messages]
    for encoder in encoders:
        encoder.process(copies)  # type: ignore[attr-defined]  # the featurizer's own process
    result = []
    for message, copy in zip(messages, copies, strict=True):
        computed = {(f.origin, f.kind, f.attribute): f for f in copy.features}
        result.append([computed.get((f.origin, f.kind, f.attribute), f) if f.origin in origins else f
                       for f in message.features])
    return result


def with_tuned_features(messages: list[Message], encoders: Sequence[TrainableEncoder]) -> list[Message]:
    """Copies of training messages whose fine-tuned encoders' features are computed anew, with
    the tuned weights the encoders adopted (the messages themselves keep their placeholders)."""
    if not encoders:
        return messages
    return [dataclasses.replace(m, features=features)
            for m, features in zip(messages, _recomputed_features(messages, encoders), strict=True)]


def with_pretrained_features(messages: list[Message], encoders: Sequence[TrainableEncoder]) -> None:
    """The encoders' features computed on ``messages`` in place of the placeholders their
    featurizers wrote on the training messages (``TrainableEncoder``), once the encoders keep
    their pretrained weights (or those of the contrastive phase, ``contrastive.py``)."""
    for message, features in zip(messages, _recomputed_features(messages, encoders), strict=True):
        message.features = features
