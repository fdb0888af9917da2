"""The component contract: one small base class per kind (a tokenizer's, which splits labels
and applies ``token_pattern``, is ``nlu_engine.tokenizers.base.BaseTokenizer``).

A component's hyperparameters are the fields of its ``Config``: a frozen dataclass nested in
the class, holding each parameter's type, default and numeric bounds (:func:`param`), with a
``validate`` method for checks between fields. ``Component.__init__`` builds the config (from
keyword arguments or a ready ``Config``), checks it and stores it as ``self.config``; nothing
else happens there. A subclass changes a default by redeclaring the field in its own ``Config``
(bounds declared by the parent still apply). ``train(data)`` learns state (attributes ending in
``_``), ``process(messages)`` handles a batch and writes only what the component provides,
``persist(directory)`` writes JSON / ``.npz`` / weights into its own folder and ``load``
restores it: no pickle, no code executed on load.

Incremental training (``nlu-engine train --finetune``) adds an optional hook:
``finetune(data, previous, options)`` learns this component's state from the new data starting
from ``previous``, the same component as the model being fine-tuned stored it (loaded), or raises
``CannotResume`` saying why not; the pipeline then calls ``train(data)`` instead. A featurizer
that resumes keeps the meaning of every feature column it had and only appends new ones, so the
components after it can keep what they learned about each column. The pipeline decides which
components need training at all, from fingerprints of their config and of the data they learn
from (:meth:`Component.data_fingerprint`); components never see the model's manifest.

``requires`` and ``provides`` name what flows between components: ``tokens``,
``sparse_features``, ``dense_features``, ``intent``, ``entities``, ``response``. The
pipeline checks them when it is built. ``links`` names the components one needs before it
(:class:`Link`), checked with the config and resolved by the pipeline; components know each
other by their names in the config (:meth:`Component.pipeline_name`), never by position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.hyperparameters import (
    ComponentConfig,
    build_config,
    field_names,
    param,
)
from nlu_engine.contract.hyperparameters import (
    config_fields as config_fields,  # re-exported: the components import it from here
)
from nlu_engine.contract.languages import encoder_languages
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

TOKENS = "tokens"
SPARSE_FEATURES = "sparse_features"
DENSE_FEATURES = "dense_features"
FEATURES = "features"  # either kind satisfies a requirement for "features"
INTENT = "intent"
ENTITIES = "entities"
RESPONSE = "response"
SPACY_DOC = "spacy_doc"

class CannotResume(Exception):
    """Raised by ``Component.finetune``: this component cannot continue from its stored state
    (the message says why, in a few words); the pipeline trains it from scratch instead."""


@dataclass(frozen=True)
class FinetuneOptions:
    """How fine-tuning trains, for the components that resume (CLI ``--epoch-fraction``,
    ``--rehearsal-fraction``).

    ``epoch_fraction``: the share of the epochs a full training would run (Rasa's
    ``--epoch-fraction``). ``rehearsal_fraction``: the share of the examples the model was
    already trained on that is mixed into each epoch, drawn anew every epoch, next to every new
    or changed example; it keeps the model from forgetting what the new examples do not show.
    ``learning_rate_fraction``: the learning-rate schedule starts again, from this share of the
    configured learning rate.

    The defaults keep a fine-tune's training work to a small part of a full training's (0.3 of
    the epochs, each over the new examples and 0.2 of the known ones), so that start-up,
    featurizing the data and tracing the graphs, which a fine-tune pays in full, still leave it
    well under a full training's time; the stored network has learned the rest.
    """

    epoch_fraction: float = 0.3
    rehearsal_fraction: float = 0.2
    learning_rate_fraction: float = 0.5

    def __post_init__(self) -> None:
        for name in ("epoch_fraction", "rehearsal_fraction", "learning_rate_fraction"):
            value = getattr(self, name)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            zero_ok = name == "rehearsal_fraction"
            if not number or not (0 <= value <= 1) or (value == 0 and not zero_ok):
                floor = "0" if zero_ok else "above 0"
                raise ConfigError(
                    f"{name.replace('_', '-')} must be a number from {floor} to 1, got {value!r}"
                )


@dataclass(frozen=True)
class EncoderOptimization:
    """How a fine-tuned encoder's weights are trained: ``learning_rate`` after a linear warm-up
    over ``warmup_fraction`` of the steps, then a linear decay to 0; each layer further down
    trains at ``layerwise_decay`` times the rate of the layer above it. ``bfloat16``: the
    encoder's products would run in bfloat16, so the trainer asks TensorFlow for oneDNN."""

    learning_rate: float
    layerwise_decay: float = 1.0
    warmup_fraction: float = 0.1
    bfloat16: bool = False


