"""The parts of DIET's training loop (callbacks.py), alone and in a training."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nlu_engine.classifiers.diet.callbacks import (
    EarlyStopping,
    History,
    HoldoutEvaluation,
    ProgressBar,
    TagF1Monitor,
    decodes_after,
    require_tensorboard,
)
from nlu_engine.classifiers.diet.loop import LoopState
from nlu_engine.contract.errors import ConfigError


class FakeNetwork:
    """get_weights / set_weights of one array, as a Keras model has them."""

    def __init__(self) -> None:
        self.weights = [np.zeros(2)]

    def get_weights(self) -> list[np.ndarray]:
        return [w.copy() for w in self.weights]

    def set_weights(self, weights: list[np.ndarray]) -> None:
        self.weights = [w.copy() for w in weights]


def _state(epochs: int) -> LoopState:
    return LoopState(trainer=None, epochs=epochs)  # type: ignore[arg-type]


def _run(callbacks: list, scores: list[dict[str, float] | None], network: FakeNetwork | None = None):
    """Play epochs through the callbacks: epoch e has hold-out ``scores[e]`` (None: not
    evaluated) and, on ``network``, weights [e, e]."""
    state = _state(len(scores))
    for callback in callbacks:
        callback.on_train_begin(state)
    for epoch, epoch_scores in enumerate(scores):
        state.epoch, state.scores = epoch, epoch_scores
        if network is not None:
            network.weights = [np.full(2, float(epoch))]
        for callback in callbacks:
            callback.on_epoch_end(state, {"t_loss": 1.0})
        if state.stop:
            break
    for callback in callbacks:
        callback.on_train_end(state)
    return state


def test_early_stopping_restores_the_best_weights_and_stops_after_patience() -> None:
    network = FakeNetwork()
    scores = [{"i_acc": 0.5}, None, {"i_acc": 0.8}, {"i_acc": 0.7}, {"i_acc": 0.8}, {"i_acc": 0.9}]
    state = _run([EarlyStopping(network, patience=2)], scores, network)
    # epoch 3 (0.8) is the best; 0.7 and an equal 0.8 are no improvement: stop after epoch 5
    assert state.history["stopped_early_at"] == 5
    assert state.history["restored_epoch"] == 3
    np.testing.assert_array_equal(network.weights[0], [2.0, 2.0])


def test_without_patience_the_best_weights_are_restored_at_the_end() -> None:
    network = FakeNetwork()
    state = _run([EarlyStopping(network)], [{"i_acc": 0.9}, {"i_acc": 0.1}, {"i_acc": 0.2}], network)
    assert "stopped_early_at" not in state.history
    assert state.history["restored_epoch"] == 1
    np.testing.assert_array_equal(network.weights[0], [0.0, 0.0])


def test_holdout_evaluation_every_n_epochs_and_after_the_last() -> None:
    seen: list[int] = []

    def score(data: Any) -> dict[str, float]:
        seen.append(data)
        return {"i_acc": 1.0}

    state = _run([HoldoutEvaluation(score, 7, every=3)], [None] * 7)
    assert [e["epoch"] for e in state.history["evaluations"]] == [3, 6, 7]
    assert seen == [7, 7, 7]
    state = _run([HoldoutEvaluation(score, 7, every=0)], [None] * 4)
    assert [e["epoch"] for e in state.history["evaluations"]] == [4]


def test_tag_f1_monitor_adds_each_tag_set_f1_when_due() -> None:
    monitor = TagF1Monitor(lambda data: {"i_acc": 0.5, "e_f1": 0.25, "r_f1": 0.75}, None, ["entity", "role"])
    metrics: dict[str, float] = {"t_loss": 1.0}
    state = _state(40)
    state.epoch = 0  # not due: every second epoch of 40
    monitor.on_epoch_end(state, metrics)
    assert metrics == {"t_loss": 1.0}
    state.epoch = 1
    monitor.on_epoch_end(state, metrics)
    assert metrics == {"t_loss": 1.0, "e_f1": 0.25, "r_f1": 0.75}


def test_history_rounds_the_metrics_and_adds_the_seconds() -> None:
    state = _state(1)
    History().on_epoch_end(state, {"t_loss": 1.234567, "i_acc": 0.5})
    [record] = state.history["epochs"]
    assert record["t_loss"] == 1.2346 and record["i_acc"] == 0.5 and record["seconds"] >= 0


def test_progress_bar_shows_the_latest_tag_f1_and_a_line_per_evaluation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bar = ProgressBar("DIETClassifier epochs", show=True)
    state = _state(2)
    bar.on_train_begin(state)
    bar.on_epoch_end(state, {"t_loss": 2.0, "e_f1": 0.5})
    state.epoch, state.scores = 1, {"i_acc": 0.75}
    bar.on_epoch_end(state, {"t_loss": 1.0})  # no decoding this epoch: the last e_f1 stays shown
    assert bar.bar.postfix == "e_f1=0.500, t_loss=1.000"
    bar.on_train_end(state)
    assert "epoch 2: hold-out i_acc 0.750" in capsys.readouterr().err


def test_tensorboard_logging_without_tensorboard_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="DIETClassifier: tensorboard_log_directory needs the tensorboard"):
        require_tensorboard("DIETClassifier")


def test_tag_f1_decoded_about_twenty_times_and_at_the_end() -> None:
    assert [e for e in range(12) if decodes_after(e, 12)] == list(range(12))
    assert [e + 1 for e in range(50) if decodes_after(e, 50)] == [*range(2, 49, 2), 50]
    assert sum(decodes_after(e, 300) for e in range(300)) == 20


def test_progress_entity_f1_is_decoded_training_examples(featurized) -> None:
    """The history's tag F1 is Viterbi decoding of training examples, as prediction decodes."""
    from nlu_engine.classifiers.diet.component import DIETClassifier
    from nlu_engine.contract.message import TEXT
    from nlu_engine.training_data import bilou

    _, data = featurized
    component = DIETClassifier(epochs=12, transformer_size=32, learning_rate=0.01, show_progress=False)
    component.train(data)
    epochs = component.history_["epochs"]
    assert all("e_f1" in e for e in epochs)
    examples = [m for m in data.messages if m.intent and m.tokens.get(TEXT)]
    counts = np.zeros(3)
    vocabulary = {tag: i for i, tag in enumerate(component.tag_vocab_["entity"])}
    for message, result in zip(examples, component.predict_arrays(examples), strict=True):
        gold = np.array([vocabulary[t] for t in bilou.entity_tags(message.tokens[TEXT], message.entities)])
        predicted = result["tags_entity"]
        counts += [((predicted == gold) & (gold > 0)).sum(), (predicted > 0).sum(), (gold > 0).sum()]
    f1 = 2 * counts[0] / (counts[1] + counts[2])
    assert f1 > 0.5  # something is learned
    assert epochs[-1]["e_f1"] == pytest.approx(f1, abs=0.02)  # weights are rounded after training
