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
