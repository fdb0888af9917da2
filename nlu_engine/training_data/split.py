"""Seeded, intent-stratified train/test splits and cross-validation folds.

Examples are grouped by their full intent name (retrieval intents by ``faq/ask_name``;
examples without an intent form a group of their own). Each group is shuffled with a generator
seeded by ``seed`` and the group's name, so a group's split does not change when other intents
are added. An intent with a single example always stays in training. Both sides keep the
synonyms, regex features, lookup tables and responses; examples keep their original order.
"""

from __future__ import annotations

import random
from collections import defaultdict

from nlu_engine.contract.training_data import TrainingData


def _groups(data: TrainingData) -> list[tuple[str, list[int]]]:
    by_label: dict[str, list[int]] = defaultdict(list)
    for index, message in enumerate(data.messages):
        by_label[message.intent_response_key or message.intent or ""].append(index)
    return sorted(by_label.items())


def _shuffled(indices: list[int], seed: int, label: str) -> list[int]:
    shuffled = list(indices)
    random.Random(f"{seed}:{label}").shuffle(shuffled)
    return shuffled


def train_test_split(
    data: TrainingData, training_fraction: float = 0.8, seed: int = 42
) -> tuple[TrainingData, TrainingData]:
    """``(train, test)``: per intent, ``round(n * training_fraction)`` examples go to train,
    at least one to each side when the intent has two or more."""
    if not 0.0 < training_fraction < 1.0:
        raise ValueError(f"training_fraction must be between 0 and 1 (got {training_fraction})")
    train: list[int] = []
    test: list[int] = []
    for label, indices in _groups(data):
        shuffled = _shuffled(indices, seed, label)
        n = len(shuffled)
        n_train = n if n < 2 else min(n - 1, max(1, round(n * training_fraction)))
        train.extend(shuffled[:n_train])
        test.extend(shuffled[n_train:])
    return _pick(data, train), _pick(data, test)


def stratified_folds(
    data: TrainingData, n_folds: int = 5, seed: int = 42
) -> list[tuple[TrainingData, TrainingData]]:
    """``n_folds`` ``(train, test)`` pairs; every example with a multi-example intent is in
    exactly one test fold, and each intent is spread as evenly as possible over the folds."""
    if n_folds < 2:
        raise ValueError(f"n_folds must be at least 2 (got {n_folds})")
    fold_of: dict[int, int] = {}
    offset = 0
    for label, indices in _groups(data):
        if len(indices) < 2:
            continue  # a single example never goes to test
        for k, index in enumerate(_shuffled(indices, seed, label)):
            fold_of[index] = (offset + k) % n_folds
        offset = (offset + len(indices)) % n_folds
    if len(fold_of) < n_folds:
        raise ValueError(
            f"{n_folds} folds need at least {n_folds} examples of intents with two or more "
            f"examples (found {len(fold_of)})"
        )
    folds = []
    for fold in range(n_folds):
        test = [i for i in range(len(data.messages)) if fold_of.get(i) == fold]
        train = [i for i in range(len(data.messages)) if fold_of.get(i) != fold]
        folds.append((_pick(data, train), _pick(data, test)))
    return folds


def _pick(data: TrainingData, indices: list[int]) -> TrainingData:
    return data.with_messages([data.messages[i] for i in sorted(indices)])
