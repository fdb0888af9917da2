"""Rasa's demo bot (RasaHQ/rasa-demo) against Rasa 3.6: intent and response selection, same split,
same config, same run (issue 40, item 5).

    .venv/bin/python -m benchmarks.rasa.demo_bot --project PATH/TO/rasa-demo [--engines ours rasa]
        [--seeds 42] [--epochs 20] [--set ResponseSelector.epochs=40]

``--project`` is a checkout of the demo bot (its repository is not on PyPI, so it is not shipped
here). Its NLU data (``data/nlu``: examples, lookups, the responses of its three retrieval intents)
is split 80/20 per intent and response key with ``--seeds`` (``nlu-engine data split``'s rule),
and its own ``config.yml`` is used with every ``epochs`` set to ``--epochs`` (20, as Rasa 3.6 was
measured) and the components that need a running server left out (``DucklingEntityExtractor``).

Each engine trains with its own command in its own process and parses the test messages. Scores:
- intent accuracy over all test messages as parsed (``nlu_fallback`` counts as wrong) and with
  the fallback undone (the best intent of the ranking other than ``nlu_fallback``);
- response accuracy over the retrieval messages: the response key chosen by the selector of the
  message's retrieval intent (``response_selector[faq]``), whatever the intent classifier said;
- the whole training command's wall time.
``--set`` overrides apply to our engine only (to try a change against Rasa's unchanged run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import RESULTS
from benchmarks.studies.retrieval_benchmark import ours, rasa

FALLBACK = "nlu_fallback"
NEEDS_A_SERVER = {"DucklingEntityExtractor", "DucklingHTTPExtractor"}


def demo_config(project: Path, epochs: int, folder: Path) -> Path:
    """The demo bot's own NLU pipeline, ``epochs`` everywhere, without server-bound components."""
    raw = yaml.safe_load((project / "config.yml").read_text(encoding="utf-8"))
    pipeline = [dict(step) for step in raw["pipeline"] if step["name"] not in NEEDS_A_SERVER]
    for step in pipeline:
        if "epochs" in step:
            step["epochs"] = epochs
    config = {"language": raw.get("language", "en"), "pipeline": pipeline,
              "assistant_id": "demo-bot-benchmark"}
    path = folder / "config.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def split(project: Path, seed: int, folder: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The training file (examples, lookups, synonyms, responses) and the gold test messages."""
    from nlu_engine.training_data import load_data, write_data
    from nlu_engine.training_data.split import train_test_split

    data = load_data(project / "data" / "nlu")
    train, test = train_test_split(data, 0.8, seed)
    path = write_data(train, folder / "train.yml", "yaml")
    gold = [{"text": m.text, "intent": m.intent, "key": m.intent_response_key} for m in test.messages]
    return path, gold


def _intent(result: dict[str, Any], undo_fallback: bool) -> str | None:
    if not undo_fallback or (result.get("intent") or {}).get("name") != FALLBACK:
        return (result.get("intent") or {}).get("name")
    ranking = [r["name"] for r in result.get("intent_ranking") or [] if r["name"] != FALLBACK]
    return ranking[0] if ranking else None


def _chosen(result: dict[str, Any], key: str) -> dict[str, Any]:
    selectors = result.get("response_selector") or {}
    selector = selectors.get(key.split("/", 1)[0]) or selectors.get("default") or {}
    return selector.get("response") or {}


def score(results: list[dict[str, Any]], gold: list[dict[str, Any]]) -> dict[str, Any]:
    """Intent accuracy (as parsed and with the fallback undone) and response accuracy, in %."""
    pairs = list(zip(results, gold, strict=True))
    right: list[float] = []
    wrong: list[str] = []
    for result, expected in pairs:
        if not expected["key"]:
            continue
        chosen = _chosen(result, expected["key"])
        if chosen.get("intent_response_key") == expected["key"]:
            right.append(float(chosen.get("confidence") or 0.0))
        else:
            wrong.append(f"{expected['text']!r}: {expected['key']} -> {chosen.get('intent_response_key')}")
    retrieval = len(right) + len(wrong)

    def share(hits: int) -> float:
        return round(100 * hits / len(pairs), 2)

    return {
        "intent_accuracy": share(sum(_intent(r, False) == g["intent"] for r, g in pairs)),
        "intent_accuracy_fallback_undone": share(sum(_intent(r, True) == g["intent"] for r, g in pairs)),
        "fallback_share": share(sum(_intent(r, False) == FALLBACK for r, _ in pairs)),
        "response_accuracy": round(100 * len(right) / retrieval, 2) if retrieval else None,
        "retrieval_messages": retrieval,
        "test_messages": len(pairs),
        "errors": wrong,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, required=True, help="a checkout of RasaHQ/rasa-demo")
    parser.add_argument("--engines", nargs="+", default=["ours", "rasa"], choices=["ours", "rasa"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[42])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--set", action="append", default=[], metavar="COMPONENT.KEY=VALUE")
    parser.add_argument("--out", type=Path, default=RESULTS / "demo_bot.json")
    args = parser.parse_args()
    from nlu_engine.evaluation.benchmarking import cpu_model

    rows = []
    keys = ("intent_accuracy", "intent_accuracy_fallback_undone", "response_accuracy", "train_wall_s")
    with tempfile.TemporaryDirectory(prefix="demo-bot-") as tmp:
        config = demo_config(args.project, args.epochs, Path(tmp))
        for seed in args.seeds:
            folder = Path(tmp) / f"seed{seed}"
            folder.mkdir()
            train, gold = split(args.project, seed, folder)
            texts = [g["text"] for g in gold]
            for engine in args.engines:  # A B per seed: machine noise hits both
                out = folder / engine
                out.mkdir()
                if engine == "ours":
                    wall, results = ours(config, train, texts, out, args.set)
                else:
                    wall, results = rasa(config, train, texts, out)
                row = {"seed": seed, "engine": engine, "train_wall_s": round(wall, 1), **score(results, gold)}
                print(json.dumps({k: v for k, v in row.items() if k != "errors"}), flush=True)
                rows.append(row)
    medians = {engine: {key: statistics.median(r[key] for r in rows if r["engine"] == engine) for key in keys}
               for engine in args.engines}
    result = {"project": str(args.project), "epochs": args.epochs, "set": args.set, "seeds": args.seeds,
              "rows": rows, "median": medians, "cpu": cpu_model(), "date": time.strftime("%Y-%m-%d %H:%M")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(medians, indent=2))


if __name__ == "__main__":
    main()
