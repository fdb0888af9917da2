"""The review loop on a bot's traffic: the 200 messages the review ranks first, labelled and
fine-tuned on, against 200 random ones.

    .venv/bin/python -m benchmarks.perf.review_loop [--train FEW.md] [--traffic TEST.md] \
        [--config diet] [--budget 200] [--seeds 1] [--regions 200] [--model BASE.tar.gz] \
        [--keep FOLDER [--reuse-log] [--reuse-models]] [--json OUT]

1. Trains the bot (``--config`` on ``--train``; default the 10-shot NLU-Evaluation-Data fold 1
   file and ``diet.yml``), unless ``--model`` names it.
2. Logs its traffic: every message of ``--traffic`` (default fold 1's test split) sent to
   ``nlu-engine serve --log-messages`` on 127.0.0.1, each with its ``message_id``.
3. For each of ``--seeds``, reviews it through the review page's own HTTP endpoints
   (``/api/inbox``, ``/api/decide``; the page's head spread over ``--regions`` regions, their
   k-means seeded with the seed; one review for all seeds with ``--regions 0``, the priority
   order): the groups in the page's order, each labelled with its true intent and entities (a
   group whose members differ in their true intent is split, one decision per intent, as a
   reviewer would), until ``--budget`` messages are labelled; ``reviewed.yml`` is what the page
   writes. Each review's set is fine-tuned on (``nlu-engine train --finetune``, the training
   data plus the set).
4. For each of ``--seeds``, fine-tunes on the training data plus ``--budget`` random traffic
   messages (the seed's draw).
5. Scores (each model parses the traffic once): per seed, the review's and the random draw's
   fine-tunes on the traffic in neither of their sets (``pairs``, and their ``median``); every
   fine-tune and the base on the traffic in no labelled set (one set for all); each fine-tune and
   the base on the traffic its own set left (``remaining``).

Prints and writes (``--json``) the accuracies, how many of the labelled messages the base model
had wrong, the decisions the reviews took and the fine-tunes' seconds.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import DATASETS, ROOT, emit_json
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.review.coverage import REGIONS
from nlu_engine.server.process import ServerProcess

TRAIN = DATASETS / "fewshot" / "NLU-Eval-KFold_1-10shot.md"
TRAFFIC = DATASETS / "NLU-Evaluation-Data" / "KFold_1" / "test.md"
CLI = [sys.executable, "-m", "nlu_engine.cli.main"]


def run(command: list[str]) -> float:
    """Run a CLI command; its wall seconds (its output shown only when it fails)."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return round(time.perf_counter() - start, 1)


def log_traffic(model: Path, database: Path, traffic: list[Message]) -> int:
    """Send every traffic message through ``serve --log-messages``; the rows stored."""
    import httpx

    from nlu_engine.server.message_store import open_store

    with ServerProcess(["-m", str(model), "--log-messages", str(database)], ready_path="/status",
                       timeout=180) as server:
        with httpx.Client(base_url=server.url, timeout=60, trust_env=False) as client:
            for index, message in enumerate(traffic):
                answer = client.post("/model/parse", json={"text": message.text, "message_id": str(index)})
                answer.raise_for_status()
        server.stop(timeout=60)
    store = open_store(str(database), create=False)
    try:
        return store.count()
    finally:
        store.close()


def truth_of(traffic: list[Message], database: Path) -> dict[str, Message]:
    """Log row id -> the traffic message it logged (by the ``message_id`` sent)."""
    from nlu_engine.server.message_store import open_store

    store = open_store(str(database), create=False)
    try:
        return {row["id"]: traffic[int(row["message_id"])] for row in store.rows()}
    finally:
        store.close()


def review(database: Path, data: Path, truth: dict[str, Message], budget: int,
           regions: int = REGIONS, seed: int = 0) -> dict[str, Any]:
    """Label the inbox in the page's order through its endpoints until ``budget`` messages (the
    page's head spread over ``regions`` regions, their k-means seeded with ``seed``)."""
    from starlette.testclient import TestClient

    from nlu_engine.review.app import ReviewSettings, create_app

    settings = ReviewSettings(db=str(database), data=data, regions=regions, regions_seed=seed)
    api = TestClient(create_app(settings))
    groups = api.get("/api/inbox", params={"limit": 500}).json()["groups"]
    labelled: list[str] = []
    decisions = 0
    for group in groups:
        by_intent: dict[str, list[dict[str, Any]]] = {}
        for member in group["messages"]:
            by_intent.setdefault(truth[member["id"]].intent, []).append(member)
        for intent, members in by_intent.items():
            members = members[: budget - len(labelled)]
            if not members:
                break
            first = truth[members[0]["id"]]
            body: dict[str, Any] = {"intent": intent, "reviewer": "benchmark",
                                    "messages": [{"id": m["id"], "version": m["version"]} for m in members]}
            if first.text == members[0]["text"]:
                body.update(entities=first.entities, entities_of=members[0]["id"])
            answer = api.post("/api/decide", json=body)
            answer.raise_for_status()
            decisions += 1
            labelled += [m["id"] for m in members]
        if len(labelled) >= budget:
            break
    state = api.get("/api/state").json()
    return {"ids": labelled, "decisions": decisions, "written": state.get("written"),
            "left_out": len(state.get("left_out") or [])}


