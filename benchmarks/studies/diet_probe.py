"""Why DIET, given the Universal Sentence Encoder's vector, learns less than a linear probe on
that vector alone (issue 48, item 4).

    nice -n 5 .venv/bin/python -m benchmarks.studies.diet_probe \
        --data ../shared/datasets/NLU-Evaluation-Data/KFold_1/train.md \
        --test ../shared/datasets/NLU-Evaluation-Data/KFold_1/test.md \
        --variant "no dropout: drop_rate=0" --variant "lr x10: learning_rate=0.01"

The messages are tokenized (WhitespaceTokenizer) and featurized once per run: the Universal
Sentence Encoder's sentence vector (alias ``use``) and, because DIET refuses messages without
token features, a LexicalSyntacticFeaturizer reduced to the begin / end-of-message flags (alias
``tokens``; ``TOKEN_FEATURES``). Without a transformer and without entities DIET reads the
sentence position alone (``model.DIETNetwork.sentence_only``), so those token features reach no
loss and the USE vector is DIET's only input; with transformer layers the sentence position
attends to tokens that carry nothing but those two flags.

Each variant then trains a DIETClassifier for the intents only (``entity_recognition: false``,
``sentence_head_below: 0`` so that the network itself ranks the intents,
``number_of_transformer_layers: 0`` unless a variant sets it) on those featurized messages, with
``--set`` overrides for every variant and the variant's own after them (``key=value``, the value
read as YAML: ``hidden_layers_sizes={text: [], label: []}``), and is scored by intent accuracy on
the test split. Beside it, the probe: the shipped sentence head's logistic regression
(``classifiers/sentence_head.SentenceHead.fit``, C 10) on the same vectors, fitted on every
training example. Prints a table and the JSON (``--out`` writes it too).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks.common import emit_json

#: the token features DIET requires, reduced to two flags per token (see the module doc)
TOKEN_FEATURES = [[], ["BOS", "EOS"], []]
#: what every variant's DIET starts from: the intents only, ranked by the network itself
BASE = {"entity_recognition": False, "sentence_head_below": 0, "number_of_transformer_layers": 0,
        "featurizers": ["tokens", "use"], "show_progress": False}


def parse_assignments(text: str, where: str) -> dict[str, Any]:
    """``key=value;key=value`` -> {key: value read as YAML}; a one-line message when malformed."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"error: {where}: '{part}' is not key=value")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise SystemExit(f"error: {where}: the value of '{key.strip()}' is not valid YAML") from None
    return out


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``"label: key=value;key=value"`` -> (label, overrides); no colon: the text is both."""
    label, sep, rest = text.partition(":")
    if not sep or "=" in label:
        return text.strip(), parse_assignments(text, f"--variant '{text}'")
    return label.strip(), parse_assignments(rest, f"--variant '{text}'")


def pipeline_config(diet: dict[str, Any]) -> dict[str, Any]:
    return {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": "LexicalSyntacticFeaturizer", "alias": "tokens", "features": TOKEN_FEATURES},
        {"name": "UniversalSentenceEncoderFeaturizer", "alias": "use"},
        {"name": "DIETClassifier", **diet},
    ]}


def build(diet: dict[str, Any]) -> list[Any]:
    """The pipeline's components (validated by the package's config reader)."""
    from nlu_engine.assembly.config import load_config
    from nlu_engine.assembly.pipeline import Pipeline

    return Pipeline.build(load_config(pipeline_config(diet))).components


def featurize(train_path: str, test_path: str) -> tuple[Any, list[Any], float]:
    """(the featurized training data, the featurized test messages, seconds): the tokenizer
    and the two featurizers trained on the training data and run over both."""
    from nlu_engine.assembly.pipeline import annotate_training_data, fresh_copies
    from nlu_engine.training_data import load_data

    start = time.perf_counter()
    data = fresh_copies(load_data(train_path))
    test = fresh_copies(load_data(test_path)).messages
    golds = [m.intent for m in test]
    for component in build(BASE)[:-1]:
        component.train(data)
        annotate_training_data(component, data.messages, None)
        component.process(test)
    for message, gold in zip(test, golds, strict=True):
        message.extra["gold_intent"] = gold
    return data, test, time.perf_counter() - start


def copies(messages: list[Any]) -> list[Any]:
    """The messages with their tokens and features shared, their outputs their own."""
    return [dataclasses.replace(m, entities=[dict(e) for e in m.entities], intent_ranking=[],
                                tokens=dict(m.tokens), features=list(m.features), extra=dict(m.extra))
            for m in messages]


def accuracy(messages: list[Any]) -> float:
    return float(np.mean([m.intent == m.extra["gold_intent"] for m in messages]))


def probe(data: Any, test: list[Any]) -> dict[str, float]:
    """The sentence head's logistic regression on the USE vectors: test accuracy and seconds."""
    from nlu_engine.classifiers.sentence_head import SentenceHead, sentence_vectors

    names = sorted({m.intent for m in data.messages if m.intent})
    index = {name: i for i, name in enumerate(names)}
    start = time.perf_counter()
    head = SentenceHead.fit(sentence_vectors(data.messages, ["use"]),
                            np.array([index[m.intent] for m in data.messages]), len(names))
    seconds = time.perf_counter() - start
    predicted = head.predict_proba(sentence_vectors(test, ["use"])).argmax(axis=1)
    hits = [names[p] == m.extra["gold_intent"] for p, m in zip(predicted, test, strict=True)]
    return {"accuracy": float(np.mean(hits)), "train_seconds": seconds}


