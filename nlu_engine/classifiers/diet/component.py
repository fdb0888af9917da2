"""DIETClassifier: the component around the DIET network.

Its config, training and fine-tuning (``training.fit`` on a ``spec.TrainingSpec``, resuming
through ``resume.py``), the calibration (``calibrating.py``) and batched prediction
(``inference.py``, the whole network one ONNX graph, ``onnx_graph.py``). Messages become
arrays in ``encoding.py``; ``storage.py`` holds the storage format (``persist`` / ``load``).
The network itself is in ``model.py``.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from nlu_engine.classifiers import calibration, scores
from nlu_engine.classifiers.calibrated import CalibratedIntentClassifier
from nlu_engine.classifiers.diet import encoding, storage
from nlu_engine.classifiers.diet.calibrating import IN_SCOPE_VECTOR, CalibratedDIET
from nlu_engine.classifiers.diet.multiplying import MultipliedExamples
from nlu_engine.classifiers.diet.resume import StoredModel, example_hashes, plan
from nlu_engine.classifiers.diet.spec import (
    NetworkParams,
    TrainingOptions,
    TrainingSpec,
    Vocabularies,
)
from nlu_engine.classifiers.entity_calibration import EntityCalibration
from nlu_engine.classifiers.ranking import write_intent
from nlu_engine.classifiers.sentence_head import SentenceHead
from nlu_engine.contract.component import (
    ENTITIES,
    FEATURES,
    INTENT,
    CannotResume,
    Component,
    EntityExtractor,
    FinetuneOptions,
    TrainableEncoder,
    param,
)
from nlu_engine.contract.errors import NOTICE, ConfigError
from nlu_engine.contract.message import INTENT as INTENT_ATTRIBUTE
from nlu_engine.contract.message import TEXT, Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import bilou

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.classifiers.diet.encoders import EncoderSlot

PREDICT_BATCH = 64

logger = logging.getLogger(__name__)


class DIETClassifier(MultipliedExamples, CalibratedDIET, CalibratedIntentClassifier, EntityExtractor):
    """Dual Intent and Entity Transformer, with Rasa's parameter names and meanings.

    Defaults that differ from Rasa 3.6 (see the README): ``epochs`` 20 instead of 300 (more on
    small data, see ``spec.resolve_epochs``) with a
    learning rate that decays linearly to 10% (``learning_rate_schedule``),
    ``random_seed`` 42 instead of a time-based seed (reproducible by default),
    ``use_key_relative_attention`` / ``use_value_relative_attention`` on (the paper's model),
    ``connection_density`` 1.0 (the paper's ``weight_sparsity: 0``),
    ``use_all_labels_as_negatives`` ``auto``: the intent loss is a softmax over every intent when
    there are more intents than ``number_of_negative_examples`` (``model.all_labels_as_negatives``).
    """

    provides = (INTENT, ENTITIES)
    requires = (FEATURES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(CalibratedIntentClassifier.Config):
        epochs: int | None = param(None, low=1)
        batch_size: int | list[int] = param([64, 256], low=1)
        batch_strategy: Literal["balanced", "sequence"] = "balanced"
        learning_rate: float = param(0.001, low=0)
        learning_rate_schedule: Literal["constant", "linear_decay"] = "linear_decay"
        random_seed: int | None = 42
        #: with fewer training examples than this, the held-out share joins the training for its
        #: last ``calibration_join_share`` of the epochs, once the calibration is fitted on it
        #: (small data loses most by holding examples out); 0: never
        calibration_refit_below: int = param(2000, low=0)
        calibration_join_share: float = param(0.25, low=0.0, high=1.0)
        #: when the median intent has fewer examples than this and the messages have dense
        #: sentence features, a logistic regression on those ranks the intents, calibrated by
        #: cross-fitting, and the network trains once, for the entities
        #: (``classifiers/sentence_head.py``); 0: never
        sentence_head_below: int = param(50, low=0)
        #: the network's transformer layers when the sentence head ranks the intents (the
        #: network then learns the entities): ``auto`` is none when a language model's token
        #: states are among the inputs and the examples hold fewer than
        #: ``head_transformer_entities`` annotated entities (the states already see the whole
        #: message; without a transformer over them a few hundred entities taught about as much
        #: in half the time: BENCHMARKS.md), else ``number_of_transformer_layers``: a bot whose
        #: median intent is small but whose entities are many (a few big intents and a long
        #: tail) keeps the context its entities need
        head_transformer_layers: int | Literal["auto"] = param("auto", low=0)
        head_transformer_entities: int = param(1000, low=0)
        #: pairs drawn for each training example to tune a fine-tuned language model's layers
        #: contrastively (SetFit's cosine loss, ``contrastive.py``) before DIET's own training, or
        #: before the sentence head reads its vectors; 0: no contrastive phase. Off: it lowered
        #: the head's accuracy at 5 and 10 examples an intent (BENCHMARKS.md, "Tried and not
        #: adopted"), and the head's cross-fitted calibration then reads vectors of an encoder
        #: tuned on the held-out examples too (DIET's held-out share is left out of it)
        contrastive_pairs: int = param(0, low=0, high=64)
        #: ``confidence_entity`` mapped by a Platt map fitted on the entities DIET predicted for
        #: held-out training examples (``classifiers/entity_calibration.py``): ``when_held_out``,
        #: whenever DIET holds examples out anyway (its intent calibration; an EntityChooser's
        #: share); ``hold_out``, on few examples an intent too, where the sentence head ranks
        #: the intents and nothing else is held out: a share joins the last epochs, as for an
        #: EntityChooser; ``off``: the CRF's marginals as they are
        entity_calibration: Literal["when_held_out", "hold_out", "off"] = "when_held_out"
        #: variants of each training example with an entity, its values swapped for others of
        #: the same type (annotated, lookup tables, synonyms), that the network trains on beside
        #: it, in as many optimizer steps; at most ``multiplying.MAX_MULTIPLIED`` in all; ``auto``:
        #: two, swapping only the types a lookup table or synonym lists; 0: none
        #: (``multiplying.py``; BENCHMARKS.md, "Values users already wrote")
        entity_swaps: int | Literal["auto"] = param("auto", low=0, high=20)
        hidden_layers_sizes: dict[str, list[int]] = param({"text": [], "label": []}, low=1)
        share_hidden_layers: bool = False
        transformer_size: int | None = param(256, low=1)
        number_of_transformer_layers: int = param(2, low=0)
        number_of_attention_heads: int = param(4, low=1)
        use_key_relative_attention: bool = True
        use_value_relative_attention: bool = True
        max_relative_position: int | None = param(5, low=1)
        unidirectional_encoder: bool = False
        embedding_dimension: int = param(20, low=1)
        dense_dimension: dict[str, int] = param({"text": 128, "label": 20}, low=1)
        concat_dimension: dict[str, int] = param({"text": 128, "label": 20}, low=1)
        number_of_negative_examples: int = param(20, low=1)
        use_all_labels_as_negatives: bool | Literal["auto"] = "auto"
        similarity_type: Literal["auto", "inner", "cosine"] = "auto"
        loss_type: Literal["cross_entropy", "softmax", "margin"] = "cross_entropy"
        ranking_length: int = param(10, low=0)
        renormalize_confidences: bool = False
        maximum_positive_similarity: float = 0.8
        maximum_negative_similarity: float = -0.4
        use_maximum_negative_similarity: bool = True
        scale_loss: bool = False
        regularization_constant: float = param(0.002, low=0)
        negative_margin_scale: float = 0.8
        drop_rate: float = param(0.2, low=0, high=0.99)
        drop_rate_attention: float = param(0.0, low=0, high=0.99)
        connection_density: float = param(1.0, low=0, high=1)
        use_sparse_input_dropout: bool = True
        use_dense_input_dropout: bool = True
        evaluate_every_number_of_epochs: int = 20
        evaluate_on_number_of_examples: int = param(0, low=0)
        early_stopping_patience: int = param(0, low=0)
        intent_classification: bool = True
        entity_recognition: bool = True
        use_masked_language_model: bool = False
        BILOU_flag: bool = True
        tensorboard_log_directory: str | None = None
        tensorboard_log_level: Literal["epoch", "batch", "minibatch"] = "epoch"
        checkpoint_model: bool = False
        featurizers: list[str] = param([])
        split_entities_by_comma: bool | dict[str, bool] = True
        constrain_similarities: bool = False
        model_confidence: Literal["softmax"] = "softmax"
        run_eagerly: bool = False
        drop_small_last_batch: bool = False
        show_progress: bool = True
        sparse_weights_dtype: Literal["int8", "float16"] = "int8"
        max_micro_batch_size: int | None = param(128, low=1)
        #: the L2 of the input tables: every row every step, the rows a batch touches, or Rasa's
        #: rule for every weight (a weight's L2 gradient only where the loss's is positive)
        sparse_regularization: Literal["all_rows", "touched_rows", "rasa"] = "all_rows"

        def validate(self) -> None:
            super().validate()
            size = 256 if self.transformer_size is None else self.transformer_size
            if size % self.number_of_attention_heads:
                raise ConfigError(
                    f"transformer_size ({size}) must be divisible by number_of_attention_heads "
                    f"({self.number_of_attention_heads})"
                )

        # how long and how visibly training runs: a fine-tuning config may change these
        finetune_free: ClassVar[frozenset[str]] = frozenset({
            "epochs", "show_progress", "run_eagerly", "max_micro_batch_size",
            "tensorboard_log_directory", "tensorboard_log_level",
        })

        def notices(self) -> list[str]:
            if not self.share_hidden_layers:
                return []
            return ["share_hidden_layers is accepted for Rasa configs and has no effect here: "
                    "text and label keep separate hidden layers"]

    config: Config

    #: the message attribute whose features describe a label (ResponseSelector: the response key)
    label_attribute = INTENT_ATTRIBUTE
    #: the dense and concat widths of an attribute ``dense_dimension`` / ``concat_dimension`` omit
    default_widths: ClassVar[dict[str, int]] = {"text": 128, "label": 20}
    #: the featurizers' encoders fine-tuned with the network, handed over when the pipeline is
    #: built (``accept_trainable_encoder``)
    trainable_encoders: tuple[TrainableEncoder, ...] = ()
    #: the transformer layers the network was built with, when training or the archive set them
    #: (``_transformer_layers``); None: the config's ``number_of_transformer_layers``
    transformer_layers_: int | None = None
    #: whether the confidences also say how far in scope the message is (the intent's, not a
    #: response's among its retrieval intent)
    in_scope_score: ClassVar[bool] = True

    def label_of(self, message: Message) -> str | None:
        """The label a training example teaches (its intent here)."""
        return message.intent

    def labels_in(self, data: TrainingData, examples: list[Message]) -> list[str]:
        return sorted({label for m in examples if (label := self.label_of(m))})

    # --- fine-tuned encoders (the pipeline hands them over when it is built) ---------------
    def accept_trainable_encoder(self, encoder: TrainableEncoder) -> bool:
        """Fine-tune ``encoder`` with the network: its features are computed in the graph."""
        self.trainable_encoders = (*self.trainable_encoders, encoder)
        return True

    def data_fingerprint(self, data: TrainingData) -> str:
        """The examples only: the synonym, regex and lookup sections reach DIET through the
        components before it (with ``entity_swaps``, the synonyms and lookup tables too)."""
        return self.fingerprint_with_values(data)

    # --- what the network is built from (``spec.py``) ---------------------------------------
    def network_params(self) -> NetworkParams:
        params = NetworkParams.from_config(self.config, self.default_widths)
        layers = self.transformer_layers_
        if layers is None or layers == params.number_of_transformer_layers:
            return params
        return dataclasses.replace(params, number_of_transformer_layers=layers)

    def _transformer_layers(self, examples: list[Message], previous: DIETClassifier | None,
                            head: bool) -> int:
        """The network's transformer layers: a resumed network's own; with the sentence head,
        ``head_transformer_layers``; else ``number_of_transformer_layers``."""
        if previous is not None:
            return previous.network_params().number_of_transformer_layers
        wanted = self.config.head_transformer_layers
        if not head:
            return self.config.number_of_transformer_layers
        if wanted != "auto":
            return int(wanted)
        entities = sum(len(m.entities) for m in examples)
        if (not self._contextual_token_features(examples[0])
                or entities >= self.config.head_transformer_entities):
            return self.config.number_of_transformer_layers
        return 0

    def _contextual_token_features(self, message: Message) -> bool:
        """Whether the network reads a language model's token states (``Features.contextual``)."""
        return bool(self.trainable_encoders) or any(
            f.contextual for f in message.features
            if f.attribute == TEXT and f.kind == "sequence" and self.reads_features_from(f.origin))

    def vocabularies(self) -> Vocabularies:
        """What training learned from the data before the network (``_learn_vocabularies``,
        ``_label_features``)."""
        return Vocabularies(
            seq_vocab=self.seq_vocab_, sent_vocab=self.sent_vocab_,
            dense_seq_dim=self.dense_seq_dim_, dense_sent_dim=self.dense_sent_dim_,
            intents=tuple(self.intents_),
            tags={kind: tuple(vocabulary) for kind, vocabulary in self.tag_vocab_.items()},
            bilou=self.config.BILOU_flag, seq_blocks=self.seq_blocks_,
            sent_blocks=self.sent_blocks_, label_blocks=self.label_blocks_,
        )

    def training_spec(self, label_features: np.ndarray, slots: list[EncoderSlot],
                      epochs: int | None = None) -> TrainingSpec:
        return TrainingSpec(
            name=self.component_name(), network=self.network_params(),
            training=TrainingOptions.from_config(self.config, epochs), data=self.vocabularies(),
            label_features=label_features, encoders=tuple(slots),
        )

    # --- messages -> arrays (``encoding.py``) ----------------------------------------------
    def _learn_vocabularies(self, data: TrainingData, examples: list[Message]) -> None:
        """Keep what ``encoding.learn_vocabularies`` learns of the examples, and the trailing
        punctuation entities leave out."""
        labels = self.labels_in(data, examples) if self.config.intent_classification else []
        learned = encoding.learn_vocabularies(
            data, examples, labels, origins=self.config.featurizers or None,
            entity_recognition=self.config.entity_recognition, bilou_tags=self.config.BILOU_flag,
        )
        self.seq_blocks_, self.sent_blocks_ = learned.seq_blocks, learned.sent_blocks
        self.seq_vocab_, self.sent_vocab_ = learned.seq_vocab, learned.sent_vocab
        self.dense_seq_dim_, self.dense_sent_dim_ = learned.dense_seq_dim, learned.dense_sent_dim
        self.intents_ = list(learned.intents)
        self.tag_vocab_: dict[str, list[str]] = {kind: list(tags) for kind, tags in learned.tags.items()}
        self.trailing_punctuation_: dict[str, str] = (
            bilou.trailing_punctuation((m.text, m.tokens.get(TEXT, []), m.entities) for m in examples)
            if self.config.BILOU_flag and "entity" in self.tag_vocab_ else {}
        )

    def _label_features(self, examples: list[Message]) -> np.ndarray:
        """A bag of the label attribute's features per intent, or one-hot when there are none
        (``encoding.label_features``); their blocks kept for fine-tuning."""
        features, blocks = encoding.label_features(examples, self.intents_, self.label_of,
                                                   self.label_attribute)
        self.label_blocks_: list[list[Any]] | None = blocks
        return features

    # --- training -------------------------------------------------------------------------
    def train(self, data: TrainingData) -> None:
        self._fit(data)

    def finetune(self, data: TrainingData, previous: Component, options: FinetuneOptions) -> None:
        """Continue the stored network on ``data`` (``resume.py``): input tables, label table
        and tag heads grow with the new n-grams, intents and tags; every epoch trains on the new
        and changed examples plus ``options.rehearsal_fraction`` of the old ones, for
        ``options.epoch_fraction`` of a full training's epochs, with the learning-rate schedule
        started again at ``options.learning_rate_fraction`` of ``learning_rate``."""
        if type(previous) is not type(self) or not getattr(previous, "weights_", None):
            raise CannotResume("no stored network")
        if self.trainable_encoders:
            raise CannotResume("it fine-tunes a language model, which trains again with it")
        self._fit(data, previous, options)

    def _fit(self, data: TrainingData, previous: DIETClassifier | None = None,
             options: FinetuneOptions | None = None) -> None:
        """Train, from scratch or (``previous``) resuming from a stored model."""
        examples = [m for m in data.messages if self.label_of(m) and m.tokens.get(TEXT)]
        if not examples:
            raise ConfigError("DIETClassifier: no tokenized training examples with an intent")
        self._report_misaligned(examples)
        if self.config.contrastive_pairs and not self.trainable_encoders:
            logger.log(NOTICE, "%s: contrastive_pairs has no effect: no language model is "
                       "fine-tuned (trainable: true)", self.component_name())
        self._learn_vocabularies(data, examples)
        self._learn_listed_values(data)
        if self.config.entity_recognition and not self.tag_vocab_ and not self.config.intent_classification:
            raise ConfigError("DIETClassifier: entity_recognition is on but the data has no entities")
        self.head_ = None
        # a resumed model keeps its map unless the examples it holds out now fit a new one
        self.entity_calibration_ = EntityCalibration() if previous is None else previous.entity_calibration_
        head = self._uses_head(examples)
        self.transformer_layers_ = self._transformer_layers(examples, previous, head)
        if head:
            # few examples an intent: the sentence head ranks the intents, calibrated by
            # cross-fitting, and the network learns (mostly the entities) once, from every example
            self._keep_pretrained(examples)
            self._train_for_entities(examples, previous, options)
            self._fit_head(examples)
            return
        self._resuming = (previous, options)
        try:
            self._fit_calibrated(examples, None if previous is None else previous.example_hashes_)
        finally:
            del self._resuming

    def _train_network(self, examples: list[Message], previous: DIETClassifier | None,
                       options: FinetuneOptions | None, epochs: int | None = None,
                       late: list[Message] | None = None,
                       on_join: Callable[[list[Message]], None] | None = None) -> None:
        """Train the network on ``examples`` (resuming ``previous``) and keep its weights for
        prediction. ``late``: held-out examples that join the last epochs, once the calibration
        is fitted on them (``fit_joining_late``), or ``on_join`` has seen them."""
        from nlu_engine.nn.tensorflow_runtime import import_tensorflow

        # before anything imports it: the package's TensorFlow settings (oneDNN for an encoder
        # that fine-tunes in bfloat16)
        import_tensorflow(onednn=any(e.optimization().bfloat16 for e in self.trainable_encoders))
        from nlu_engine.classifiers.diet.encoders import encoder_slots, ragged_inputs
        from nlu_engine.classifiers.diet.training import LateJoin, fit

        self._seed()
        examples, epochs = self._multiplied(examples, previous, epochs)
        starts = self._tune_contrastively(examples)
        every = examples + (late or [])
        label_features = self._label_features(every)
        slots = encoder_slots(self.trainable_encoders, examples[0], self.config.featurizers or None, starts)
        spec = self.training_spec(label_features, slots, epochs)
        hashes = example_hashes(every, self.label_of)
        resume = None
        if previous is not None:
            stored = StoredModel(previous.vocabularies(), previous.weights_, previous.example_hashes_)
            resume = plan(stored, spec.data, hashes, options or FinetuneOptions())
        encoded = encoding.encode(every, spec.data, self.config.featurizers or None, self.label_of, slots)
        encoded.ragged = ragged_inputs(slots, every)
        join = None
        if late:
            def calibrate_before_joining(network: Any) -> None:
                self._adopt_network(network, label_features, hashes)
                if on_join is not None:
                    on_join(late)
                else:
                    self.calibrate(examples, late, self.intents_, self.config.random_seed)

            join = LateJoin(np.arange(len(examples), len(every)), self.config.calibration_join_share,
                            calibrate_before_joining)
        network, self.history_ = fit(spec, encoded, resume=resume, late=join)
        del encoded
        gc.collect()  # the optimizer's moments and the compiled steps die with fit: free them first
        self._adopt_network(network, label_features, hashes)
        del network
        gc.collect()

    def _tune_contrastively(self, examples: list[Message]) -> list[dict[str, np.ndarray]]:
        """``contrastive_pairs``: each fine-tuned encoder's layers tuned on pairs of ``examples``
        (``contrastive.tune``), the weights DIET's training starts from; none when it is off."""
        if not self.config.contrastive_pairs or len(self.intents_) < 2 or not self.trainable_encoders:
            return []
        from nlu_engine.classifiers.diet.contrastive import tune

        index = {name: i for i, name in enumerate(self.intents_)}
        labels = np.array([index[self.label_of(m) or ""] for m in examples])
        starts = []
        for encoder in self.trainable_encoders:
            tuned = tune(encoder, examples, labels, self.config.contrastive_pairs, self.config.random_seed)
            logger.info("%s: contrastive phase, %d steps, loss %.4f -> %.4f", self.component_name(),
                        len(tuned.losses), tuned.losses[0], tuned.losses[-1])
            starts.append(tuned.weights)
        return starts

    def _adopt_network(self, network: Any, label_features: Any, hashes: np.ndarray) -> None:
        """Predict with ``network``'s current weights (and its tuned encoders' features)."""
        for slot, layer in zip(network.encoder_slots, network.encoder_layers, strict=True):
            slot.encoder.adopt(layer.tuned_weights())  # the featurizer computes the tuned features now
        # rounded as they are stored: predictions stay the same before and after saving
        self.weights_: dict[str, np.ndarray]
        self.quantized_: storage.Quantized
        self.weights_, self.quantized_ = storage.stored_precision(network.export_weights(),
                                                                  self.config.sparse_weights_dtype)
        self.label_features_ = label_features
        self.example_hashes_: np.ndarray | None = hashes
        self._build_predict()

    def _seed(self) -> None:
        import keras

        if self.config.random_seed is not None:
            keras.utils.set_random_seed(self.config.random_seed)

    def _report_misaligned(self, examples: list[Message]) -> None:
        if not self.config.entity_recognition:
            return
        notice = bilou.misaligned_notice(self.component_name(), examples)
        if notice:
            logger.warning(notice)

    # --- prediction -------------------------------------------------------------------------
    def _build_predict(self) -> None:
        """Prediction runs in ``inference.py`` (the whole network one ONNX graph): no TensorFlow
        after training."""
        from nlu_engine.classifiers.diet.inference import DIETInference

        self._inference = DIETInference(
            self.weights_, self.network_params(), self.label_features_, self.tag_vocab_,
            self.config.BILOU_flag, self.dense_seq_dim_, self.dense_sent_dim_,
        )

    def predict_arrays(self, messages: list[Message], head: bool = True) -> list[dict[str, np.ndarray]]:
        """Per message: intent confidences [N] and per tag kind decoded ids and confidences
        (``head``: the sentence head's intent confidences in place of the network's, when it
        ranks the intents)."""
        from nlu_engine.classifiers.diet.batching import make_batch

        encoded = encoding.encode(messages, self.vocabularies(), self.config.featurizers or None)
        results: list[dict[str, np.ndarray]] = [{} for _ in messages]
        order = np.argsort(encoded.lengths, kind="stable")
        for start in range(0, len(order), PREDICT_BATCH):
            index = order[start : start + PREDICT_BATCH]
            batch = make_batch(encoded, index)
            out = self._inference.predict_batch(batch)
            for row, i in enumerate(index):
                n = int(encoded.lengths[i])
                result = {}
                if "intent_sims" in out:
                    sims = out["intent_sims"][row].astype(np.float64)
                    e = np.exp(sims - sims.max())
                    result["intent"] = e / e.sum()
                    result["sentence"] = out["sentence"][row]
                    result["text_embed"] = out["text_embed"][row]
                for kind in self.tag_vocab_:
                    result[f"tags_{kind}"] = out[f"tags_{kind}"][row, :n]
                    result[f"conf_{kind}"] = out[f"conf_{kind}"][row, :n]
                results[i] = result
        if self.head_ is not None and head:
            self._head_predictions(messages, results)
        return results

    def process(self, messages: list[Message]) -> None:
        todo = [m for m in messages if m.tokens.get(TEXT)]
        if not todo:
            return
        # a later intent classifier (the combiner) replaces the ranking: only the raw scores
        # it reads are made, not the calibrated ranking (nor the sentence head's)
        ranks = not self.ranking_superseded
        results = self.predict_arrays(todo, head=ranks)
        if self.records_intent_scores and self.head_ is None:  # the network's own ranking
            for message, result in zip(todo, results, strict=True):
                if "intent" in result:
                    scores.record(message, self.scorer_name(), self.intents_, result["intent"])
        if not ranks:
            for message, result in zip(todo, results, strict=True):
                if "tags_entity" in result:
                    message.entities.extend(self._entities(message, result))
            return
        confidences = self._calibrated([r["intent"] for r in results if "intent" in r],
                                       [r[IN_SCOPE_VECTOR] for r in results if "intent" in r])
        for message, result in zip(todo, results, strict=True):
            if "intent" in result:
                write_intent(message, self.intents_, next(confidences), self.config.ranking_length,
                             self.config.renormalize_confidences)
            elif len(self.intents_) == 1:
                write_intent(message, self.intents_, np.ones(1), self.config.ranking_length)
            if "tags_entity" in result:
                message.entities.extend(self._entities(message, result))

    def _entities(self, message: Message, result: dict[str, np.ndarray],
                  calibrated: bool = True) -> list[dict[str, Any]]:
        """The message's entities, their confidences calibrated unless ``calibrated`` is False."""
        tokens = message.tokens[TEXT]
        names = {k: [self.tag_vocab_[k][int(i)] for i in result[f"tags_{k}"]] for k in self.tag_vocab_}
        confidences = {k: [float(c) for c in result[f"conf_{k}"]] for k in self.tag_vocab_}
        entities = bilou.spans_to_entities(
            message.text,
            tokens,
            names,
            confidences,
            extractor="DIETClassifier",
            bilou=self.config.BILOU_flag,
            split_entities_by_comma=self.config.split_entities_by_comma,
            trailing=self.trailing_punctuation_,
        )
        if calibrated:
            self.entity_calibration_.apply_to(entities)
        return entities

    # --- persistence (``storage.py``) -----------------------------------------------------
    def persist(self, directory: Path) -> None:
        state = {
            "intents": self.intents_,
            "tag_vocabularies": self.tag_vocab_,
            "trailing_punctuation": self.trailing_punctuation_,
            "seq_vocab": self.seq_vocab_,
            "sent_vocab": self.sent_vocab_,
            "dense_seq_dim": self.dense_seq_dim_,
            "dense_sent_dim": self.dense_sent_dim_,
            "input_blocks": {"sequence": self.seq_blocks_, "sentence": self.sent_blocks_,
                             "label": self.label_blocks_},
            "history": self.history_,
            "out_of_scope_intent": self.out_of_scope_intent_,
            "transformer_layers": self.network_params().number_of_transformer_layers,
        }
        storage.save(directory, storage.Stored(
            state=state, weights=self.weights_, quantized=self.quantized_,
            label_features=self.label_features_, example_hashes=self.example_hashes_,
        ))
        self.calibration_.persist(directory)
        self.entity_calibration_.persist(directory)
        if self.head_ is not None:
            self.head_.persist(directory)

    @classmethod
    def load(cls, directory: Path, config: DIETClassifier.Config) -> DIETClassifier:
        """Restore the weights as they were saved (no TensorFlow, no retraining)."""
        component = cls(config)
        stored = storage.load(directory)
        state = stored.state
        component.intents_ = [str(i) for i in state["intents"]]
        component.tag_vocab_ = {str(k): [str(t) for t in v] for k, v in state["tag_vocabularies"].items()}
        component.trailing_punctuation_ = bilou.stored_trailing_punctuation(
            state.get("trailing_punctuation"), storage.STATE_FILE
        )
        for key in ("seq_vocab", "sent_vocab", "dense_seq_dim", "dense_sent_dim"):
            setattr(component, f"{key}_", int(state[key]))
        component.history_ = state.get("history", {})
        blocks = state.get("input_blocks") or {}  # absent before fine-tuning existed
        component.seq_blocks_ = blocks.get("sequence")
        component.sent_blocks_ = blocks.get("sentence")
        component.label_blocks_ = blocks.get("label")
        component.example_hashes_ = stored.example_hashes
        component.label_features_ = stored.label_features
        component.weights_, component.quantized_ = stored.weights, stored.quantized
        component.calibration_ = calibration.Calibration.load(directory)
        component.entity_calibration_ = EntityCalibration.load(directory)
        component.head_ = SentenceHead.load(directory, labels=len(component.intents_))
        component.out_of_scope_intent_ = state.get("out_of_scope_intent")
        component.transformer_layers_ = state.get("transformer_layers")  # absent before: the config's
        try:  # the network built and run once on one token: its weights fit together
            component._build_predict()
            component._inference.probe(component.seq_vocab_, component.sent_vocab_,
                                       component.dense_seq_dim_, component.dense_sent_dim_)
        except (KeyError, ValueError, IndexError) as error:
            raise ValueError(
                f"the stored weights do not fit the network the config describes ({error})"
            ) from None
        return component
