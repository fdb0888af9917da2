"""DIET maps ``confidence_entity`` through a Platt map fitted on the entities it predicted for
held-out examples (``entity_calibration``): whenever it holds examples out for its intent
calibration, and on few examples an intent only when asked (``hold_out``)."""

from __future__ import annotations

import dataclasses
import random
import tarfile
from pathlib import Path

import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.classifiers import entity_calibration
from nlu_engine.classifiers.entity_calibration import STATE_FILE, EntityCalibration
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import write_data
from nlu_engine.training_data.annotations import parse_annotated

CITIES = ["Oslo", "Rome", "Lima", "Kyiv", "Bern", "Doha", "Riga", "Baku", "Quito", "Hanoi"]
VERBS = ["fly", "drive", "sail", "walk", "ride", "travel"]


def noisy_cities(per_intent: int, seed: int = 0) -> TrainingData:
    """A city in every example, typed ``origin`` or ``destination`` at random: the type cannot be
    learned, so about half the held-out entities come out wrong whatever the network does."""
    rng = random.Random(seed)
    messages = []
    for verb in VERBS:
        texts: set[str] = set()
        while len(texts) < per_intent:
            kind = rng.choice(["origin", "destination"])
            texts.add(f"i want to {verb} [{rng.choice(CITIES)}]({kind}) {rng.choice(['now', 'soon'])} "
                      f"{rng.randrange(1000)}")
        for annotated in sorted(texts):
            text, entities = parse_annotated(annotated)
            messages.append(Message(text, intent=verb, entities=entities))
    return TrainingData(messages=messages)


def config(head_below: int, calibration: str, epochs: int = 8) -> dict:
    """A small network that tags the cities within a few epochs (batches of 8, a high rate)."""
    return {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
        {"name": "UniversalSentenceEncoderFeaturizer"},
        {"name": "DIETClassifier", "epochs": epochs, "show_progress": False, "transformer_size": 16,
         "number_of_transformer_layers": 1, "sentence_head_below": head_below, "batch_size": 8,
         "learning_rate": 0.01, "calibration_share": 0.3, "entity_calibration": calibration},
    ]}


@pytest.mark.parametrize(("head_below", "calibration", "fitted"), [
    (0, "when_held_out", True),   # the calibrated network holds a share out anyway
    (50, "when_held_out", False),  # few examples an intent: the default holds nothing out
    (50, "hold_out", True),  # ... unless asked: a share joins the last epochs
], ids=["calibrated network", "sentence head", "sentence head, hold_out"])
def test_entity_confidences_are_mapped_when_examples_were_held_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, head_below: int, calibration: str, fitted: bool
) -> None:
    monkeypatch.setattr(entity_calibration, "MIN_ENTITIES", 5)  # a small data set's held-out share
    monkeypatch.setattr(entity_calibration, "MIN_EACH", 1)
    data = tmp_path / "nlu.yml"
    write_data(noisy_cities(20), data)
    archive = train(config(head_below, calibration, 8 if fitted else 1), data, tmp_path / "models")
    with tarfile.open(archive) as tar:
        stored = any(Path(name).name == STATE_FILE for name in tar.getnames())
    model = Model.load(archive)
    diet = model.pipeline.components[-1]
    assert stored == fitted == diet.entity_calibration_.calibrated
    if not fitted:
        return
    texts = [f"i want to {verb} {city} now 5" for verb, city in zip(VERBS, CITIES, strict=False)]
    parsed = model.parse_batch(texts)
    messages = model.pipeline.process([Message(text=t) for t in texts])
    arrays = diet.predict_arrays(messages)
    raw = [diet._entities(m, r, calibrated=False) for m, r in zip(messages, arrays, strict=True)]
    shown = [[e["confidence_entity"] for e in p["entities"] if e["extractor"] == "DIETClassifier"]
             for p in parsed]
    expected = [[diet.entity_calibration_.apply(e["confidence_entity"]) for e in r] for r in raw]
    assert any(shown) and shown == [pytest.approx(e) for e in expected]
    # a type that cannot be learned: the map lowers what the CRF was sure of
    assert diet.entity_calibration_.apply(0.9) < 0.85


def test_off_fits_nothing_and_a_resumed_model_keeps_its_map(tmp_path: Path) -> None:
    from nlu_engine.assembly.config import load_config
    from nlu_engine.assembly.pipeline import Pipeline

    diet = Pipeline.build(load_config(config(0, "off"))).components[-1]
    diet.tag_vocab_ = {"entity": ["O", "U-origin"]}
    diet.records_held_out_entities = False
    diet._record_held_out_entities([], [])
    assert not diet.entity_calibration_.calibrated
    diet.config = dataclasses.replace(diet.config, entity_calibration="when_held_out")
    kept = EntityCalibration(slope=0.5, bias=0.1, entities=50, wrong=20)
    diet.entity_calibration_ = kept
    diet._record_held_out_entities([], [])  # nothing held out: too few to fit, the map stays
    assert diet.entity_calibration_ == kept
