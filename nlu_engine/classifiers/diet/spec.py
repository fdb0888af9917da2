"""What DIET trains: one frozen, typed specification, built by the component, read by the rest.

``DIETClassifier`` builds a :class:`TrainingSpec` from its ``Config`` and what it learned from
the data (:class:`Vocabularies`, the label features, the encoders it fine-tunes), and hands it
to ``training.fit``; the network (``model.DIETNetwork``) and resuming (``resume.plan``) read
the same object. Nothing below the component reads the component:

    Config ──► NetworkParams   (the network's shape and losses: ``model.py``, ``inference.py``)
           └─► TrainingOptions (how long, in what batches, at what rate: ``training.py``)
    data   ──► Vocabularies    (input widths, intents, tags, feature blocks: ``resume.py`` too)

Each field of :class:`NetworkParams` and :class:`TrainingOptions` is the ``Config`` field of
the same name and type (``tests/classifiers/diet/test_diet_spec.py`` holds them to it), except
the few resolved here: ``auto`` and ``softmax`` settled, per-attribute widths split into text
and label, ``transformer_size`` given its default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from nlu_engine.classifiers.diet.encoders import EncoderSlot
from nlu_engine.contract.component import ComponentConfig

#: feature blocks side by side: [origin, width] per featurizer, in order
Blocks = Sequence[Sequence[Any]]
#: ``transformer_size`` when the config leaves it unset (ResponseSelector's default)
DEFAULT_TRANSFORMER_SIZE = 256


@dataclass(frozen=True, kw_only=True)
class NetworkParams:
    """The hyperparameters the network is built from (and the parse graph is written with)."""

    # input: sparse features -> dense, concatenated, optionally unified and a hidden stack
    text_dense_dimension: int
    label_dense_dimension: int
    text_concat_dimension: int
    text_hidden_layers: tuple[int, ...]
    label_hidden_layers: tuple[int, ...]
    drop_rate: float
    drop_rate_attention: float
    connection_density: float
    regularization_constant: float
    use_sparse_input_dropout: bool
    use_dense_input_dropout: bool
    sparse_regularization: Literal["all_rows", "touched_rows", "rasa"]
    # transformer
    number_of_transformer_layers: int
    transformer_size: int
    number_of_attention_heads: int
    use_key_relative_attention: bool
    use_value_relative_attention: bool
    max_relative_position: int | None
    unidirectional_encoder: bool
    # heads and losses
    intent_classification: bool
    embedding_dimension: int
    number_of_negative_examples: int
    use_all_labels_as_negatives: bool | Literal["auto"]
    loss_type: Literal["cross_entropy", "margin"]
    similarity_type: Literal["inner", "cosine"]
    constrain_similarities: bool
    scale_loss: bool
    maximum_positive_similarity: float
    maximum_negative_similarity: float
    use_maximum_negative_similarity: bool
    negative_margin_scale: float
    use_masked_language_model: bool

    @classmethod
    def from_config(cls, config: ComponentConfig, widths: Mapping[str, int]) -> NetworkParams:
        """``config``'s network parameters resolved; ``widths``: the dense and concat widths of
        an attribute (``text``, ``label``) the config does not give."""
        loss_type = "cross_entropy" if _get(config, "loss_type") == "softmax" else _get(config, "loss_type")
        similarity_type = _get(config, "similarity_type")
        if similarity_type == "auto":
            similarity_type = "inner" if loss_type == "cross_entropy" else "cosine"
        size = _get(config, "transformer_size")
        dense = {**widths, **_get(config, "dense_dimension")}
        concat = {**widths, **_get(config, "concat_dimension")}
        hidden = {"text": [], "label": [], **_get(config, "hidden_layers_sizes")}
        return _project(
            cls, config,
            loss_type=loss_type,
            similarity_type=similarity_type,
            transformer_size=DEFAULT_TRANSFORMER_SIZE if size is None else size,
            text_dense_dimension=dense["text"],
            label_dense_dimension=dense["label"],
            text_concat_dimension=concat["text"],
            text_hidden_layers=tuple(hidden["text"]),
            label_hidden_layers=tuple(hidden["label"]),
        )


#: the optimizer steps the default number of epochs aims at, and its bounds (``resolve_epochs``)
MIN_STEPS, MIN_EPOCHS, MAX_EPOCHS = 1200, 20, 300


def resolve_epochs(epochs: int | None, batch_size: int | Sequence[int], examples: int,
                   steps: int = MIN_STEPS, min_epochs: int = MIN_EPOCHS) -> int:
    """``epochs`` as given, or by default enough for about ``steps`` optimizer steps, at least
    ``min_epochs`` and at most ``MAX_EPOCHS`` (1,200 steps: 20 epochs on SNIPS or
    NLU-Evaluation-Data, up to 300 on a small assistant's data, which has only one or two batches
    an epoch)."""
    if epochs is not None:
        return epochs
    sizes = [batch_size] if isinstance(batch_size, int) else batch_size
    mean_batch = (min(sizes) + max(sizes)) / 2
    steps_per_epoch = max(1, -(-examples // int(mean_batch)))
    return int(min(MAX_EPOCHS, max(min_epochs, -(-steps // steps_per_epoch))))


@dataclass(frozen=True, kw_only=True)
class TrainingOptions:
    """How the network is trained: epochs, batches, learning rate, evaluation, reporting."""

    epochs: int | None
    batch_size: int | tuple[int, ...]
    batch_strategy: Literal["balanced", "sequence"]
    drop_small_last_batch: bool
    max_micro_batch_size: int | None
    learning_rate: float
    learning_rate_schedule: Literal["constant", "linear_decay"]
    random_seed: int | None
    evaluate_every_number_of_epochs: int
    evaluate_on_number_of_examples: int
    early_stopping_patience: int
    checkpoint_model: bool
    tensorboard_log_directory: str | None
    tensorboard_log_level: Literal["epoch", "batch", "minibatch"]
    show_progress: bool
    run_eagerly: bool

    @classmethod
    def from_config(cls, config: ComponentConfig, epochs: int | None = None) -> TrainingOptions:
        """The config's options; ``epochs``, when given, in place of the config's (the
        component chose them from the data)."""
        size = _get(config, "batch_size")
        options = _project(cls, config, batch_size=size if isinstance(size, int) else tuple(size))
        return options if epochs is None else dataclasses.replace(options, epochs=epochs)


@dataclass(frozen=True, kw_only=True)
class Vocabularies:
    """What the component learned from the data before the network: the input widths, the
    labels and tags, and how the featurizers' blocks sit side by side (fine-tuning maps stored
    rows onto grown vocabularies by them; None when the model does not record them)."""

    seq_vocab: int  # sparse token feature width V
    sent_vocab: int  # sparse sentence feature width V'
    dense_seq_dim: int  # dense token feature width (0 = none)
    dense_sent_dim: int  # dense sentence feature width (0 = none)
    intents: tuple[str, ...]  # the labels, in the order of the label features' rows
    tags: Mapping[str, tuple[str, ...]]  # "entity" / "role" / "group" -> its tag names
    bilou: bool  # tags are BILOU-prefixed (and the CRF constrained to valid sequences)
    seq_blocks: Blocks | None = None
    sent_blocks: Blocks | None = None
    label_blocks: Blocks | None = None  # [] when the labels are one-hot

    @property
    def num_tags(self) -> dict[str, int]:
        return {kind: len(names) for kind, names in self.tags.items()}


@dataclass(frozen=True, kw_only=True, eq=False)
class TrainingSpec:
    """Everything ``training.fit`` and ``model.DIETNetwork`` read."""

    name: str  # the component's name, for messages and the progress bar
    network: NetworkParams
    training: TrainingOptions
    data: Vocabularies
    label_features: np.ndarray  # [N, V_label] bag of features per label (one-hot: [N, N])
    encoders: tuple[EncoderSlot, ...] = ()  # the featurizers' encoders fine-tuned with DIET


def _get(config: ComponentConfig, name: str) -> Any:
    return getattr(config, name)


def _project(cls: Any, config: ComponentConfig, **resolved: Any) -> Any:
    """``cls`` with each field the value ``resolved`` gives, else the config's of that name."""
    values = {f.name: _get(config, f.name) for f in dataclasses.fields(cls) if f.name not in resolved}
    return cls(**values, **resolved)
