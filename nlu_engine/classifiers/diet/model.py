"""The DIET network (Dual Intent and Entity Transformer), read top to bottom.

    sparse token / sentence features ──► embedding bag (gather + segment sum) ──► dropout
    dense token / sentence features  ──► concatenated
    (a fine-tuned encoder's columns of them computed here from its inputs: ``encoders.py``)
    (token and sentence widths differ ─► Ffnn(concat_dimension) each)
    sentence vector written after the last token  ──► [B, T+1, D]
    Ffnn(hidden_layers_sizes.text) ──► transformer (relative attention) ──► gelu ──► h [B, T+1, U]
    intent:  h[b, len_b] ─► Embed(E)  ·  label features ─► dense ─► Ffnn ─► Embed(E)   (similarity)
    entity:  h[:, :T]    ─► Dense(K) ─► CRF ;  role / group: [h, Embed(one-hot entity tags)] ─► CRF
    mask LM (optional): masked token outputs ─► Embed  ·  their pre-transformer inputs ─► Embed

Shapes: B batch, T tokens (longest in batch), V vocabulary, D feature width, U transformer
units, E embedding_dimension, N intents, K tags.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.classifiers.diet.crf import CRF
from nlu_engine.classifiers.diet.layers import Dropout, Embed, Ffnn, RandomlyConnectedDense, gelu
from nlu_engine.classifiers.diet.losses import DotProductLoss, similarity
from nlu_engine.classifiers.diet.spec import TrainingSpec
from nlu_engine.classifiers.diet.transformer import TransformerEncoder
from nlu_engine.training_data.bilou import bilou_constraints


class SparseEmbeddingBag(keras.layers.Layer):
    """A dense layer over sparse inputs computed on the non-zero columns only.

    ids, values, positions [nnz] -> [num_positions, units]: row p is
    sum over entries at p of values * kernel[ids] + bias. Sparse input dropout drops
    individual non-zero entries while training. The L2 penalty covers only the rows a
    batch touches (``row_penalty``), so the gradient stays sparse (see ``optimizer.py``), or,
    with ``all_rows``, the whole table as a dense layer's L2 would: every row decays every step,
    so under Adam a rare n-gram's row shrinks between its occurrences. That penalty's gradient
    is added by the optimizer (``table_l2``), once per step. With ``rasa`` the trainer adds it
    by Rasa's rule (``masked_l2``, ``steps.py``).
    """

    def __init__(
        self, vocab: int, units: int, reg_lambda: float, drop_rate: float, mode: str = "touched_rows",
        **kwargs: Any,
    ):
        super().__init__(dtype="float32", **kwargs)  # sums of many rows: always float32
        self.vocab, self.units, self.drop_rate = vocab, units, drop_rate
        self.reg_lambda, self.all_rows, self.rasa = reg_lambda, mode == "all_rows", mode == "rasa"
        self.kernel = self.add_weight(
            name="kernel", shape=(max(vocab, 1), units), initializer="glorot_uniform"
        )
        self.bias = self.add_weight(name="bias", shape=(units,), initializer="zeros")
        self.built = True

    def call(self, ids, values, positions, num_positions, training=False):
        if training and self.drop_rate > 0:
            keep = tf.random.uniform(tf.shape(values), seed=None) >= self.drop_rate  # [nnz]
            values = values * tf.cast(keep, values.dtype)
        rows = tf.gather(self.kernel, ids) * values[:, None]  # [nnz, units]
        summed = tf.math.unsorted_segment_sum(rows, positions, num_positions)  # [P, units]
        return summed + self.bias

    def row_penalty(self, ids):
        """L2 of the kernel rows ``ids`` touch (scalar); 0 with ``all_rows`` or ``rasa``."""
        if self.reg_lambda <= 0 or self.all_rows or self.rasa:
            # all_rows: the optimizer adds the whole table's L2 gradient once per step
            # (``LazyAdam(l2=...)``), so the tape's gradient stays row-sparse
            return tf.constant(0.0)
        rows = tf.gather(self.kernel, tf.unique(ids)[0])  # [R, units]
        return self.reg_lambda * tf.reduce_sum(tf.square(rows))

    def table_l2(self) -> float:
        """The L2 constant the optimizer applies to every row (``all_rows``), else 0."""
        return self.reg_lambda if self.all_rows else 0.0

    def masked_l2(self) -> float:
        """The L2 constant the trainer applies by Rasa's rule (``rasa``), else 0."""
        return self.reg_lambda if self.rasa else 0.0

    def table_penalty(self):
        """L2 of the whole table with ``all_rows`` (for the reported loss), else 0 (scalar)."""
        if self.table_l2() <= 0:
            return tf.constant(0.0)
        # l2_loss = sum(W^2) / 2 in one pass, without a table-sized square
        return 2.0 * self.reg_lambda * tf.nn.l2_loss(self.kernel)


