"""Entity confidences that mean what they say: a Platt map of ``confidence_entity``.

An extractor's CRF gives each entity the smallest marginal of its tokens' tags. On a test set
that number is not the chance the entity is exactly right (its type and span): DIET's on xSID
Italian said 0.79 on average for entities 66 % right, and the entities it gave 0.8-0.9 were right
half the time (BENCHMARKS.md, "Where the entity errors are"). The map fitted here makes a 0.8
right about 8 times in 10: ``c' = sigmoid(a * logit(c) + b)``, ``a`` and ``b`` fitted by
likelihood (``held_out.fit_top_label``, the intents' own Platt scaling) to whether each entity
predicted for a held-out training example was exactly right. It is monotone: the entities a
threshold keeps are the same, only the number a threshold needs changes.

It is fitted only on enough held-out entities (``MIN_ENTITIES``, with ``MIN_EACH`` right and
``MIN_EACH`` wrong); otherwise the confidences stay the CRF's. ``entity_calibration.json`` keeps
the two numbers; a folder without it (an archive from before) is uncalibrated.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.classifiers.held_out import fit_top_label

STATE_FILE = "entity_calibration.json"
#: fewer held-out predicted entities than this fit no map
MIN_ENTITIES = 40
#: nor do fewer right or fewer wrong ones among them than this
MIN_EACH = 8


def exactly_right(gold: Iterable[Mapping[str, Any]], predicted: Sequence[Mapping[str, Any]]) -> list[bool]:
    """Whether each predicted entity's ``(entity, start, end)`` is a gold one no earlier
    prediction matched."""
    left = Counter((str(e["entity"]), int(e["start"]), int(e["end"])) for e in gold)
    right = []
    for entity in predicted:
        key = (str(entity["entity"]), int(entity["start"]), int(entity["end"]))
        right.append(left[key] > 0)
        if right[-1]:
            left[key] -= 1
    return right


@dataclass(frozen=True)
class EntityCalibration:
    """``sigmoid(slope * logit(c) + bias)`` of each raw confidence ``c``; identity when
    ``entities`` is 0 (not fitted)."""

    slope: float = 1.0
    bias: float = 0.0
    #: held-out predicted entities it was fitted on, and how many of them were wrong
    entities: int = 0
    wrong: int = 0

    @property
    def calibrated(self) -> bool:
        return self.entities > 0

    @classmethod
    def fit(cls, pairs: Sequence[tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]]]
            ) -> EntityCalibration:
        """Fitted on ``(gold entities, predicted entities)`` of held-out examples (predicted with
        their raw ``confidence_entity``); unfitted with too few of them (module docstring)."""
        confidences: list[float] = []
        right: list[bool] = []
        for gold, predicted in pairs:
            for entity, ok in zip(predicted, exactly_right(gold, predicted), strict=True):
                confidence = entity.get("confidence_entity")
                if isinstance(confidence, int | float):
                    confidences.append(float(confidence))
                    right.append(ok)
        wrong = len(right) - sum(right)
        if len(right) < MIN_ENTITIES or min(wrong, sum(right)) < MIN_EACH:
            return cls()
        slope, bias = fit_top_label(np.array(confidences), np.array(right))
        return cls(slope=slope, bias=bias, entities=len(right), wrong=wrong)

    def apply(self, confidence: float) -> float:
        if not self.calibrated:
            return confidence
        c = min(max(float(confidence), 1e-7), 1 - 1e-7)
        z = self.slope * float(np.log(c / (1 - c))) + self.bias
        return float(1.0 / (1.0 + np.exp(-z)))

    def apply_to(self, entities: Iterable[dict[str, Any]]) -> None:
        """Map each entity's ``confidence_entity`` in place."""
        if not self.calibrated:
            return
        for entity in entities:
            if isinstance(entity.get("confidence_entity"), int | float):
                entity["confidence_entity"] = self.apply(entity["confidence_entity"])

    def persist(self, directory: Path) -> None:
        if self.calibrated:
            state = {"map": "platt", "slope": self.slope, "bias": self.bias,
                     "entities": self.entities, "wrong": self.wrong}
            (Path(directory) / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> EntityCalibration:
        """The stored map, or the identity when the folder has none."""
        path = Path(directory) / STATE_FILE
        if not path.is_file():
            return cls()
        state = json.loads(path.read_text(encoding="utf-8"))
        try:
            slope, bias = float(state["slope"]), float(state["bias"])
            entities, wrong = int(state["entities"]), int(state.get("wrong", 0))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{STATE_FILE}: 'slope', 'bias' and 'entities' must be numbers") from None
        if not (np.isfinite(slope) and np.isfinite(bias)) or slope <= 0 or entities < 1:
            raise ValueError(f"{STATE_FILE}: 'slope' must be a positive number, 'bias' a number "
                             "and 'entities' at least 1")
        return cls(slope=slope, bias=bias, entities=entities, wrong=wrong)
