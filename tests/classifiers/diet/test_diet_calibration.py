"""DIET calibrates while it trains: a held-out share fits the temperature and the in-scope score,
the archive keeps them as plain numbers, and a loaded model parses exactly as the trained one."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.model import Model, train
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import write_data

TOPICS = {
    "weather": ["rain", "sunny", "forecast", "cloudy", "temperature", "wind"],
    "music": ["song", "album", "playlist", "band", "guitar", "jazz"],
    "food": ["pizza", "pasta", "dinner", "restaurant", "sushi", "lunch"],
    "travel": ["flight", "hotel", "train", "airport", "ticket", "trip"],
    "sport": ["football", "match", "score", "tennis", "league", "goal"],
}
FRAMES = ["tell me about the {}", "what about {} today", "i want some {} please", "any {} news",
          "show {} and {}", "{} now", "is there {}", "find me {} or {}"]


def synthetic(seed: int, per_intent: int) -> TrainingData:
    rng = random.Random(seed)
    messages = []
    for intent, words in TOPICS.items():
        texts: set[str] = set()  # distinct: loading drops exact duplicates, as Rasa does
        while len(texts) < per_intent:
            frame = rng.choice(FRAMES)
            texts.add(frame.format(*rng.sample(words, frame.count("{}"))))
        messages += [Message(text=text, intent=intent) for text in sorted(texts)]
    return TrainingData(messages=messages)


CONFIG = {"language": "en", "pipeline": [
    {"name": "WhitespaceTokenizer"}, {"name": "CountVectorsFeaturizer"},
    {"name": "DIETClassifier", "epochs": 12, "show_progress": False, "number_of_transformer_layers": 1,
     "transformer_size": 64, "batch_size": 16},
]}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pipeline, Path]:
    folder = tmp_path_factory.mktemp("calibrated")
    data_path = folder / "nlu.yml"
    write_data(synthetic(0, 40), data_path)
    archive = train(CONFIG, str(data_path), out=str(folder), fixed_model_name="model", log=None)
    return Model.load(archive).pipeline, Path(archive)


def test_diet_holds_out_a_share_and_fits_its_calibration(trained: tuple[Pipeline, Path]) -> None:
    diet = trained[0].components[-1]
    assert diet.calibration_.calibrated
    assert diet.calibration_.examples == 20  # 10 % of 40 examples of each of 5 intents
    assert 0.05 < diet.calibration_.temperature < 20
    assert diet.calibration_.in_scope is not None
    assert diet.calibration_.in_scope.means.shape[0] == 5


def test_confidences_are_the_calibrated_probabilities_times_the_in_scope_factor(trained) -> None:
    pipeline, _ = trained
    diet = pipeline.components[-1]
    texts = ["tell me about the rain", "zzz qqq xxx vvv www"]
    parsed = pipeline.parse_batch(texts)
    for result in parsed:
        ranking = [r["confidence"] for r in result["intent_ranking"]]
        assert all(0 <= c <= 1 for c in ranking) and sum(ranking) <= 1 + 1e-6
    raw = diet.predict_arrays(pipeline.process([Message(text=t) for t in texts]))
    probabilities = np.stack([r["intent"] for r in raw])
    vectors = np.stack([r["sentence"] for r in raw])
    expected = diet.calibration_.apply(probabilities, vectors)
    assert [r["intent"]["confidence"] for r in parsed] == pytest.approx(expected.max(1).tolist())
    # a sentence vector far from every intent's examples gets the lowest factor the held-out
    # reference allows: 1 / (M + 1) / alpha, with M held-out examples (20 here, so 0.95)
    in_scope = diet.calibration_.in_scope
    far = in_scope.means.mean(axis=0, keepdims=True) + 50 * np.sqrt(1 / np.diag(in_scope.precision))
    floor = 1 / (len(in_scope.reference) + 1) / in_scope.alpha
    assert in_scope.factors(far)[0] == pytest.approx(min(1.0, floor))
    assert in_scope.factors(in_scope.means[:1])[0] == 1.0


def test_the_archive_keeps_plain_numbers_and_parses_the_same(trained, tmp_path: Path) -> None:
    import tarfile

    pipeline, archive = trained
    with tarfile.open(archive) as tar:
        names = [Path(n).name for n in tar.getnames()]
    assert "calibration.json" in names and "calibration.npz" in names
    texts = ["any pizza news", "show flight and hotel", "what about jazz today", "hello"]
    again = Model.load(archive).parse_batch(texts)
    assert again == pipeline.parse_batch(texts)


def test_calibration_off_trains_on_everything_and_stays_uncalibrated(tmp_path: Path) -> None:
    config = load_config(CONFIG, ["DIETClassifier.calibration=false", "DIETClassifier.epochs=1"])
    pipeline = Pipeline.build(config)
    pipeline.train(synthetic(1, 40), log=None)
    diet = pipeline.components[-1]
    assert not diet.calibration_.calibrated
    raw = diet.predict_arrays(pipeline.process([Message(text="any pizza news")]))[0]["intent"]
    parsed = pipeline.parse_batch(["any pizza news"])[0]
    assert parsed["intent"]["confidence"] == pytest.approx(float(np.max(raw)))


def test_an_out_of_scope_intent_named_but_missing_is_one_error(tmp_path: Path) -> None:
    from nlu_engine.contract.errors import ConfigError

    config = load_config(CONFIG, ["DIETClassifier.out_of_scope_intent=nonsense", "DIETClassifier.epochs=1"])
    with pytest.raises(ConfigError, match="out_of_scope_intent 'nonsense' is not an intent"):
        Pipeline.build(config).train(synthetic(2, 40), log=None)


def test_small_data_trains_the_network_on_every_example(trained) -> None:
    diet = trained[0].components[-1]
    # 200 examples, below calibration_refit_below (2000): the held-out 20 were trained on too
    assert len(diet.example_hashes_) == 200
    notes = diet.calibration_.notes
    assert notes["refit_on_all_examples"] is True and notes["reference_scale"] > 0
    assert diet.calibration_.examples == 20  # fitted on the held-out share before it joined


def test_small_data_trains_once_and_the_held_out_share_joins_late(monkeypatch) -> None:
    from nlu_engine.classifiers.diet import training

    calls, pools = [], []
    real_fit, real_batches = training.fit, training.epoch_batches

    def counting_fit(spec, encoded, *args, **kwargs):
        calls.append((len(encoded), kwargs.get("late")))
        return real_fit(spec, encoded, *args, **kwargs)

    def recording_batches(spec, data, epoch, epochs, rng, pool=None):
        pools.append(len(data) if pool is None else len(pool))
        return real_batches(spec, data, epoch, epochs, rng, pool)

    monkeypatch.setattr(training, "fit", counting_fit)
    monkeypatch.setattr(training, "epoch_batches", recording_batches)
    config = load_config(CONFIG, ["DIETClassifier.epochs=8", "DIETClassifier.calibration_join_share=0.25"])
    pipeline = Pipeline.build(config)
    pipeline.train(synthetic(3, 40), log=None)
    diet = pipeline.components[-1]
    assert len(calls) == 1  # one training, not a second one on everything
    size, late = calls[0]
    held = len(late.index)
    assert size == 200 and held == 20 and late.join_epoch(8) == 6
    assert pools == [180] * 6 + [200] * 2  # the held-out 20 train in the last quarter of the epochs
    assert diet.calibration_.examples == 20 and len(diet.example_hashes_) == 200


def test_without_the_refit_the_held_out_share_is_never_trained_on() -> None:
    config = load_config(CONFIG, ["DIETClassifier.calibration_refit_below=0", "DIETClassifier.epochs=1"])
    pipeline = Pipeline.build(config)
    pipeline.train(synthetic(3, 40), log=None)
    diet = pipeline.components[-1]
    assert len(diet.example_hashes_) == 180 and "refit_on_all_examples" not in diet.calibration_.notes


def test_adding_an_intent_keeps_the_examples_held_out_from_the_others() -> None:
    """The split follows each example's content: a fine-tune with a new intent holds out what the
    stored model held out, so nothing it trained on calibrates it and nothing it held out is new."""
    diet = Pipeline.build(load_config(CONFIG)).components[-1]
    known = synthetic(1, 40).messages
    added = [Message(text=f"book a table for {n} at eight", intent="booking") for n in range(40)]

    def held_out(messages: list[Message]) -> set[tuple[str, str]]:
        diet.intents_ = sorted({m.intent for m in messages if m.intent})
        _, held = diet.hold_out(messages, diet.intents_, diet.config.random_seed)
        return {(m.text, m.intent) for m in held}

    before = held_out(known)
    after = held_out([*added, *known])
    assert len(before) == 20 and {h for h in after if h[1] != "booking"} == before
    assert sum(h[1] == "booking" for h in after) == 4
