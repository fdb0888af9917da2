"""A strong linear baseline on a benchmark's splits, scored as `nlu-engine benchmark` scores.

    .venv/bin/python -m benchmarks.studies.baseline training_configs/snips.yml
    .venv/bin/python -m benchmarks.studies.baseline training_configs/nlu_eval.yml [--fold 1 --fold 2 ...]
    .venv/bin/python -m benchmarks.studies.baseline training_configs/cais.yml --characters

Intents: TF-IDF of word 1-2-grams and character 1-5-grams (within words) -> LinearSVC.
Entities: a CRF (CRFsuite through sklearn-crfsuite, L-BFGS with L1 and L2) over BIO tags of
the WhitespaceTokenizer's tokens (BIO rather than BILOU: half the tags, a quarter of the
transition work), with the usual lexical features of the token and its neighbours (lower case,
prefixes and suffixes, shape, digits), as Rasa's CRFEntityExtractor, without a language model.
``--characters`` (for unspaced text: Chinese) tags every character that is not whitespace as
its own token instead; the intents' character n-grams then run across the whole unspaced text.

The training config gives the train and test files and the folds (its pipeline is not used).
Predictions are written in the parse-result form and scored by `nlu_engine.evaluation.evaluate`
and `benchmarking.headline_scores`, exactly as `nlu-engine benchmark` scores a trained model, so
the rows compare with its rows. One row per fold (markdown), then the mean and standard
deviation over folds; `--out` also writes them as JSON.

Needs scikit-learn (installed with the package) and sklearn-crfsuite: `pip install -e ".[bench]"`
(`make install` installs it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from nlu_engine.contract.message import Message, Token
from nlu_engine.evaluation import evaluate
from nlu_engine.evaluation.benchmarking import headline_scores, read_training_config
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from nlu_engine.training_data import bilou, load_data

EXTRACTOR = "CRFsuite"
SCORES = ("intent_accuracy", "intent_macro_f1", "entity_exact_f1", "entity_overlap_f1")


# --- intents ---------------------------------------------------------------------------------------
def train_intents(texts: list[str], labels: list[str]) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline, make_union
    from sklearn.svm import LinearSVC

    features = make_union(
        TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True, lowercase=True),
        TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 5), sublinear_tf=True, lowercase=True),
    )
    model = make_pipeline(features, LinearSVC(C=1.0))
    model.fit(texts, labels)
    return model


# --- entities --------------------------------------------------------------------------------------
def _shape(word: str) -> str:
    kinds = ("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in word)
    return "".join(kinds)[:6]


def token_features(tokens: list[Token], i: int) -> dict[str, Any]:
    word = tokens[i].text
    features: dict[str, Any] = {
        "bias": 1.0, "low": word.lower(), "prefix2": word[:2], "prefix5": word[:5], "suffix2": word[-2:],
        "suffix3": word[-3:], "suffix5": word[-5:], "shape": _shape(word), "digit": word.isdigit(),
        "title": word.istitle(), "upper": word.isupper(), "length": min(len(word), 10),
    }
    for offset in (-2, -1, 1, 2):
        j = i + offset
        if 0 <= j < len(tokens):
            other = tokens[j].text
            features.update({f"{offset}:low": other.lower(), f"{offset}:suffix3": other[-3:],
                             f"{offset}:title": other.istitle(), f"{offset}:digit": other.isdigit()})
        else:
            features[f"{offset}:edge"] = True
    return features


def sentence_features(message: Message) -> list[dict[str, Any]]:
    tokens = message.tokens.get("text", [])
    return [token_features(tokens, i) for i in range(len(tokens))]


def train_entities(messages: list[Message]) -> Any:
    import sklearn_crfsuite

    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100)
    examples = [m for m in messages if m.tokens.get("text")]
    crf.fit([sentence_features(m) for m in examples],
            [bio(bilou.entity_tags(m.tokens["text"], m.entities, "entity", True)) for m in examples])
    return crf


def bio(tags: list[str]) -> list[str]:
    """BILOU tags as BIO: U- -> B-, L- -> I-."""
    return [{"U": "B", "L": "I"}.get(t[0], t[0]) + t[1:] if t != "O" else t for t in tags]


def bilou_of(tags: list[str]) -> list[str]:
    """BIO tags as BILOU: a B- or I- that no I- of its type follows ends its entity."""
    out = []
    for i, tag in enumerate(tags):
        if tag == "O":
            out.append(tag)
            continue
        continues = i + 1 < len(tags) and tags[i + 1] == "I" + tag[1:]
        first = tag[0] == "B" or i == 0 or tags[i - 1][2:] != tag[2:]
        out.append(("B" if continues else "U") + tag[1:] if first else ("I" if continues else "L") + tag[1:])
    return out


def predict_entities(crf: Any, message: Message) -> list[dict[str, Any]]:
    tokens = message.tokens.get("text", [])
    if not tokens:
        return []
    tags = bilou_of(list(crf.predict_single(sentence_features(message))))
    return bilou.spans_to_entities(message.text, tokens, tags, None, extractor=EXTRACTOR, bilou=True)


# --- one fold --------------------------------------------------------------------------------------
class CharacterTokenizer(WhitespaceTokenizer):
    """Every character that is not whitespace is a token (the CRF baseline for Chinese)."""

    def tokenize(self, message: Message, attribute: str) -> list[Token]:
        text = message.get(attribute) or ""
        tokens = [Token(c, i, i + 1) for i, c in enumerate(text) if not c.isspace()]
        return tokens or [Token(text, 0, len(text))]


def run_fold(train_path: Path, test_path: Path, characters: bool = False) -> dict[str, Any]:
    tokenizer = CharacterTokenizer() if characters else WhitespaceTokenizer()
    train, test = load_data(train_path), load_data(test_path)
    start = time.perf_counter()
    examples = [m for m in train.messages if m.intent]
    tokenizer.process(examples)
    intents = train_intents([m.text for m in examples], [str(m.intent) for m in examples])
    crf = train_entities(examples) if train.entity_types else None
    train_seconds = time.perf_counter() - start

    messages = [Message(text=m.text) for m in test.messages]
    tokenizer.process(messages)
    start = time.perf_counter()
    names = intents.predict([m.text for m in messages])
    results = []
    for message, name in zip(messages, names, strict=True):
        result = message.as_parse_result()
        result["intent"] = {"name": str(name), "confidence": 1.0}
        result["intent_ranking"] = [dict(result["intent"])]
        result["entities"] = predict_entities(crf, message) if crf is not None else []
        results.append(result)
    parse_ms = (time.perf_counter() - start) * 1000 / max(len(messages), 1)
    scores = headline_scores(evaluate(test.messages, results).summary())
    return {"train_examples": len(examples), "test_examples": len(messages),
            "train_s": round(train_seconds, 1), "batched_ms_per_message": round(parse_ms, 3),
            **{k: round(v, 4) for k, v in scores.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("training_config", type=Path)
    parser.add_argument("--fold", action="append", help="only these folds (repeatable)")
    parser.add_argument("--out", type=Path, help="also write the rows and summary as JSON here")
    parser.add_argument("--characters", action="store_true",
                        help="entities: one token per character (unspaced text, e.g. Chinese)")
    args = parser.parse_args(argv)
    config = read_training_config(args.training_config)
    folds = [f for f in config.folds if args.fold is None or str(f) in args.fold]
    rows = []
    print("| data set | fold | train s | intent acc | intent macro F1 | entity exact F1 "
          "| entity overlap F1 |\n|---|---|---|---|---|---|---|")
    for fold in folds:
        row = {"benchmark": config.name, "fold": fold, **run_fold(*config.paths(fold), args.characters)}
        rows.append(row)
        cells = [f"{100 * row[k]:.2f}" if k in row else "" for k in SCORES]
        print(f"| {config.name} | {fold} | {row['train_s']} | " + " | ".join(cells) + " |", flush=True)
    summary = {k: {"mean": round(statistics.mean(v), 4), "std": round(statistics.pstdev(v), 4)}
               for k in SCORES if (v := [r[k] for r in rows if k in r])}
    if len(rows) > 1:
        print("mean ± std: " + ", ".join(
            f"{k} {100 * s['mean']:.2f} ± {100 * s['std']:.2f}" for k, s in summary.items()))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"baseline-{config.name}.json"
        path.write_text(json.dumps({"config": str(args.training_config), "rows": rows, "summary": summary},
                                   indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
