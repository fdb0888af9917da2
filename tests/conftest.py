"""Shared fixtures: a tiny hand-made training set that exercises every data feature."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.extractors.duckling_stub import DucklingStub

PROJECT_ROOT = Path(__file__).resolve().parents[1]

# Property-based tests of the readers (hypothesis): "ci", the default, is a short seeded pass of
# `make test`; "long" (HYPOTHESIS_PROFILE=long, `make fuzz-props`) is the 100,000-input search
# (HYPOTHESIS_EXAMPLES=n: another count).
# The profile chooses how many inputs are tried, never how an input is read.
_QUIET = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=60, derandomize=True, deadline=None, database=None,
                          suppress_health_check=_QUIET, print_blob=True)
settings.register_profile("long", max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", 100_000)),
                          deadline=None, suppress_health_check=_QUIET, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# One TensorFlow serves the whole session, set up by whichever test imports it first: a
# bfloat16 fine-tune would ask for oneDNN, and every later test would run with it. The suite
# runs as the package does by default (oneDNN off); the tests of the bfloat16 path say so.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

# `make test` runs the suite on two processes (pytest-xdist), each test file whole on one of them,
# handed out in collection order. These files take longest (each trains several networks, or
# starts TensorFlow in subprocesses): they go first, longest first, so that the short files fill
# in around them and both processes finish together, not one of them running a long file alone
# at the end. Only the order changes, and only under xdist; a file missing from the list is only
# scheduled later.
LONG_FILES = (
    "tests/classifiers/diet/test_diet_training.py",
    "tests/classifiers/test_response_selector.py",
    "tests/classifiers/diet/test_diet_steps.py",
    "tests/classifiers/diet/test_diet_resume.py",
    "tests/classifiers/test_sentence_head.py",
    "tests/classifiers/diet/test_diet_inference.py",
    "tests/cli/test_cli.py",
    "tests/examples/test_projects.py",
    "tests/distributed/test_trials.py",
    "tests/assembly/test_finetune.py",
    "tests/test_setup.py",
    "tests/classifiers/diet/test_diet_calibration.py",
    "tests/cli/test_bad_input.py",
    "tests/assembly/test_hostile_weights.py",
    "tests/server/test_server.py",
    "tests/server/test_message_log.py",
    "tests/server/test_soak.py",
    "tests/examples/test_zh_assistant.py",
    "tests/test_contract.py",
    "tests/distributed/test_corpus.py",
    "tests/review/test_page.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the long files first (``LONG_FILES``); the rest keep their order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


# 3 intents x 4 examples; entities with roles, a synonym (inline and as a section), a regex and
# a lookup table. Small enough to train any component in a second or two.
TINY_NLU = r"""version: "3.1"
nlu:
- intent: greet
  examples: |
    - hi
    - hello there
    - good morning
    - hey bot
- intent: book_flight
  examples: |
    - fly from [Berlin]{"entity": "city", "role": "from"} to [Paris]{"entity": "city", "role": "to"}
    - book a flight to [NYC](city:New York) please
    - I need a ticket to [London](city) for [2](count) people
    - a flight from [Rome]{"entity": "city", "role": "from"} tomorrow
- intent: check_order
  examples: |
    - where is order [12345](order_id)
    - status of order [98765](order_id)
    - check my order [55555](order_id) now
    - track order [31415](order_id)
- synonym: New York
  examples: |
    - NYC
    - new york city
- regex: order_id
  examples: |
    - \b\d{5}\b
- lookup: city
  examples: |
    - Berlin
    - Paris
    - London
    - Rome
    - Madrid
"""

# Messages to parse: seen and unseen words, an entity from the lookup only, a synonym, a regex
# match, punctuation and an emoji-only message.
TINY_TEXTS = [
    "hi there",
    "fly from Madrid to Paris!",
    "check order 12345 please",
    "book a flight to NYC",
    "completely unknown words",
    "🙂",
]


@pytest.fixture(scope="session")
def tiny_data_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny training set as a Rasa YAML file (read-only: do not modify it)."""
    path = tmp_path_factory.mktemp("tiny") / "tiny_nlu.yml"
    path.write_text(TINY_NLU, encoding="utf-8")
    return path


@pytest.fixture
def tiny_texts() -> list[str]:
    """Messages to parse with a model trained on the tiny training set."""
    return list(TINY_TEXTS)


def noisy_nlu(seed: int = 0, intents: int = 5, per_intent: int = 50, noise: float = 0.35) -> str:
    """Rasa YAML of ``intents`` x ``per_intent`` examples whose words overlap between intents
    (``noise`` of them carry another intent's word): enough examples to hold 25 out for
    calibration, and a classifier unsure of many of them."""
    rng = random.Random(seed)
    shared = [f"s{i}" for i in range(12)]
    own = {f"intent_{k}": [f"w{k}_{i}" for i in range(6)] for k in range(intents)}
    lines = ['version: "3.1"', "nlu:"]
    for name, words in own.items():
        others = [w for n, ws in own.items() if n != name for w in ws]
        texts: set[str] = set()
        while len(texts) < per_intent:
            text = rng.sample(words, 1) + rng.sample(shared, 3)
            if rng.random() < noise:
                text = [rng.choice(others), *rng.sample(shared, 3), *rng.sample(words, rng.randint(0, 1))]
            rng.shuffle(text)
            texts.add(" ".join(text))
        lines += [f"- intent: {name}", "  examples: |", *(f"    - {t}" for t in sorted(texts))]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def noisy_data_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``noisy_nlu()`` as a Rasa YAML file (read-only: do not modify it)."""
    path = tmp_path_factory.mktemp("noisy") / "noisy_nlu.yml"
    path.write_text(noisy_nlu(), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def logreg_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A logreg model of the example assistant (data/nlu.yml; no TensorFlow), trained once for
    the corpus, command-line and distributed tests (read-only: do not modify it)."""
    from nlu_engine.assembly.model import train

    out = tmp_path_factory.mktemp("corpus-model")
    return train("logreg", str(PROJECT_ROOT / "data" / "nlu.yml"), out=out, fixed_model_name="logreg",
                 log=None)


@pytest.fixture(scope="session")
def duckling_server() -> Iterator[DucklingStub]:
    """A local stand-in for a Duckling server (``.url``; ``.requests`` records what it got)."""
    with DucklingStub() as stub:
        yield stub


@pytest.fixture
def duckling_url_env(duckling_server: DucklingStub, monkeypatch: pytest.MonkeyPatch) -> str:
    """``$RASA_DUCKLING_HTTP_URL`` pointing at the stub, which answers normally."""
    duckling_server.status, duckling_server.garbage = 200, False
    monkeypatch.setenv("RASA_DUCKLING_HTTP_URL", duckling_server.url)
    return duckling_server.url
