"""DIET's parse path (inference.py, its transformer the ONNX graph of onnx_graph.py) computes
what the TensorFlow network computes, for every network variant."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from nlu_engine.classifiers.diet import encoding
from nlu_engine.classifiers.diet.batching import make_batch
from nlu_engine.classifiers.diet.component import DIETClassifier
from nlu_engine.classifiers.diet.crf_decode import decode_tag_sets
from nlu_engine.classifiers.diet.inference import DIETInference
from nlu_engine.classifiers.response_selector import ResponseSelector

PROJECT_ROOT = Path(__file__).resolve().parents[3]


VARIANTS: list[dict[str, Any]] = [
    {},  # the defaults: relative attention, inner similarity, BILOU, roles
    {"unidirectional_encoder": True, "similarity_type": "cosine", "connection_density": 0.5,
     "hidden_layers_sizes": {"text": [32], "label": [16]}, "max_relative_position": 2},
    {"number_of_transformer_layers": 0, "BILOU_flag": False,
     "use_key_relative_attention": False, "use_value_relative_attention": False},
    {"dense": 12},  # dense token and sentence features beside the sparse ones
    # a dense sentence vector alone (a sentence encoder), or dense token features alone: token and
    # sentence widths differ, so both go through the unify layers
    {"dense_sentence": 12},
    {"dense": 12, "dense_sentence": 0},
    {"use_key_relative_attention": False, "use_value_relative_attention": False},
    {"entity_recognition": False, "dense": 12},
    # the ResponseSelector's graph: its defaults (no transformer, two hidden layers a side, no
    # entities), then with a transformer
    {"selector": True},
    {"selector": True, "number_of_transformer_layers": 1, "transformer_size": 32,
     "number_of_attention_heads": 4, "hidden_layers_sizes": {"text": [], "label": []}},
]


@pytest.mark.parametrize(
    "variant", VARIANTS,
    ids=["default", "unidirectional-cosine", "no-transformer", "dense", "dense-sentence-only",
         "dense-tokens-only", "no-relative-attention", "no-entities", "selector",
         "selector-transformer"],
)
def test_parse_path_matches_tensorflow(featurized, variant: dict[str, Any]) -> None:
    from nlu_engine.classifiers.diet.training import build_network, decode_tags

    _, data = featurized
    variant = dict(variant)
    dense = variant.pop("dense", 0)
    dense_sentence = variant.pop("dense_sentence", dense)
    examples = [m for m in data.messages if m.intent]
    if variant.pop("selector", False):
        component: DIETClassifier = ResponseSelector(**variant)
        examples = [copy.copy(m) for m in examples]
        for m in examples:  # each intent a response key of one retrieval intent
            m.intent_response_key = f"faq/{m.intent}"
    else:
        component = DIETClassifier(**{"transformer_size": 32, "number_of_attention_heads": 4, **variant})
    component._learn_vocabularies(data, examples)
    component.dense_seq_dim_, component.dense_sent_dim_ = dense, dense_sentence
    label_features = component._label_features(examples)
    component._seed()
    network = build_network(component.training_spec(label_features, []))
    # every weight (biases, layer norms, transitions too) made non-trivial
    rng = np.random.default_rng(0)
    network.set_weights([w + rng.normal(0, 0.3, w.shape).astype(w.dtype) if w.dtype == np.float32 else w
                         for w in network.get_weights()])

    encoded = encoding.encode(examples, component.vocabularies(), None)
    batch = make_batch(encoded, np.arange(len(examples)))
    if dense:
        batch["dense_seq"] = rng.normal(size=(*batch["shape"], dense)).astype(np.float32)
    if dense_sentence:
        batch["dense_sent"] = rng.normal(size=(len(examples), dense_sentence)).astype(np.float32)
    expected = {k: v.numpy() for k, v in network.predict_batch(
        {k: tf.constant(v) for k, v in batch.items()}).items()}
    inference = DIETInference(network.export_weights(), component.network_params(), label_features,
                              component.tag_vocab_, component.config.BILOU_flag, dense, dense_sentence)
    graph = inference.run(batch)
    for kind in component.tag_vocab_:  # the logits, a role's and group's without the entity term
        np.testing.assert_allclose(graph[f"logits_{kind}"], expected[f"logits_{kind}"], rtol=1e-3, atol=1e-3)
    tables = network.tag_tables()
    assert set(tables) == set(inference.tag_tables)
    for kind, table in tables.items():
        np.testing.assert_allclose(inference.tag_tables[kind], table, rtol=1e-4, atol=1e-5)
    # the tags as training's monitors decode them; the confidences by the same decoders with marginals
    expected.update(decode_tags(network, expected, batch["lengths"]))
    decoders = {kind: crf.decoder() for kind, crf in network.tag_crf.items()}
    marginals = decode_tag_sets(expected, network.tag_tables(), batch["lengths"], decoders)
    assert all((marginals[f"tags_{k}"] == expected[f"tags_{k}"]).all() for k in decoders)
    expected.update(marginals)
    got = inference.predict_batch(batch)

    assert set(got) - set(expected) == {"sentence", "text_embed"}  # its own: the in-scope vectors
    assert "intent_sims" in got
    assert ("tags_role" in got) == component.config.entity_recognition
    np.testing.assert_allclose(got["intent_sims"], expected["intent_sims"], rtol=1e-3, atol=1e-3)
    for kind in component.tag_vocab_:
        np.testing.assert_array_equal(got[f"tags_{kind}"], expected[f"tags_{kind}"])
        np.testing.assert_allclose(got[f"conf_{kind}"], expected[f"conf_{kind}"], atol=1e-4)


def test_loading_and_parsing_a_diet_model_does_not_import_tensorflow(
    tiny_data_path: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    import nlu_engine

    archive = nlu_engine.train(
        str(PROJECT_ROOT / "nlu_engine" / "pipelines" / "diet.yml"), str(tiny_data_path), out=str(tmp_path),
        fixed_model_name="m",
        overrides=["DIETClassifier.epochs=2", "ResponseSelector.epochs=1"],
    )
    expected = nlu_engine.load(archive).parse("fly from Madrid to Paris")
    script = (
        "import json, sys, nlu_engine\n"
        f"result = nlu_engine.load({archive!r}).parse('fly from Madrid to Paris')\n"
        "print(json.dumps([result, 'tensorflow' in sys.modules, 'keras' in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    import json

    result, tensorflow, keras = json.loads(done.stdout.strip().splitlines()[-1])
    assert (tensorflow, keras) == (False, False)
    assert result == json.loads(json.dumps(expected))


def test_trailing_punctuation_rule_survives_saving_and_loading(tmp_path: Path) -> None:
    """DIET learns that currency initials keep their final dot, stores the rule in diet.json
    and gives the dot back after loading."""
    import nlu_engine

    currencies = ["u. s. d.", "g. b. p.", "e. u. r.", "j. p. y."]
    lines = ["version: '3.1'", "nlu:", "- intent: convert", "  examples: |"]
    lines += [f"    - convert [{a}](currency) to [{b}](currency) now"
              for a in currencies for b in currencies if a != b]
    lines += ["- intent: greet", "  examples: |", "    - hello there", "    - good morning", "    - hi"]
    data = tmp_path / "nlu.yml"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "config.yml"
    config.write_text(
        "language: en\npipeline:\n- name: WhitespaceTokenizer\n- name: CountVectorsFeaturizer\n"
        "- name: DIETClassifier\n  epochs: 30\n  transformer_size: 32\n  learning_rate: 0.01\n",
        encoding="utf-8",
    )
    archive = nlu_engine.train(str(config), str(data), out=str(tmp_path / "models"), fixed_model_name="m")
    model = nlu_engine.load(archive)
    [diet] = [c for c in model.pipeline.components if isinstance(c, DIETClassifier)]
    assert diet.trailing_punctuation_ == {"currency\tinitial": "."}
    parsed = model.parse("convert j. p. y. to u. s. d. now")
    assert [e["value"] for e in parsed["entities"]] == ["j. p. y.", "u. s. d."]