class TrainableEncoder(Protocol):
    """An encoder a featurizer offers to be fine-tuned inside a later component's network.

    On the training messages the featurizer writes zeros of its features' widths
    (``process_training_data``): the component that fine-tunes it (DIET), the only one that may
    read them, learns their origin and width from them and computes the values in its own graph
    with ``build()``'s layer, so the frozen values are never computed. A consumer that decides
    to keep the encoder as pretrained calls the featurizer's ``process`` on the messages it reads
    (after removing the placeholders). At the end of training the consumer hands the tuned
    weights back through ``adopt``; from then on the featurizer's own forward pass writes the
    tuned features.
    """

    def origin(self) -> str:
        """The ``Features.origin`` of the features the encoder computes."""
        ...

    def encode_inputs(self, messages: list[Message]) -> list[dict[str, np.ndarray]]:
        """Per message, the layer's inputs: arrays whose first axis is the message's own
        length (e.g. sub-tokens); the consumer pads them to a batch with zeros."""
        ...

    def build(self, start: dict[str, np.ndarray] | None = None) -> Any:
        """A Keras layer holding the trainable weights: ``layer(inputs, num_words, training)``
        -> (sequence [B, T, H], sentence [B, H]); ``layer.variable_groups()`` (top first) and
        ``layer.tuned_weights()`` (name -> array, what ``adopt`` takes). Its weights are the
        pretrained ones, or ``start`` (tuned weights by the names ``adopt`` takes) where given."""
        ...

    def optimization(self) -> EncoderOptimization:
        """The encoder's own learning-rate settings."""
        ...

    def adopt(self, weights: dict[str, np.ndarray]) -> None:
        """Take the tuned weights: the featurizer computes its features with them from now on."""
        ...

    def pretrained_weights(self) -> dict[str, np.ndarray]:
        """The trainable weights as they were pretrained: what ``adopt`` takes when the
        consumer decides not to tune the encoder (too few examples to tune it on)."""
        ...


@dataclass(frozen=True)
class Link:
    """A component this one needs before it in the pipeline, declared by its class
    (:meth:`Component.links`, beside ``requires`` and ``provides``), checked when the config is
    validated (``assembly.config.check_links``: a one-line error naming both components) and
    resolved when the pipeline is built (``assembly.pipeline.resolve_links``), as spaCy's
    listeners declare the component they feed on.

    The linked components are the earlier ones whose name is one of ``names`` (any, when empty),
    that provide ``provides`` (when given) and whose class sets ``able`` True (when given). At
    build, the pipeline sets ``asks`` True on each of them (an attribute their base declares:
    ``EntityExtractor.records_held_out_entities``), then calls the component's ``link``.
    """

    #: what is needed, in the error: "an intent classifier", "CRFEntityExtractor"
    what: str
    #: what to do when it is missing: "add DIETClassifier or LogisticRegressionClassifier above it"
    advice: str
    names: tuple[str, ...] = ()
    provides: str = ""
    able: str = ""
    asks: str = ""
    #: the config field that names the linked component ("extractors"), for the error
    named_in: str = ""

    def accepts(self, cls: type[Component]) -> bool:
        """Whether a component of ``cls`` placed before it satisfies this link."""
        return ((not self.names or cls.component_name() in self.names)
                and (not self.provides or self.provides in cls.provides)
                and (not self.able or getattr(cls, self.able, False) is True))


