"""DIET's training specification: the typed projection of the component's Config."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np
import pytest

from nlu_engine.classifiers.diet.component import DIETClassifier
from nlu_engine.classifiers.diet.spec import NetworkParams, TrainingOptions, TrainingSpec, Vocabularies
from nlu_engine.classifiers.response_selector import ResponseSelector

# the fields the spec resolves from the Config instead of copying them
RESOLVED = {
    NetworkParams: {"loss_type", "similarity_type", "transformer_size", "text_dense_dimension",
                    "label_dense_dimension", "text_concat_dimension", "text_hidden_layers",
                    "label_hidden_layers"},
    TrainingOptions: {"batch_size"},
}


@pytest.mark.parametrize("spec_class", [NetworkParams, TrainingOptions])
def test_every_copied_field_is_the_config_field_of_that_name_and_type(spec_class: type) -> None:
    config_hints = typing.get_type_hints(DIETClassifier.Config)
    spec_hints = typing.get_type_hints(spec_class)
    copied = {f.name for f in dataclasses.fields(spec_class)} - RESOLVED[spec_class]
    assert copied, "the spec copies fields by name"
    for name in sorted(copied):
        assert name in config_hints, f"{spec_class.__name__}.{name} is not a Config field"
        assert spec_hints[name] == config_hints[name], name


def test_the_network_params_resolve_auto_values_and_per_attribute_widths() -> None:
    params = DIETClassifier(loss_type="softmax", dense_dimension={"text": 64},
                            hidden_layers_sizes={"label": [8]}).network_params()
    assert (params.loss_type, params.similarity_type) == ("cross_entropy", "inner")
    assert (params.text_dense_dimension, params.label_dense_dimension) == (64, 20)
    assert (params.text_hidden_layers, params.label_hidden_layers) == ((), (8,))
    assert params.text_concat_dimension == 128
    margin = DIETClassifier(loss_type="margin").network_params()
    assert (margin.loss_type, margin.similarity_type) == ("margin", "cosine")
    selector = ResponseSelector().network_params()  # no transformer_size: the default
    assert (selector.transformer_size, selector.text_dense_dimension) == (256, 512)


def test_the_training_options_copy_the_config() -> None:
    options = TrainingOptions.from_config(DIETClassifier(batch_size=[8, 32], epochs=3).config)
    assert (options.batch_size, options.epochs, options.random_seed) == ((8, 32), 3, 42)
    assert TrainingOptions.from_config(DIETClassifier(batch_size=16).config).batch_size == 16


def test_the_spec_is_frozen() -> None:
    component = DIETClassifier()
    data = Vocabularies(seq_vocab=3, sent_vocab=0, dense_seq_dim=0, dense_sent_dim=0,
                        intents=("a", "b"), tags={}, bilou=True)
    spec = TrainingSpec(name="DIETClassifier", network=component.network_params(),
                        training=TrainingOptions.from_config(component.config), data=data,
                        label_features=np.eye(2, dtype=np.float32))
    for target, name in ((spec, "name"), (spec.network, "drop_rate"), (spec.training, "epochs"),
                         (spec.data, "seq_vocab")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(target, name, None)


def test_trainable_encoders_are_a_declared_field_empty_by_default() -> None:
    assert DIETClassifier().trainable_encoders == ()
    assert ResponseSelector().trainable_encoders == ()