def clear_review(database: Path) -> None:
    """Forget the decisions of an earlier run (the log stays)."""
    import sqlalchemy as sa

    from nlu_engine.review.decisions import decisions_table, history_table, open_review
    from nlu_engine.review.index import rebuild

    store = open_review(str(database))
    try:
        with store.engine.begin() as connection:
            connection.execute(sa.delete(history_table))
            connection.execute(sa.delete(decisions_table))
            rebuild(connection, store.threshold)  # every message pending again
    finally:
        store.close()


#: model archive -> text -> the intent it parsed the text as (each text parsed once a model)
_PREDICTED: dict[Path, dict[str, str | None]] = {}


def accuracy(model_path: Path, messages: list[Message]) -> float:
    from nlu_engine.assembly.model import Model

    cache = _PREDICTED.setdefault(Path(model_path).resolve(), {})
    missing = list(dict.fromkeys(m.text for m in messages if m.text not in cache))
    if missing:
        results = Model.load(model_path).parse_batch(missing)
        cache.update(zip(missing, [(r.get("intent") or {}).get("name") for r in results], strict=True))
    right = sum(cache[m.text] == m.intent for m in messages)
    return round(100 * right / len(messages), 2)


def wrong_share(model_path: Path, messages: list[Message]) -> float:
    """Percent of ``messages`` the model gets wrong (what a labelled set teaches it)."""
    return round(100 - accuracy(model_path, messages), 2)


def finetune(base: Path, train: str, labelled: Path, models: Path, name: str, reuse: bool) -> float | None:
    """``train --finetune`` ``base`` on ``train`` plus ``labelled`` into ``models/NAME.tar.gz``; its
    seconds (None: ``reuse`` and the archive was there already)."""
    if reuse and (models / f"{name}.tar.gz").is_file():
        return None
    return run([*CLI, "train", "--finetune", str(base), "--data", train, "--data", str(labelled),
                "--out", str(models), "--fixed-model-name", name])


def scored(model: Path, base: Path, labelled: list[Message], traffic: list[Message],
           held: list[Message]) -> dict[str, Any]:
    """A fine-tuned ``model``'s figures: how many of its ``labelled`` set ``base`` had wrong, its
    accuracy on ``held`` (in no labelled set of any run) and on the traffic its own set left."""
    left = [m for m in traffic if id(m) not in {id(x) for x in labelled}]
    return {"base_wrong_pct": wrong_share(base, labelled), "accuracy": accuracy(model, held),
            "remaining": {"messages": len(left), "base": accuracy(base, left),
                          "accuracy": accuracy(model, left)}}


def label_runs(args: argparse.Namespace, folder: Path, base: Path, traffic: list[Message],
               database: Path) -> tuple[list[list[Message]], list[dict[str, Any]]]:
    """For each seed: the review's ``--budget`` messages (its regions seeded with the seed; one
    review when ``--regions 0``, whose order has no seed) and a fine-tune on them."""
    from nlu_engine.training_data import write_data

    truth = truth_of(traffic, database)
    sets: list[list[Message]] = []
    runs: list[dict[str, Any]] = []
    for seed in range(args.seeds if args.regions else 1):
        if seed or args.reuse_log:
            clear_review(database)
        reviewed = review(database, folder / "data", truth, args.budget, args.regions, seed)
        sets.append([truth[i] for i in reviewed["ids"]])
        path = folder / f"ranked-{seed}.yml"
        write_data(TrainingData(messages=sets[-1]), path, "yaml")
        name = f"ranked-r{args.regions}-s{seed}" if args.regions else "ranked-r0"
        runs.append({"seed": seed, "model": name, "decisions": reviewed["decisions"],
                     "written": reviewed["written"], "left_out": reviewed["left_out"],
                     "finetune_s": finetune(base, args.train, path, folder / "models", name,
                                            args.reuse_models)})
    return sets, runs