def run_variant(data: Any, test: list[Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """DIET trained with ``BASE`` and ``overrides`` on ``data``: test accuracy and seconds."""
    diet = build({**BASE, **overrides})[-1]
    start = time.perf_counter()
    diet.train(data.with_messages(copies(data.messages)))
    seconds = time.perf_counter() - start
    parsed = copies(test)
    for message in parsed:
        message.intent = None
    diet.process(parsed)
    history = (getattr(diet, "history_", None) or {}).get("epochs") or []
    # two variants with the same accuracy: whether they also predicted the same intents
    predictions = hashlib.sha1("\n".join(str(m.intent) for m in parsed).encode()).hexdigest()[:12]
    return {"accuracy": accuracy(parsed), "train_seconds": seconds, "epochs": len(history),
            "last_epoch": history[-1] if history else None, "predictions_sha1": predictions}


def machine() -> dict[str, Any]:
    """The CPU (model and vector extensions, as every benchmark names it), cores, Python."""
    from nlu_engine.evaluation.benchmarking import cpu_model

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version()}


def table(rows: list[dict[str, Any]], probe_accuracy: float) -> str:
    lines = ["| setting | DIET intent acc | probe acc | DIET train s |", "|---|---|---|---|"]
    lines += [f"| {r['label']} | {100 * r['accuracy']:.2f} | {100 * probe_accuracy:.2f} | "
              f"{r['train_seconds']:.0f} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the training file")
    parser.add_argument("--test", required=True, help="the test file")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a DIETClassifier setting for every variant (repeatable)")
    parser.add_argument("--variant", action="append", default=[], metavar="'LABEL: K=V;K=V'",
                        help="one DIET run with these settings on top (repeatable; default: one run "
                             "with the --set settings alone)")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    for path in (args.data, args.test):
        if not Path(path).is_file():
            raise SystemExit(f"error: {path}: no such file")
    common = parse_assignments(";".join(args.set), "--set")
    variants = [parse_variant(v) for v in args.variant] or [("defaults", {})]
    from nlu_engine.contract.errors import ConfigError

    for label, overrides in variants:  # a bad setting fails before anything trains
        try:
            build({**BASE, **common, **overrides})
        except ConfigError as error:
            raise SystemExit(f"error: variant '{label}': {error}") from None
    data, test, featurize_seconds = featurize(args.data, args.test)
    probed = probe(data, test)
    print(f"probe (logistic regression, C 10): {100 * probed['accuracy']:.2f}", file=sys.stderr, flush=True)
    rows = []
    for label, overrides in variants:
        row = {"label": label, "settings": {**common, **overrides},
               **run_variant(data, test, {**common, **overrides})}
        rows.append(row)
        print(f"{label}: {100 * row['accuracy']:.2f} in {row['train_seconds']:.0f} s", file=sys.stderr,
              flush=True)
    print(table(rows, probed["accuracy"]))
    emit_json({"data": args.data, "test": args.test, "train_examples": len(data.messages),
               "test_examples": len(test), "featurize_seconds": featurize_seconds, "probe": probed,
               "base": BASE, "token_features": TOKEN_FEATURES, "variants": rows, "machine": machine(),
               "date": time.strftime("%Y-%m-%d %H:%M")}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
