"""Which in-scope score catches out-of-scope messages best (issue 29's measurement).

Trains the default pipeline on NLU-Evaluation-Data KFold_1 without K intents (chosen by seed), on
90 % of the rest (the other 10 % held out per intent, as the calibration holds out), then scores
every candidate on the test split, where the left-out intents' messages are out of scope:

    .venv/bin/python -m benchmarks.studies.oos_candidates --dump /tmp/oos.npz   # trains, then scores
    .venv/bin/python -m benchmarks.studies.oos_candidates --load /tmp/oos.npz   # scores a saved dump

For each candidate: AUROC (in scope against out), and at the threshold that keeps in-scope accuracy
(a fallback counts as an error) within one point of no fallback, the out-of-scope recall.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import numpy as np

from benchmarks.common import DIET_CONFIG, NLU_EVAL


def held_out_intents(intents: list[str], k: int, seed: int) -> list[str]:
    return sorted(random.Random(seed).sample(sorted(intents), k))


def dump(path: Path, fold: int, k: int, seed: int, config: str) -> None:
    from nlu_engine.assembly.config import load_config
    from nlu_engine.assembly.pipeline import Pipeline
    from nlu_engine.classifiers.calibration import MAX_HELD_OUT
    from nlu_engine.contract.training_data import TrainingData
    from nlu_engine.training_data import load_data
    from nlu_engine.training_data.split import stratified_holdout

    train = load_data(NLU_EVAL / f"KFold_{fold}" / "train.md")
    test = load_data(NLU_EVAL / f"KFold_{fold}" / "test.md")
    out = held_out_intents(sorted(train.intents), k, seed)
    kept = [m for m in train.messages if m.intent not in out]
    tr, ho = stratified_holdout([m.intent for m in kept], 0.1, seed, max_held=MAX_HELD_OUT)
    data = TrainingData(messages=[kept[i] for i in tr], synonyms=train.synonyms,
                        regex_features=train.regex_features, lookup_tables=train.lookup_tables)
    pipeline = Pipeline.build(load_config(config, ["DIETClassifier.calibration=false"]))
    pipeline.train(data)
    diet = next(c for c in pipeline.components if type(c).__name__ == "DIETClassifier")
    arrays: dict[str, np.ndarray] = {"intents": np.array(diet.intents_), "out": np.array(out)}
    for name, messages in (("train", [kept[i] for i in tr]), ("held", [kept[i] for i in ho]),
                           ("test", test.messages)):
        texts = [m.text for m in messages]
        from nlu_engine.contract.message import Message

        fresh = [Message(text=t) for t in texts]
        for component in pipeline.components:
            if component is diet:
                break
            component.process(fresh)
        results = diet.predict_arrays(fresh)
        arrays[f"{name}_p"] = np.stack([r["intent"] for r in results])
        arrays[f"{name}_sent"] = np.stack([r["sentence"] for r in results])
        arrays[f"{name}_emb"] = np.stack([r["text_embed"] for r in results])
        arrays[f"{name}_y"] = np.array([m.intent for m in messages])
    np.savez(path, **arrays)


def auroc(in_scores: np.ndarray, out_scores: np.ndarray) -> float:
    """P(an in-scope message scores higher than an out-of-scope one); higher = more in scope."""
    scores = np.concatenate([in_scores, out_scores])
    ranks = np.empty(len(scores))
    ranks[np.argsort(scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return float((ranks[: len(in_scores)].sum() - len(in_scores) * (len(in_scores) + 1) / 2)
                 / (len(in_scores) * len(out_scores)))


def score(a: dict[str, np.ndarray]) -> None:
    from nlu_engine.classifiers.calibration import InScope, expected_calibration_error
    from nlu_engine.classifiers.held_out import fit_temperature

    intents = list(a["intents"])
    index = {n: i for i, n in enumerate(intents)}
    y_held = np.array([index[n] for n in a["held_y"]])
    y_train = np.array([index[n] for n in a["train_y"]])
    oos = np.isin(a["test_y"], a["out"])
    y_test = np.array([index.get(n, -1) for n in a["test_y"]])
    t = fit_temperature(np.log(np.maximum(a["held_p"], 1e-300)), y_held)
    print(f"temperature {t:.3f}")

    def calibrated(p: np.ndarray) -> np.ndarray:
        z = np.log(np.maximum(p, 1e-300)) / t
        z -= z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)

    p_test = calibrated(a["test_p"])
    pred = p_test.argmax(1)
    correct_in = (pred == y_test)[~oos]
    base_acc = correct_in.mean()
    for label, p in (("raw", a["test_p"]), ("temperature", p_test)):
        ece, worst, _ = expected_calibration_error(p[~oos].max(1), correct_in)
        print(f"in-scope accuracy {100 * base_acc:.2f}  ECE {label}: {ece:.4f} (largest gap {worst:.3f})")
    candidates: dict[str, np.ndarray] = {"msp_raw": a["test_p"].max(1), "msp_T": p_test.max(1)}
    z = np.log(np.maximum(a["test_p"], 1e-300))
    candidates["energy"] = np.log(np.exp(z / t).sum(1))  # up to a constant: -energy
    for vec in ("sent", "emb"):
        model = InScope.fit(a[f"train_{vec}"], y_train, a[f"held_{vec}"])
        candidates[f"maha_{vec}"] = -model.distances(a[f"test_{vec}"])
        for alpha in (0.01, 0.02, 0.05, 0.1):
            model.alpha = alpha
            candidates[f"msp_T*maha_{vec}@{alpha}"] = p_test.max(1) * model.factors(a[f"test_{vec}"])
        tr = a[f"train_{vec}"] / np.linalg.norm(a[f"train_{vec}"], axis=1, keepdims=True)
        te = a[f"test_{vec}"] / np.linalg.norm(a[f"test_{vec}"], axis=1, keepdims=True)
        candidates[f"knn_{vec}"] = (te @ tr.T).max(1)
    print(f"{'candidate':28s} AUROC  recall@-1pt  thr     in-acc  | recall/in-acc at 0.3 0.5 0.7")
    for name, s in candidates.items():
        best = (0.0, None, base_acc)
        for thr in np.unique(np.quantile(s, np.linspace(0, 0.9, 901))):
            kept = s >= thr
            acc = (correct_in & kept[~oos]).mean()
            if acc >= base_acc - 0.01:
                recall = (~kept[oos]).mean()
                if recall > best[0]:
                    best = (recall, thr, acc)
        fixed = "  ".join(f"{(s[oos] < x).mean():.2f}/{100 * (correct_in & (s[~oos] >= x)).mean():.1f}"
                          for x in (0.3, 0.5, 0.7))
        thr_text = f"{best[1]:.3g}" if best[1] is not None else "-"
        print(f"{name:28s} {auroc(s[~oos], s[oos]):.3f}  {best[0]:.3f}        {thr_text:7s} "
              f"{100 * best[2]:.2f}  | {fixed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--load", type=Path)
    parser.add_argument("--fold", type=int, default=1)
    parser.add_argument("--hold-out-intents", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--config", default=str(DIET_CONFIG))
    args = parser.parse_args()
    path = args.load or args.dump
    if args.dump:
        dump(args.dump, args.fold, args.hold_out_intents, args.seed, args.config)
    score(dict(np.load(path)))


if __name__ == "__main__":
    main()