class Component:
    """Base of every pipeline component."""

    @dataclass(frozen=True, kw_only=True)
    class Config(ComponentConfig):
        """No hyperparameters: a component with some nests a subclass of its parent's Config."""

    config: ComponentConfig

    #: what this component adds to a message
    provides: ClassVar[tuple[str, ...]] = ()
    #: what must be provided by an earlier component (all of them)
    requires: ClassVar[tuple[str, ...]] = ()
    #: True for components whose ``process`` must also run over the training data
    processes_training_data: ClassVar[bool] = False
    #: False for components whose ``train`` learns nothing from the examples (a tokenizer, a
    #: frozen pre-trained featurizer): fine-tuning keeps them as they are
    learns_from_data: ClassVar[bool] = True

    #: set by the pipeline: the component's place in the pipeline, its name there (the step's
    #: ``name``, with a suffix when the name appears more than once: ``assembly.config.step_names``;
    #: empty in a model from before names) and the config's language
    index: int = 0
    step_name: str = ""
    language: str = "en"

    def __init__(self, config: ComponentConfig | None = None, /, **params: Any) -> None:
        """Store the hyperparameters: ``config``, or a ``Config`` built from ``params``."""
        if config is None:
            try:
                config = build_config(self.Config, params)
            except ConfigError as error:
                raise ConfigError(f"{self.component_name()}: {error}") from None
        elif params:
            raise TypeError(f"{self.component_name()}() takes a config or keyword parameters, not both")
        elif not isinstance(config, self.Config):
            raise TypeError(
                f"{self.component_name()}() takes a {self.Config.__qualname__}, "
                f"not a {type(config).__qualname__}"
            )
        self.config = config

    def __setattr__(self, name: str, value: Any) -> None:
        """Refuse to shadow a hyperparameter: that assignment would be silently ignored."""
        if name in field_names(self.Config):
            raise AttributeError(
                f"{self.component_name()}.{name} is a hyperparameter: set it in the config, e.g. "
                f"component.config = dataclasses.replace(component.config, {name}=...)"
            )
        super().__setattr__(name, value)

    @classmethod
    def component_name(cls) -> str:
        return cls.__name__

    def pipeline_name(self) -> str:
        """The name the other components know this one by (its features' origin, its recorded
        intent scores): its name in the config, which moving it does not change; in a model
        trained before names were kept, and for a component built outside a pipeline, its class
        and position, as that model stored them."""
        return self.step_name or f"{self.component_name()}_{self.index}"

    @classmethod
    def links(cls, config: ComponentConfig) -> tuple[Link, ...]:
        """The components this one needs before it (:class:`Link`), given its config; none by
        default. The pipeline checks them with the config and resolves them when it is built."""
        return ()

    def get_config(self) -> dict[str, Any]:
        """The hyperparameters this instance was built with, every one by name."""
        return self.config.as_dict()

    def trainable_encoder(self) -> TrainableEncoder | None:
        """The encoder this component offers to be fine-tuned by a later one, or None.

        The pipeline calls it when it is built, so it may check the encoder's files and raise a
        ConfigError before anything trains."""
        return None

    def reads_features_from(self, origin: str) -> bool:
        """Whether this component reads the features a featurizer writes under ``origin``: it
        requires features, and its config's ``featurizers`` list, if it has one, is empty (all)
        or names ``origin``."""
        listed = getattr(self.config, "featurizers", None)
        return (any(need in (FEATURES, SPARSE_FEATURES, DENSE_FEATURES) for need in self.requires)
                and (not listed or origin in listed))

    def link(self, before: Sequence[Component]) -> None:
        """Take what this component needs to know of the components ``before`` it in the
        pipeline (the languages of the encoders an intent combiner weighs). ``Pipeline.build``
        calls it once, before training, after resolving the declared :meth:`links`; what it
        learns is persisted as any learned state."""

    def accept_trainable_encoder(self, encoder: TrainableEncoder) -> bool:
        """Take ``encoder`` to fine-tune while training; False when this component cannot.

        The pipeline offers it, when it is built, to the one later component that reads the
        encoder's features."""
        return False

    def train(self, data: TrainingData) -> None:
        """Learn state from the training data."""

    def process(self, messages: list[Message]) -> None:
        """Annotate a batch of messages in place."""

    def process_training_data(self, messages: list[Message]) -> None:
        """What the trained component writes on its own training examples
        (``processes_training_data``): what ``process`` writes, unless the component says
        otherwise (a featurizer whose encoder is fine-tuned writes placeholders:
        ``TrainableEncoder``)."""
        self.process(messages)

    def default_runtime(self) -> str | None:
        """The parse runtime (``nn.onnx_runtime.RUNTIMES``) this component makes the model's
        default when the config names none (None: no preference)."""
        return None

    def use_runtime(self, runtime: str) -> None:
        """Parse in ``runtime`` from now on (the model's; a component with no network ignores it)."""

    def persist(self, directory: Path) -> None:
        """Write learned state into ``directory`` (created by the caller)."""

    @classmethod
    def load(cls, directory: Path, config: ComponentConfig) -> Component:
        """Rebuild a trained component from ``config``, its ``Config`` as the model archive
        stores it (built and checked once by the loader), and what ``persist`` wrote: start with
        ``cls(config)``."""
        return cls(config)

    def finetune(self, data: TrainingData, previous: Component, options: FinetuneOptions) -> None:
        """Learn state from ``data`` starting from ``previous`` (this component as the model
        being fine-tuned stored it, loaded; left unchanged), or raise CannotResume.

        Called on a new instance built from the fine-tuning config, instead of ``train``.
        """
        raise CannotResume("no incremental training")

    def data_fingerprint(self, data: TrainingData) -> str:
        """A hash of what this component learns from in ``data``: all of it, or nothing when
        it learns nothing from data. Fine-tuning reuses a component as it is while this, its
        config and the fingerprints of the components before it are unchanged."""
        return data.fingerprint() if self.learns_from_data else ""


