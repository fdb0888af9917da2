"""The weight-name schema (weight_names.py): the names archives store, pinned."""

from __future__ import annotations

from nlu_engine.classifiers.diet import weight_names as names
from nlu_engine.classifiers.diet.component import DIETClassifier

# What a one-block network with hidden layers, unify layers and roles exports: archives store
# their weights under exactly these names, so a change here breaks loading them.
PINNED = [
    "entity_crf/transitions", "entity_logits/bias", "entity_logits/kernel",
    "entity_tag_embed/bias", "entity_tag_embed/kernel",
    "label_dense/bias", "label_dense/kernel", "label_embed/bias", "label_embed/kernel",
    "label_hidden/hidden_0/bias", "label_hidden/hidden_0/kernel",
    "role_crf/transitions", "role_logits/bias", "role_logits/kernel",
    "sent_bag/bias", "sent_bag/kernel", "sent_unify/hidden_0/bias", "sent_unify/hidden_0/kernel",
    "seq_bag/bias", "seq_bag/kernel", "seq_unify/hidden_0/bias", "seq_unify/hidden_0/kernel",
    "text_embed/bias", "text_embed/kernel", "text_hidden/hidden_0/bias", "text_hidden/hidden_0/kernel",
    "transformer/embedding/bias", "transformer/embedding/kernel",
    "transformer/layer_0/attention/key/kernel",
    "transformer/layer_0/attention/key_relative_embeddings",
    "transformer/layer_0/attention/output/bias", "transformer/layer_0/attention/output/kernel",
    "transformer/layer_0/attention/query/kernel", "transformer/layer_0/attention/value/kernel",
    "transformer/layer_0/attention/value_relative_embeddings",
    "transformer/layer_0/attention_norm/beta", "transformer/layer_0/attention_norm/gamma",
    "transformer/layer_0/ffn_in/bias", "transformer/layer_0/ffn_in/kernel",
    "transformer/layer_0/ffn_norm/beta", "transformer/layer_0/ffn_norm/gamma",
    "transformer/layer_0/ffn_out/bias", "transformer/layer_0/ffn_out/kernel",
    "transformer/output_norm/beta", "transformer/output_norm/gamma",
]  # fmt: skip


def test_the_export_writes_the_pinned_names(featurized) -> None:
    from nlu_engine.classifiers.diet.training import build_network

    _, data = featurized
    component = DIETClassifier(
        transformer_size=8, number_of_attention_heads=2, number_of_transformer_layers=1,
        hidden_layers_sizes={"text": [4], "label": [4]},
    )
    examples = [m for m in data.messages if m.intent]
    component._learn_vocabularies(data, examples)
    component.dense_seq_dim_, component.dense_sent_dim_ = 3, 5  # widths differ: unify layers
    component._seed()
    network = build_network(component.training_spec(component._label_features(examples), []))
    assert sorted(network.export_weights()) == PINNED


def test_the_schema_spells_the_pinned_names() -> None:
    layer = names.TransformerLayer(0)
    spelled = {
        names.kernel(layer.attention("query")), layer.key_relative, layer.value_relative,
        names.gamma(layer.attention_norm), names.beta(layer.ffn_norm), names.bias(layer.ffn_out),
        names.kernel(names.hidden(names.SEQ_UNIFY, 0)), names.transitions("role"),
        names.kernel(names.tag_logits("entity")), names.gamma(names.TRANSFORMER_OUTPUT_NORM),
        *names.SPARSE_TABLES,
    }
    assert spelled <= set(PINNED)
