"""DIETTrainer (steps.py): one optimizer step per batch, micro-batches summed to the whole batch's."""

from __future__ import annotations

import numpy as np

from nlu_engine.classifiers.diet.component import DIETClassifier


def test_micro_batches_accumulate_to_the_whole_batch_update(featurized) -> None:
    """A batch split into parts (max_micro_batch_size) gives the whole batch's update."""
    _, data = featurized
    deterministic = dict(
        epochs=2, batch_size=12, batch_strategy="sequence", drop_rate=0.0,
        use_sparse_input_dropout=False, regularization_constant=0.0,
        use_all_labels_as_negatives=True, transformer_size=32, show_progress=False,
        learning_rate=0.05, learning_rate_schedule="constant",  # Adam moves each weight ~0.05 a step
    )
    weights = []
    for micro in (None, 5):
        component = DIETClassifier(max_micro_batch_size=micro, **deterministic)
        component.train(data)
        weights.append(component.weights_)
    assert weights[0].keys() == weights[1].keys()
    # The label side's biases shift every intent's similarity by the same amount, and the loss
    # here is a softmax over every intent, so their true gradient is zero: what they get is
    # rounding, which Adam scales up to steps of the learning rate. Their values say nothing
    # about accumulation; every other weight must agree.
    shift_only = {"label_dense/bias", "label_embed/bias"}
    assert shift_only <= weights[0].keys()
    for name in weights[0].keys() - shift_only:
        np.testing.assert_allclose(weights[1][name], weights[0][name], atol=5e-3, err_msg=name)


def test_rasa_rule_adds_the_l2_gradient_only_where_the_loss_gradient_is_positive() -> None:
    """Rasa's trainer: gradient = loss's + L2's where the loss's > 0 (elementwise); a sparse
    table's gradient becomes dense, its rows' L2 ``2 * l2 * W`` formed from the weights."""
    import tensorflow as tf

    from nlu_engine.classifiers.diet.steps import rasa_rule

    dense = rasa_rule(tf.constant([1.0, -1.0, 0.0]), tf.constant([0.5, 0.5, 0.5]), None, 0.0)
    np.testing.assert_allclose(dense.numpy(), [1.5, -1.0, 0.0])
    assert rasa_rule(None, tf.constant([1.0]), None, 0.0) is None
    table = tf.Variable([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    # row 0 touched twice (summed: [0.5, -1.0]), row 2 once; row 1 untouched gets nothing
    rows = tf.IndexedSlices(tf.constant([[0.25, -0.5], [0.25, -0.5], [-1.0, 2.0]]),
                            tf.constant([0, 0, 2]), tf.constant([3, 2]))
    out = rasa_rule(rows, None, table, 0.1, weight=0.5).numpy()  # decay 2 * 0.1 * 0.5 * W = 0.1 W
    np.testing.assert_allclose(out, [[0.5 + 0.1, -1.0], [0.0, 0.0], [-1.0, 2.0 + 0.6]], rtol=1e-6)


def test_rasa_regularization_trains_and_differs_from_the_whole_table_l2(featurized) -> None:
    _, data = featurized
    settings = dict(epochs=2, transformer_size=32, show_progress=False, calibration=False)
    weights = {}
    for mode in ("all_rows", "rasa"):
        component = DIETClassifier(sparse_regularization=mode, **settings)
        component.train(data)
        weights[mode] = component.weights_
        assert all(np.isfinite(w).all() for w in component.weights_.values())
    assert any(not np.allclose(weights["rasa"][k], weights["all_rows"][k]) for k in weights["rasa"])