class Featurizer(Component):
    """A sparse featurizer unless it says otherwise (DenseFeaturizer)."""

    requires = (TOKENS,)
    provides = (SPARSE_FEATURES,)
    processes_training_data = True

    def origin(self) -> str:
        """The name written into ``Features.origin``: its name in the pipeline, or the config's
        ``alias`` when it has one."""
        alias = getattr(self.config, "alias", None)
        return alias or self.pipeline_name()


class DenseFeaturizer(Featurizer):
    provides = (DENSE_FEATURES,)

    def encoder(self) -> str | None:
        """The pre-trained encoder behind the features, by its name in the language table
        (``contract.languages``); None for features learnt from the training data alone."""
        return None

    def languages(self) -> frozenset[str] | None:
        """The languages the features carry meaning in: the table's rows that name the encoder;
        None for every language (an encoder no row names, or no encoder)."""
        name = self.encoder()
        return encoder_languages(name) if name else None


class IntentClassifier(Component):
    """Predicts the intent and its ranking. An intent classifier is an estimator (raw label
    probabilities) whose confidences one module calibrates, unless ``calibration`` is off:
    ``nlu_engine.classifiers.held_out`` (a held-out share, through
    ``classifiers.calibrated.CalibratedIntentClassifier``, or cross-fitting), which also records
    the held-out predictions an ``IntentCombiner`` weighs it on. One that cannot calibrate
    (``calibrates`` False: keyword matching) says so once and stores its confidences marked
    uncalibrated."""

    provides = (INTENT,)
    #: whether its confidences can be calibrated (the contract suite checks their ECE)
    calibrates: bool = True
    #: whether it replaces the ranking of an intent classifier before it (``False``: it keeps
    #: an earlier prediction unless it has one of its own, as keyword matching does)
    replaces_ranking: bool = True

    #: set by the pipeline: a later intent classifier replaces this one's ranking before
    #: anything reads it (``assembly.pipeline.superseded_rankings``), so it need not make one
    ranking_superseded: bool = False

    #: whether it leaves its raw probabilities for an ``IntentCombiner`` (``classifiers/scores``),
    #: which needs one such classifier before it (its ``links``)
    records_intent_scores: bool = False

    def scorer_name(self) -> str:
        """The name an intent combiner knows this classifier's recorded scores by
        (``classifiers/scores``)."""
        return self.pipeline_name()

    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        #: hold out ``calibration_share`` of each intent's examples and fit the confidences on them
        calibration: bool = True
        calibration_share: float = param(0.1, low=0.01, high=0.5)
        #: the intent whose examples are out of scope (default: ``out_of_scope`` when the data has it)
        out_of_scope_intent: str | None = None


class EntityExtractor(Component):
    provides = (ENTITIES,)

    #: set by the pipeline when an ``EntityChooser`` links to this extractor (``Link.asks``): it
    #: records the entities it predicts for the training examples it holds out
    #: (``extractors.entity_chooser.record_held_out``); one that holds nothing out ignores it
    records_held_out_entities: bool = False
