"""What a trained ``IntentCombiner`` stores, and reading it back.

``combiner.json`` holds the intents, the members (kind, name, weight), the sentence heads'
origins, whether the n-gram head weighs by coverage, the members' languages and the language
views; ``head_<i>/`` each head's arrays (``sentence_head.npz``, ``sparse_head.npz``);
``calibration.*`` the combination's calibration and ``view_<k>/calibration.*`` each view's. A
model from before a field existed parses as it did (no coverage weight, no views).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from nlu_engine.classifiers.calibration import Calibration
from nlu_engine.classifiers.combiner_members import KINDS, Member
from nlu_engine.classifiers.language_views import View
from nlu_engine.classifiers.sentence_head import SentenceHead
from nlu_engine.classifiers.sparse_head import SparseHead

STATE_FILE = "combiner.json"


def persist(directory: Path, fields: dict[str, Any], members: list[Member], calibration: Calibration,
            views: list[View]) -> None:
    """Write the state (``fields``: ``intents``, ``out_of_scope_intent``, ``origins``,
    ``ngram_coverage``, ``member_languages``, ``own_languages``; the members and views), the
    heads and the calibrations."""
    state: dict[str, Any] = {
        "intents": fields["intents"], "out_of_scope_intent": fields["out_of_scope_intent"],
        "members": [{"kind": m.kind, "name": m.name, "weight": m.weight} for m in members],
        "origins": fields["origins"], "ngram_coverage": fields["ngram_coverage"],
        "member_languages": fields["member_languages"], "own_languages": fields["own_languages"],
        "views": [{"members": list(v.members), "weights": v.weights, "origins": v.origins}
                  for v in views],
    }
    (directory / STATE_FILE).write_text(json.dumps(state, indent=1))
    for i, member in enumerate(members):
        if member.head is not None:
            (directory / f"head_{i}").mkdir()
            member.head.persist(directory / f"head_{i}")
    calibration.persist(directory)
    for k, view in enumerate(views):
        (directory / f"view_{k}").mkdir()
        view.calibration.persist(directory / f"view_{k}")


def read_state(directory: Path) -> dict[str, Any]:
    return json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))


def load_members(directory: Path, state: dict[str, Any], intents: int) -> list[Member]:
    """The members of ``combiner.json``, each head read from its folder."""
    members = []
    for i, entry in enumerate(state["members"]):
        kind, weight = str(entry["kind"]), float(entry["weight"])
        if kind not in KINDS or not np.isfinite(weight) or weight < 0:
            raise ValueError(f"{STATE_FILE}: member {i} is not a head or recorded scorer "
                             "with a weight of at least 0")
        head: SentenceHead | SparseHead | None = None
        if kind == "sparse":
            head = SparseHead.load(directory / f"head_{i}", labels=intents)
        elif kind == "head":
            head = SentenceHead.load(directory / f"head_{i}", labels=intents)
            if head is None:
                raise ValueError(f"{STATE_FILE}: member {i}'s head is missing (head_{i}/)")
        members.append(Member(kind, str(entry["name"]), weight, head))
    return members


def load_views(directory: Path, state: dict[str, Any], count: int) -> list[View]:
    """The language views of ``combiner.json`` over ``count`` members (none in a model from
    before them, which parses every message with the full combination, as it did)."""
    views = []
    for k, entry in enumerate(state.get("views", [])):
        members = tuple(int(i) for i in entry["members"])
        weights = [float(w) for w in entry["weights"]]
        if (any(not 0 <= i < count for i in members) or len(weights) != len(members)
                or not all(np.isfinite(w) and w >= 0 for w in weights)):
            raise ValueError(f"{STATE_FILE}: view {k} names members that are not there or weights "
                             "that are not numbers of at least 0")
        views.append(View(members, weights, Calibration.load(directory / f"view_{k}"),
                          [str(o) for o in entry.get("origins", [])]))
    return views
