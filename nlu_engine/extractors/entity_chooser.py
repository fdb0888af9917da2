"""EntityChooser: of two entity extractors, the one whose held-out entities were better.

Neither entity extractor of the default pipeline is best on every data: with about twenty
examples an intent a CRF over hand-made token features (``CRFEntityExtractor``) tags more spans
right than DIET's CRF over its transformer in some languages and data sets, and not in others
(BENCHMARKS.md, "Entities from few examples"). The chooser measures which on the training data
itself and returns that one's entities.

**Held-out entities.** An extractor named in ``extractors`` records, on the training examples it
held out, the entities it predicted for them before it learned from them (``record_held_out``,
in ``Message.extra``, never stored). DIET records them on the examples it holds out for its
calibration, or, when the sentence head ranks the intents, on a share of the examples that
joins the last epochs of its training; ``CRFEntityExtractor`` learns from the other examples,
records its own predictions for those an extractor before it held out, then learns from every
example.

**Choice.** On the examples every one of ``extractors`` recorded, each one's exact-span micro F1
(start, end and entity type) against the gold entities; the best is chosen, the first of
``extractors`` on a tie. With fewer than ``min_held_out_entities`` gold entities there (small
data, which DIET holds nothing out of), the first is kept, with one notice (none when the data
has no entities). Nothing is chosen on
a test split: only on what the training data held out. Fine-tuning chooses again when the
examples say, and keeps the stored choice otherwise.

**Parse**: the entities of the other ``extractors`` are removed; other extractors' (regexes,
Duckling) are left as they are. ``chooser.json`` keeps the choice and the held-out scores.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlu_engine.contract.component import ENTITIES, Component, FinetuneOptions, Link, param
from nlu_engine.contract.errors import NOTICE, ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.bilou import f1_score

logger = logging.getLogger(__name__)

#: the key of ``Message.extra`` the held-out entities are kept under: extractor -> entities
HELD_OUT_ENTITIES = "held_out_entities"
STATE_FILE = "chooser.json"


def record_held_out(message: Message, extractor: str, entities: Iterable[dict[str, Any]]) -> None:
    """Keep ``extractor``'s entities predicted for a training example it held out."""
    message.extra.setdefault(HELD_OUT_ENTITIES, {})[extractor] = list(entities)


def held_out_examples(messages: Sequence[Message]) -> list[Message]:
    """The examples some extractor recorded held-out entities on."""
    return [m for m in messages if m.extra.get(HELD_OUT_ENTITIES)]


def _spans(entities: Iterable[dict[str, Any]]) -> set[tuple[int, int, str]]:
    return {(int(e["start"]), int(e["end"]), str(e["entity"])) for e in entities}


def exact_f1(messages: Sequence[Message], extractor: str) -> float:
    """Micro exact-span F1 of ``extractor``'s recorded held-out entities on ``messages``."""
    correct = gold = predicted = 0
    for message in messages:
        truth = _spans(message.entities)
        guess = _spans(message.extra[HELD_OUT_ENTITIES][extractor])
        correct += len(truth & guess)
        gold += len(truth)
        predicted += len(guess)
    return f1_score(correct, gold, predicted)


class EntityChooser(Component):
    """Keeps the entities of the extractor that was best on the held-out training examples."""

    requires = (ENTITIES,)

    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        #: the extractors chosen between, the first kept when nothing can be measured
        extractors: list[str] = param(["DIETClassifier", "CRFEntityExtractor"])
        #: fewer gold entities than this on the held-out examples choose nothing (the first kept)
        min_held_out_entities: int = param(20, low=1)

        def validate(self) -> None:
            super().validate()
            if len(self.extractors) < 2 or len(set(self.extractors)) != len(self.extractors):
                raise ConfigError("'extractors' names two or more different entity extractors, "
                                  "e.g. [DIETClassifier, CRFEntityExtractor]")

    config: Config

    @classmethod
    def links(cls, config: EntityChooser.Config) -> tuple[Link, ...]:
        """Each extractor of ``extractors`` before it, asked to record its held-out entities (DIET
        then holds a share out on few examples an intent, which costs it a little: BENCHMARKS.md,
        "Entities from few examples"); nothing changes for a pipeline without a chooser."""
        return tuple(Link("an entity extractor", names=(name,), provides=ENTITIES,
                          asks="records_held_out_entities", named_in="extractors",
                          advice=f"add it above {cls.component_name()} or leave it out of `extractors`")
                     for name in config.extractors)

    def train(self, data: TrainingData) -> None:
        members = list(self.config.extractors)
        held = [m for m in held_out_examples(data.messages)
                if all(name in m.extra[HELD_OUT_ENTITIES] for name in members)]
        entities = sum(len(m.entities) for m in held)
        self.chosen_, self.scores_ = members[0], {}
        if not any(m.entities for m in data.messages):
            return  # no entities to choose between: nothing to say
        if entities < self.config.min_held_out_entities:
            logger.log(NOTICE, "%s: %d gold entities on the examples %s all held out (%d needed to "
                       "choose): %s's entities are kept", self.component_name(), entities,
                       " and ".join(members), self.config.min_held_out_entities, self.chosen_)
            return
        self.scores_ = {name: exact_f1(held, name) for name in members}
        best = max(self.scores_.values())
        self.chosen_ = next(name for name in members if self.scores_[name] == best)
        logger.info("%s: held-out exact-span F1 on %d entities: %s; %s chosen", self.component_name(),
                    entities, ", ".join(f"{n} {s:.3f}" for n, s in self.scores_.items()), self.chosen_)

    def finetune(self, data: TrainingData, previous: Component, options: FinetuneOptions) -> None:
        """Chosen again when the held-out examples say (DIET holds none out when it resumes a
        stored network on few examples an intent); otherwise the stored choice stands."""
        self.train(data)
        if not self.scores_ and isinstance(previous, EntityChooser):
            self.chosen_, self.scores_ = previous.chosen_, dict(previous.scores_)

    def dropped(self) -> list[str]:
        """The extractors whose entities are removed."""
        return [name for name in self.config.extractors if name != getattr(self, "chosen_", None)]

    def process(self, messages: list[Message]) -> None:
        dropped = set(self.dropped())
        if not dropped:
            return
        for message in messages:
            message.entities[:] = [e for e in message.entities if e.get("extractor") not in dropped]

    def persist(self, directory: Path) -> None:
        state = {"chosen": getattr(self, "chosen_", None), "scores": getattr(self, "scores_", {})}
        (Path(directory) / STATE_FILE).write_text(json.dumps(state, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path, config: EntityChooser.Config) -> EntityChooser:
        chooser = cls(config)
        state = json.loads((Path(directory) / STATE_FILE).read_text(encoding="utf-8"))
        chosen = state.get("chosen")
        if chosen not in config.extractors:
            raise ValueError(f"{STATE_FILE}: 'chosen' {chosen!r} is not among 'extractors' "
                             f"{config.extractors}")
        chooser.chosen_ = chosen
        chooser.scores_ = {str(k): float(v) for k, v in state.get("scores", {}).items()}
        return chooser
