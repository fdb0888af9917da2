"""Seeded, intent-stratified splits: the one hold-out every part of the package uses
(:func:`stratified_holdout`: a classifier's calibration share, DIET's evaluation examples), the
one round-robin fold splitter (:func:`round_robin`: every cross-fitting's folds, drawn by
``classifiers/held_out.py``, and cross-validation's),
the train/test split users and benchmarks publish (``train_test_split``, drawn as it always was)
and cross-validation folds.

Examples are grouped by their label (for training data, the full intent name: retrieval intents
by ``faq/ask_name``). Which of a group's examples are held out is decided by a key per example
mixed with the seed: a hash of the example's content, so a group's split does not change when
other intents are added (or a seeded random draw without keys). An intent with a single example
always stays in training. Both sides of ``train_test_split`` keep the synonyms, regex features,
lookup tables and responses; examples keep their original order.
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from collections.abc import Hashable, Sequence

import numpy as np

from nlu_engine.contract.training_data import TrainingData


def stratified_holdout(
    labels: Sequence[Hashable | None], share: float, seed: int | None = 42, *,
    keys: np.ndarray | None = None, trained: np.ndarray | None = None,
    max_held: int | None = None, both_sides: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held-out) example indices, both sorted: ``share`` of each label's examples held out.

    Rounding: ``floor(n * share)`` of a label's ``n`` examples, so a label with fewer than
    ``1 / share`` keeps them all (a calibration share); with ``both_sides``, ``round(n * (1 -
    share))`` kept, but at least one and at most ``n - 1`` (a test split: every label with two or
    more examples on both sides). A label with one example, and an example without a label (None or ""), is
    never held out. ``max_held``: the share shrinks so that at most that many are held out.

    ``keys`` [N] uint64, one per example (a hash of its content, e.g. :func:`content_keys`): a
    label's held-out examples are those whose keys, mixed with the seed (None counts as 0), rank
    first, so which are held out depends on them and on their label's count (and, above
    ``max_held``, on the total), not on the order or the other labels' examples. ``trained`` [N]
    bool marks examples a stored model was trained on: they are never held out (a label then
    holds out fewer when its share grew). Without keys, a seeded random draw."""
    labelled = [i for i, label in enumerate(labels) if label is not None and label != ""]
    if max_held is not None and labelled:
        share = min(share, max_held / len(labelled))
    if keys is None:
        keys = np.random.default_rng(seed).integers(0, 2**63, len(labels), dtype=np.uint64)
    keys = np.asarray(keys, np.uint64)
    seen = np.zeros(len(labels), bool) if trained is None else np.asarray(trained, bool)
    if len(keys) != len(labels) or len(seen) != len(labels):
        raise ValueError(f"{len(labels)} labels, but {len(keys)} keys and {len(seen)} trained flags")
    ranks = _mixed(keys, seed or 0)
    by_label: dict[Hashable, list[int]] = defaultdict(list)
    for i in labelled:
        by_label[labels[i]].append(i)
    held: list[int] = []
    for members in by_label.values():
        n = len(members)
        if n < 2:
            continue
        n_held = n - min(n - 1, max(1, round(n * (1 - share)))) if both_sides else int(n * share)
        candidates = np.asarray([i for i in members if not seen[i]], np.int64)
        n_held = min(n_held, len(candidates))
        if n_held:
            order = np.argsort(ranks[candidates], kind="stable")
            held.extend(candidates[order[:n_held]].tolist())
    held_index = np.array(sorted(held), np.int64)
    return np.setdiff1d(np.arange(len(labels)), held_index), held_index


def round_robin(groups: Sequence[Sequence[int]], folds: int, size: int) -> np.ndarray:
    """The one fold splitter: a fold in ``range(folds)`` for each of ``size`` examples, or -1 for
    those in no group. Each group's examples (a label's, already shuffled by the caller's
    generator) take consecutive folds, the next group starting where the last one stopped, so
    a label's examples spread as evenly as they can and two or more are never all in one fold.
    Cross-validation (:func:`stratified_folds`) and every cross-fitting
    (``classifiers/held_out.cross_fit_folds``) draw their folds here."""
    assignment = np.full(size, -1, np.int64)
    offset = 0
    for members in groups:
        assignment[np.asarray(members, np.int64)] = (offset + np.arange(len(members))) % folds
        offset = (offset + len(members)) % folds
    return assignment


def content_keys(texts: Sequence[str]) -> np.ndarray:
    """A stable uint64 hash of each text [N], the ``keys`` of :func:`stratified_holdout`."""
    return np.array([int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "little")
                     for t in texts], np.uint64)


def _mixed(keys: np.ndarray, seed: int) -> np.ndarray:
    """``keys`` [N] uint64 scrambled with ``seed`` (SplitMix64's finaliser): a seeded order of
    the examples that each example's key alone decides."""
    with np.errstate(over="ignore"):
        z = keys ^ np.uint64((seed * 0x9E3779B97F4A7C15) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


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
    at least one to each side when the intent has two or more. Each intent's examples are
    shuffled by a generator seeded with ``seed`` and the intent's name, as ``nlu-engine data
    split`` has always drawn them: a published split (a benchmark's, a user's) stays the same
    for its seed. (The calibration share and DIET's evaluation examples use
    :func:`stratified_holdout`, whose members follow each example's content.)"""
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
    groups = [_shuffled(indices, seed, label) for label, indices in _groups(data) if len(indices) >= 2]
    assignment = round_robin(groups, n_folds, len(data.messages))  # a single example never goes to test
    fold_of = {i: int(f) for i, f in enumerate(assignment) if f >= 0}
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