def random_runs(args: argparse.Namespace, folder: Path, base: Path,
                traffic: list[Message]) -> tuple[list[list[Message]], list[dict[str, Any]]]:
    """For each seed: ``--budget`` random traffic messages with their true labels, fine-tuned on."""
    from nlu_engine.training_data import write_data

    sets: list[list[Message]] = []
    runs: list[dict[str, Any]] = []
    for seed in range(args.seeds):
        sets.append([traffic[i] for i in random.Random(seed).sample(range(len(traffic)), args.budget)])
        path = folder / f"random-{seed}.yml"
        write_data(TrainingData(messages=sets[-1]), path, "yaml")
        runs.append({"seed": seed, "model": f"random-{seed}",
                     "finetune_s": finetune(base, args.train, path, folder / "models", f"random-{seed}",
                                            args.reuse_models)})
    return sets, runs


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return round(ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2, 2)


def compare(result: dict[str, Any], base: Path, models: Path, traffic: list[Message],
            ranked: tuple[list[list[Message]], list[dict[str, Any]]],
            randoms: tuple[list[list[Message]], list[dict[str, Any]]]) -> None:
    """Score every fine-tune; per seed, the ranked run against the random one on the messages in
    neither of their sets (``pair``), and all of them on the messages in no set (``accuracy``)."""
    for path in [base, *(models / f"{run_['model']}.tar.gz" for run_ in ranked[1] + randoms[1])]:
        accuracy(path, traffic)  # every text parsed once, in batches; the scores below are subsets
    used = {id(m) for labelled in ranked[0] + randoms[0] for m in labelled}
    held = [m for m in traffic if id(m) not in used]
    result.update(evaluated_on=len(held), base_accuracy=accuracy(base, held))
    for sets, runs in (ranked, randoms):
        for labelled, run_ in zip(sets, runs, strict=True):
            run_.update(scored(models / f"{run_['model']}.tar.gz", base, labelled, traffic, held))
    pairs = []
    for seed, random_set in enumerate(randoms[0]):
        mine = seed if len(ranked[0]) > 1 else 0  # --regions 0: one review for every seed
        either = {id(m) for m in ranked[0][mine] + random_set}
        pair = [m for m in traffic if id(m) not in either]
        ranked_acc = accuracy(models / f"{ranked[1][mine]['model']}.tar.gz", pair)
        random_acc = accuracy(models / f"random-{seed}.tar.gz", pair)
        pairs.append({"seed": seed, "messages": len(pair), "base": accuracy(base, pair), "ranked": ranked_acc,
                      "random": random_acc, "difference": round(ranked_acc - random_acc, 2)})
    result.update(ranked=ranked[1], random=randoms[1], pairs=pairs)
    if pairs:
        result["median"] = {key: median([p[key] for p in pairs])
                            for key in ("base", "ranked", "random", "difference")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", default=str(TRAIN))
    parser.add_argument("--traffic", default=str(TRAFFIC))
    parser.add_argument("--config", default=str(ROOT / "nlu_engine" / "pipelines" / "diet.yml"))
    parser.add_argument("--model", default=None, help="the bot, trained already (skips step 1)")
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=1,
                        help="random draws to compare against, and reviews (the regions' k-means seeds)")
    parser.add_argument("--regions", type=int, default=REGIONS,
                        help=f"the review page's regions (default: the page's, {REGIONS}; 0: priority order)")
    parser.add_argument("--keep", default=None, metavar="FOLDER", help="keep the models and files here")
    parser.add_argument("--reuse-log", action="store_true",
                        help="with --keep and --model: keep FOLDER/log.db when it holds the traffic")
    parser.add_argument("--reuse-models", action="store_true",
                        help="with --keep: a fine-tune whose archive FOLDER/models holds already is not run "
                             "again (the fine-tunes are deterministic: same base, data and config)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    from nlu_engine.training_data import load_data

    traffic = [m for m in load_data(args.traffic).messages if m.intent]
    with tempfile.TemporaryDirectory(prefix="review-loop-") as temporary:
        folder = Path(args.keep or temporary)
        (folder / "data").mkdir(parents=True, exist_ok=True)
        link = folder / "data" / Path(args.train).name  # the page reads the bot's data from its folder
        if not link.exists():
            link.symlink_to(Path(args.train).resolve())
        models = folder / "models"
        result: dict[str, Any] = {"train": args.train, "traffic": args.traffic, "config": args.config,
                                  "traffic_messages": len(traffic), "budget": args.budget,
                                  "regions": args.regions, "seeds": args.seeds}
        base = Path(args.model) if args.model else models / "base.tar.gz"
        if not args.model:
            result["base_train_s"] = run([*CLI, "train", "-c", args.config, "--data", args.train,
                                          "--out", str(models), "--fixed-model-name", "base"])
        database = folder / "log.db"
        if args.reuse_log and database.is_file():
            result["rows_logged"] = len(truth_of(traffic, database))
        else:
            database.unlink(missing_ok=True)
            result["rows_logged"] = log_traffic(base, database, traffic)
        ranked = label_runs(args, folder, base, traffic, database)
        compare(result, base, models, traffic, ranked, random_runs(args, folder, base, traffic))
    emit_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