class DIETNetwork(keras.Model):
    """The network ``spec`` describes (``spec.network`` its hyperparameters, ``spec.data`` the
    input widths and tags, ``spec.encoders`` the encoders it fine-tunes)."""

    def __init__(self, spec: TrainingSpec) -> None:
        encoder_layers = [slot.encoder.build(slot.start) for slot in spec.encoders]  # their weights first
        super().__init__(name="diet")
        self.spec, self.params, self.data = spec, spec.network, spec.data
        # fine-tuned encoders: their layers are tracked (trained, saved by early stopping)
        self.encoder_slots = list(spec.encoders)
        self.encoder_layers = encoder_layers
        # the order of the parts is the order their weights are created in (seeded runs)
        seq_width, concat_dim = self._build_text_input()
        self._build_transformer()
        self._build_intent_head()
        self._build_entity_heads()
        self._build_masked_language_model(seq_width, concat_dim)
        #: only the sentence position reaches a loss or a prediction (no transformer mixes the
        #: positions, no tag or mask head reads the tokens): the token positions are skipped
        self.sentence_only = (
            self.num_layers == 0 and not self.tag_crf and not self.use_mlm and not self.unify
            and bool(self.data.sent_vocab or self.data.dense_sent_dim)
        )

    def _build_text_input(self) -> tuple[int, int]:
        """Sparse -> dense, concatenated with dense features; returns (sequence width, concat dim)."""
        p, data = self.params, self.data
        reg, drop, density = p.regularization_constant, p.drop_rate, p.connection_density
        width, concat_dim = p.text_dense_dimension, p.text_concat_dimension
        sparse_drop = drop if p.use_sparse_input_dropout else 0.0
        self.dense_input_drop = Dropout(
            drop if p.use_dense_input_dropout else 0.0, name="dense_input_dropout"
        )
        # as Rasa's ConcatenateSparseDenseFeatures: dense input dropout also applies to the
        # sparse features once the embedding bags have made them dense
        self.bag_output_drop = Dropout(
            drop if p.use_dense_input_dropout else 0.0, name="bag_output_dropout"
        )
        mode = p.sparse_regularization
        self.seq_bag = SparseEmbeddingBag(data.seq_vocab, width, reg, sparse_drop, mode, name="seq_bag")
        self.sent_bag = SparseEmbeddingBag(data.sent_vocab, width, reg, sparse_drop, mode, name="sent_bag")
        seq_width = (width if data.seq_vocab else 0) + data.dense_seq_dim
        sent_width = (width if data.sent_vocab else 0) + data.dense_sent_dim
        self.unify = seq_width != sent_width and sent_width > 0
        self.seq_unify = Ffnn([concat_dim], drop, reg, density, name="seq_unify")
        self.sent_unify = Ffnn([concat_dim], drop, reg, density, name="sent_unify")
        self.text_hidden = Ffnn(p.text_hidden_layers, drop, reg, density, name="text_hidden")
        return seq_width, concat_dim

    def _build_transformer(self) -> None:
        p = self.params
        self.num_layers = p.number_of_transformer_layers
        self.transformer = TransformerEncoder(
            num_layers=self.num_layers,
            units=p.transformer_size,
            num_heads=p.number_of_attention_heads,
            reg_lambda=p.regularization_constant,
            dropout_rate=p.drop_rate,
            attention_dropout_rate=p.drop_rate_attention,
            density=p.connection_density,
            unidirectional=p.unidirectional_encoder,
            use_key_relative_position=p.use_key_relative_attention,
            use_value_relative_position=p.use_value_relative_attention,
            max_relative_position=p.max_relative_position,
            name="transformer",
        )

    def _build_intent_head(self) -> None:
        """Sentence and label embeddings compared by the dot-product loss."""
        p, spec = self.params, self.spec
        reg, embed_dim = p.regularization_constant, p.embedding_dimension
        self.label_features = tf.constant(spec.label_features, tf.float32)  # [N, V_label]
        self.label_dense = RandomlyConnectedDense(
            p.label_dense_dimension, density=1.0, reg_lambda=reg, name="label_dense"
        )
        self.label_hidden = Ffnn(
            p.label_hidden_layers, p.drop_rate, reg, p.connection_density, name="label_hidden",
        )
        self.text_embed = Embed(embed_dim, reg, name="text_embed")
        self.label_embed = Embed(embed_dim, reg, name="label_embed")
        self.all_labels_as_negatives = all_labels_as_negatives(
            p.use_all_labels_as_negatives, p.loss_type, spec.label_features.shape[0],
            p.number_of_negative_examples,
        )
        self.intent_loss = DotProductLoss(
            num_neg=p.number_of_negative_examples,
            loss_type=p.loss_type,
            similarity_type=p.similarity_type,
            constrain_similarities=p.constrain_similarities,
            scale_loss=p.scale_loss,
            mu_pos=p.maximum_positive_similarity,
            mu_neg=p.maximum_negative_similarity,
            use_max_sim_neg=p.use_maximum_negative_similarity,
            neg_lambda=p.negative_margin_scale,
        )

    def _build_entity_heads(self) -> None:
        """Entity tags, then role and group tags conditioned on the entity tags; a CRF each."""
        reg, data = self.params.regularization_constant, self.data
        self.tag_logits = {
            name: RandomlyConnectedDense(k, density=1.0, name=f"{name}_logits")
            for name, k in data.num_tags.items()
        }
        self.tag_crf = {
            name: CRF(k, reg, False, *(bilou_constraints(data.tags[name]) if data.bilou else ()),
                      name=f"{name}_crf")
            for name, k in data.num_tags.items()
        }
        self.entity_tag_embed = Embed(self.params.embedding_dimension, reg, name="entity_tag_embed")

    def _build_masked_language_model(self, seq_width: int, concat_dim: int) -> None:
        p = self.params
        reg, embed_dim = p.regularization_constant, p.embedding_dimension
        self.use_mlm = p.use_masked_language_model and self.num_layers > 0
        self.mask_vector = self.add_weight(
            name="mask_vector", shape=(1, 1, self._input_width(seq_width, concat_dim)),
            initializer="random_uniform",
        )
        self.mlm_out_embed = Embed(embed_dim, reg, name="mlm_out_embed")
        self.mlm_in_embed = Embed(embed_dim, reg, name="mlm_in_embed")
        self.mlm_loss = DotProductLoss(
            num_neg=p.number_of_negative_examples, loss_type="cross_entropy",
            similarity_type="inner", constrain_similarities=p.constrain_similarities,
            scale_loss=False,
        )

    def _input_width(self, seq_width: int, concat_dim: int) -> int:
        width = concat_dim if self.unify else max(seq_width, 1)
        hidden = self.params.text_hidden_layers
        return hidden[-1] if hidden else width

    # ------------------------------------------------------------------------------------------
    def dense_features(self, batch: dict[str, tf.Tensor], training: bool):
        """Dense token [B, T, Dd] and sentence [B, Dd'] features (None when absent): the
        columns of each fine-tuned encoder, which a batch leaves out, computed by its layer and
        put in their place (slots in column order)."""
        seq, sent = batch.get("dense_seq"), batch.get("dense_sent")
        shape = batch["shape"]
        for slot, layer in sorted(zip(self.encoder_slots, self.encoder_layers, strict=True),
                                  key=lambda pair: pair[0].seq_columns):
            inputs = {k[len(slot.prefix):]: v for k, v in batch.items() if k.startswith(slot.prefix)}
            tokens, sentence = layer(inputs, shape[1], training=training)  # [B, T, H], [B, H]
            seq = _insert(seq, tokens, slot.seq_columns[0], [shape[0], shape[1], 0])
            if slot.sent_columns is not None:
                sent = _insert(sent, sentence, slot.sent_columns[0], [shape[0], 0])
        return seq, sent

    def encode_text(self, batch: dict[str, tf.Tensor], training: bool):
        """Combined input features x [B, T+1, D] and transformer outputs h [B, T+1, U]."""
        shape = batch["shape"]
        batch_size, max_len = shape[0], shape[1]
        lengths = batch["lengths"]  # [B]
        dense_seq, dense_sent = self.dense_features(batch, training)
        if self.sentence_only:  # the sentence position alone: x [B, 1, D]
            x = self.text_hidden(tf.concat(self._sentence_parts(batch, dense_sent, batch_size, training),
                                           axis=-1)[:, None, :], training=training)
            return x, tf.ones(tf.shape(x)[:2], tf.float32)
        token_mask = tf.sequence_mask(lengths, max_len, tf.float32)  # [B, T]
        parts_seq = []
        if self.data.seq_vocab:
            seq = self.seq_bag(
                batch["seq_ids"], batch["seq_values"], batch["seq_positions"],
                batch_size * max_len, training=training,
            )  # [B*T, Dt]
            seq = self.bag_output_drop(seq, training=training)  # [B*T, Dt]
            parts_seq.append(tf.reshape(seq, (batch_size, max_len, -1)))  # [B, T, Dt]
        if self.data.dense_seq_dim:
            parts_seq.append(self.dense_input_drop(dense_seq, training=training))
        parts_sent = self._sentence_parts(batch, dense_sent, batch_size, training)
        x_seq = tf.concat(parts_seq, axis=-1)  # [B, T, Ds]
        if self.unify:
            x_seq = self.seq_unify(x_seq, training=training)  # [B, T, C]
        x_seq = x_seq * token_mask[:, :, None]  # bias made padding non-zero
        x = tf.pad(x_seq, [[0, 0], [0, 1], [0, 0]])  # [B, T+1, D]
        if parts_sent:
            x_sent = tf.concat(parts_sent, axis=-1)  # [B, Ds']
            if self.unify:
                x_sent = self.sent_unify(x_sent, training=training)  # [B, C]
            at_end = tf.one_hot(lengths, max_len + 1)  # [B, T+1]: 1 right after the last token
            x = x + at_end[:, :, None] * x_sent[:, None, :]
        x = self.text_hidden(x, training=training)  # [B, T+1, D]
        mask = tf.sequence_mask(lengths + 1, max_len + 1, tf.float32)  # [B, T+1]
        return x, mask

    def _sentence_parts(self, batch: dict[str, tf.Tensor], dense_sent, batch_size, training: bool) -> list:
        """The sentence position's input parts: the sparse sentence bag [B, Dt] and the dense
        sentence features [B, Dd], each after its dropout (those the data has)."""
        parts = []
        if self.data.sent_vocab:
            sent = self.sent_bag(
                batch["sent_ids"], batch["sent_values"], batch["sent_positions"],
                batch_size, training=training,
            )  # [B, Dt]
            parts.append(self.bag_output_drop(sent, training=training))  # [B, Dt]
        if self.data.dense_sent_dim:
            parts.append(self.dense_input_drop(dense_sent, training=training))
        return parts

    def transform(self, x, mask, training: bool):
        if self.num_layers == 0:
            return x
        h = self.transformer(x, mask, training=training)  # [B, T+1, U]
        return gelu(h)

    def all_label_embeddings(self, training: bool):
        """Every intent's embedding [N, E] from its bag of label features."""
        x = self.label_dense(self.label_features)  # [N, Dl]
        x = self.label_hidden(x, training=training)
        return tf.cast(self.label_embed(x), tf.float32)  # [N, E]

    def sentence_vector(self, h, lengths):
        if self.sentence_only:
            return h[:, 0]  # [B, U]: the only position
        return tf.gather(h, lengths, batch_dims=1)  # [B, U]: the position after the last token

    def tag_logits_for(self, name: str, h_tokens, entity_tags):
        """Tag logits [B, T, K]; role and group see an embedding of the entity tags [B, T] (None:
        of no tag, the logits ``predict_batch`` gives, ``tag_tables`` the rest)."""
        if name == "entity":
            return tf.cast(self.tag_logits[name](h_tokens), tf.float32)
        k_entity = self.data.num_tags["entity"]
        if entity_tags is None:
            one_hot = tf.zeros(tf.concat([tf.shape(h_tokens)[:2], [k_entity]], 0))  # [B, T, K_e]
        else:
            one_hot = tf.one_hot(entity_tags, k_entity)  # [B, T, K_e]
        return self._tag_head(name, h_tokens, one_hot)

    def _tag_head(self, name: str, h_tokens, one_hot):
        tag_embedding = tf.cast(self.entity_tag_embed(one_hot), h_tokens.dtype)
        return tf.cast(self.tag_logits[name](tf.concat([h_tokens, tag_embedding], -1)), tf.float32)

    def tag_tables(self) -> dict[str, np.ndarray]:
        """Per role / group tag set, each entity tag's term of its logits [K_entity, K] (NumPy):
        the logits are linear in the entity tags' one-hot, and ``predict_batch`` gives them for
        no tag. ``onnx_graph._tag_heads`` folds the same tables from the weights."""
        tables: dict[str, np.ndarray] = {}
        k_entity = self.data.num_tags.get("entity", 0)
        for name, layer in self.tag_logits.items():
            if name == "entity":
                continue
            width = int(layer.kernel.shape[0]) - self.entity_tag_embed.dim  # the states' U
            tags = self._tag_head(name, tf.zeros((k_entity, 1, width)), tf.eye(k_entity)[:, None])
            none = self._tag_head(name, tf.zeros((1, 1, width)), tf.zeros((1, 1, k_entity)))
            tables[name] = (tags - none).numpy()[:, 0]  # [K_e, K]
        return tables

    # ------------------------------------------------------------------------------------------
    def table_l2(self) -> list[tuple[Any, float]]:
        """(kernel, L2 constant) of the input tables the optimizer decays whole (``all_rows``)."""
        return [(bag.kernel, bag.table_l2()) for bag in (self.seq_bag, self.sent_bag)
                if bag.table_l2() > 0]

    def masked_tables(self) -> dict[int, tuple[Any, float]]:
        """id(kernel) -> (kernel, L2 constant) of the input tables regularized by Rasa's rule."""
        return {id(bag.kernel): (bag.kernel, bag.masked_l2()) for bag in (self.seq_bag, self.sent_bag)
                if bag.masked_l2() > 0}

    def table_penalty(self):
        """The whole-table L2 the optimizer applies (scalar; 0 unless ``all_rows``)."""
        return self.seq_bag.table_penalty() + self.sent_bag.table_penalty()

    def losses_and_metrics(self, batch: dict[str, tf.Tensor], training: bool = True):
        """Training objective: the sum of the intent, entity (role, group) and mask losses."""
        lengths = batch["lengths"]
        max_len = batch["shape"][1]
        x, mask = self.encode_text(batch, training)
        out: dict[str, tf.Tensor] = {}
        total = tf.constant(0.0)
        if training:
            total += self.seq_bag.row_penalty(batch["seq_ids"])
            total += self.sent_bag.row_penalty(batch["sent_ids"])
        if self.use_mlm and training:
            x, lm_targets, lm_positions = self._mask_inputs(x, mask, lengths)
        h = self.transform(x, mask, training)  # [B, T+1, U]
        if self.params.intent_classification and self.spec.label_features.shape[0] > 1:
            all_labels = self.all_label_embeddings(training)  # [N, E]
            text = tf.cast(self.text_embed(self.sentence_vector(h, lengths)), tf.float32)  # [B, E]
            ids = batch["label_ids"]  # [B]
            if self.all_labels_as_negatives:
                # the objective of prediction itself: softmax over every intent
                loss, acc = self.intent_loss.over_all_labels(text, ids, all_labels)
            else:
                labels = tf.gather(all_labels, ids)  # [B, E]
                loss, acc = self.intent_loss(
                    text, labels, ids, all_labels, tf.range(tf.shape(all_labels)[0], dtype=tf.int32)
                )
            out["i_loss"], out["i_acc"] = loss, acc
            total += loss
        h_tokens = h[:, :max_len]  # [B, T, U]
        for name in self.tag_crf:
            gold = batch[f"tags_{name}"]  # [B, T]
            logits = self.tag_logits_for(name, h_tokens, batch.get("tags_entity"))
            loss = self.tag_crf[name].loss(logits, gold, lengths)
            out[f"{name[0]}_loss"] = loss
            total += loss  # the tag F1 is measured by decoding (callbacks.TagF1Monitor)
        if self.use_mlm and training:
            loss, acc = self._mlm_loss(h, lm_targets, lm_positions)
            out["m_loss"], out["m_acc"] = loss, acc
            total += loss
        out["loss"] = total
        return out

    def _mask_inputs(self, x, mask, lengths):
        """Replace ~15% of real token positions: 70% mask vector, 10% random token, 20% kept."""
        token_mask = mask * (1.0 - tf.one_hot(lengths, tf.shape(mask)[1]))  # no sentence slot
        u = tf.random.uniform(tf.shape(token_mask))
        chosen = (u >= 0.85) & (token_mask > 0)  # [B, T+1]
        v = tf.random.uniform(tf.shape(token_mask))
        use_mask = chosen & (v < 0.7)
        use_random = chosen & (v >= 0.7) & (v < 0.8)
        flat = tf.reshape(x, (-1, tf.shape(x)[-1]))
        shuffled = tf.reshape(tf.gather(flat, tf.random.shuffle(tf.range(tf.shape(flat)[0]))),
                              tf.shape(x))
        masked = tf.where(use_mask[:, :, None], tf.broadcast_to(self.mask_vector, tf.shape(x)), x)
        masked = tf.where(use_random[:, :, None], shuffled, masked)
        positions = tf.cast(tf.where(chosen), tf.int32)  # [M, 2]
        targets = tf.stop_gradient(tf.gather_nd(x, positions))  # [M, D]
        return masked, targets, positions

    def _mlm_loss(self, h, targets, positions):
        outputs = tf.cast(self.mlm_out_embed(tf.gather_nd(h, positions)), tf.float32)  # [M, E]
        golden = tf.cast(self.mlm_in_embed(targets), tf.float32)  # [M, E]
        count = tf.shape(golden)[0]
        ids = tf.range(count, dtype=tf.int32)  # every masked token is its own label

        def compute():
            return self.mlm_loss(outputs, golden, ids, golden, ids)

        return tf.cond(count > 1, compute, lambda: (tf.constant(0.0), tf.constant(0.0)))

    # ------------------------------------------------------------------------------------------
    def predict_batch(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Intent similarities [B, N] and per tag set its logits "logits_<set>" [B, T, K], a role's
        or group's without the entity tags' term (``tag_tables``): NumPy decodes them
        (``crf_decode.decode_tag_sets``, as a parse does; ``training.decode_tags``)."""
        lengths = batch["lengths"]
        max_len = batch["shape"][1]
        x, mask = self.encode_text(batch, training=False)
        h = self.transform(x, mask, training=False)
        out: dict[str, tf.Tensor] = {}
        if self.params.intent_classification and self.spec.label_features.shape[0] > 0:
            all_labels = self.all_label_embeddings(False)  # [N, E]
            text = tf.cast(self.text_embed(self.sentence_vector(h, lengths)), tf.float32)  # [B, E]
            out["intent_sims"] = similarity(
                text[:, None, :], all_labels[None, :, :], self.intent_loss.similarity_type
            )  # [B, N]
        h_tokens = h[:, :max_len]
        for name in self.tag_crf:
            out[f"logits_{name}"] = self.tag_logits_for(name, h_tokens, None)  # [B, T, K]
        return out


    # ------------------------------------------------------------------------------------------
    def named_variables(self) -> dict[str, tuple[Any, Any]]:
        """Prediction's weights by the names of ``weight_names``: (variable, its connection mask
        or None). Training-only weights (mask vector, MLM heads) are left out."""
        out: dict[str, tuple[Any, Any]] = {}

        def dense(name: str, layer: RandomlyConnectedDense) -> None:
            if not hasattr(layer, "kernel"):
                return  # never built: this network does not use the layer
            out[names.kernel(name)] = (layer.kernel, layer.kernel_mask)
            if layer.bias is not None:
                out[names.bias(name)] = (layer.bias, None)

        def ffnn(name: str, stack: Ffnn) -> None:
            for i, layer in enumerate(stack.hidden):
                dense(names.hidden(name, i), layer)

        def norm(name: str, layer: keras.layers.LayerNormalization) -> None:
            out[names.gamma(name)] = (layer.gamma, None)
            out[names.beta(name)] = (layer.beta, None)

        for name, bag, vocab in ((names.SEQ_BAG, self.seq_bag, self.data.seq_vocab),
                                 (names.SENT_BAG, self.sent_bag, self.data.sent_vocab)):
            if vocab:
                out[names.kernel(name)] = (bag.kernel, None)
                out[names.bias(name)] = (bag.bias, None)
        if self.unify:
            ffnn(names.SEQ_UNIFY, self.seq_unify)
            ffnn(names.SENT_UNIFY, self.sent_unify)
        ffnn(names.TEXT_HIDDEN, self.text_hidden)
        if self.num_layers:
            encoder = self.transformer
            dense(names.TRANSFORMER_EMBEDDING, encoder.embedding)
            for i, block in enumerate(encoder.blocks):
                layer = names.TransformerLayer(i)
                norm(layer.attention_norm, block.attention_norm)
                attention = block.attention
                for part in ("query", "key", "value"):
                    dense(layer.attention(part), getattr(attention, part))
                dense(layer.attention("output"), attention.output_dense)
                for name, table in ((layer.key_relative, attention.key_relative_embeddings),
                                    (layer.value_relative, attention.value_relative_embeddings)):
                    if table is not None:
                        out[name] = (table, None)
                norm(layer.ffn_norm, block.ffn_norm)
                dense(layer.ffn_in, block.ffn_in)
                dense(layer.ffn_out, block.ffn_out)
            norm(names.TRANSFORMER_OUTPUT_NORM, encoder.output_norm)
        if self.params.intent_classification and self.spec.label_features.shape[0] > 0:
            dense(names.LABEL_DENSE, self.label_dense)
            ffnn(names.LABEL_HIDDEN, self.label_hidden)
            dense(names.TEXT_EMBED, self.text_embed.dense)
            dense(names.LABEL_EMBED, self.label_embed.dense)
        for kind in self.tag_crf:
            dense(names.tag_logits(kind), self.tag_logits[kind])
            out[names.transitions(kind)] = (self.tag_crf[kind].transitions, None)
        if len(self.tag_crf) > 1:
            dense(names.ENTITY_TAG_EMBED, self.entity_tag_embed.dense)
        return out

    def export_weights(self) -> dict[str, np.ndarray]:
        """What prediction needs, by the names of ``weight_names`` (read by ``inference.py``):
        float32 arrays, kernels with their connection masks applied."""
        out: dict[str, np.ndarray] = {}
        for name, (variable, mask) in self.named_variables().items():
            value = np.asarray(variable, np.float32)
            out[name] = value * np.asarray(mask, np.float32) if mask is not None else value
        return out

    def import_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Assign exported weights (``export_weights``' names and shapes) to the variables, e.g.
        a stored model's to resume training from. A kernel with a live weight its connection
        mask drops is refused (ValueError): the mask would silently discard it."""
        variables = self.named_variables()
        for name, value in weights.items():
            variable, mask = variables[name]
            if tuple(variable.shape) != value.shape:
                raise ValueError(f"'{name}' has shape {value.shape}, the network {tuple(variable.shape)}")
            if mask is not None and np.any(value * (1.0 - np.asarray(mask, np.float32))):
                raise ValueError(f"'{name}' has weights its connection mask drops")
            variable.assign(value.astype(np.float32))


def all_labels_as_negatives(
    setting: bool | str, loss_type: str, num_labels: int, num_negatives: int
) -> bool:
    """Whether the intent loss is the softmax over every label (``use_all_labels_as_negatives``).

    ``auto``: when there are more labels than ``number_of_negative_examples``. Sampled negatives
    stand in for the labels a step cannot afford to score. With few labels (SNIPS's 7) the
    sample already covers them and its input-to-input terms add something; with many
    (NLU-Evaluation-Data's 64) a step sees only a fraction of them, and scoring every label
    does better (scores in BENCHMARKS.md). The margin loss always samples.
    """
    if loss_type != "cross_entropy":
        return False
    if setting == "auto":
        return num_labels > num_negatives
    return bool(setting)


def _insert(features, part, start: int, empty_shape):
    """``part`` [..., W] put into ``features`` [..., D] (None: no columns, ``empty_shape``) at
    column ``start`` -> [..., D + W]."""
    if features is None:
        features = tf.zeros(empty_shape, part.dtype)
    return tf.concat([features[..., :start], part, features[..., start:]], axis=-1)
