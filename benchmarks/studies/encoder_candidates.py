"""What a candidate sentence encoder adds to the intent combination (issue 48, item 2).

    pip install --no-deps 'wordllama==0.4.0.post1' 'toml>=0.10,<0.11'   # the candidate, not a dependency
    .venv/bin/python -m benchmarks.studies.encoder_candidates \\
        --train ../shared/datasets/fewshot/NLU-Eval-KFold_1-10shot.md \\
        --test ../shared/datasets/NLU-Evaluation-Data/KFold_1/test.md

The training and test messages go through `diet.yml`'s two English encoders (the Universal
Sentence Encoder, "use", and all-MiniLM-L6-v2, "minilm"); the candidate's vector is added beside
them as a third dense sentence feature. For each set of members, an ``IntentCombiner`` with
sentence heads only (no n-gram head, no DIET) is trained as the default trains it (cross-fitted
heads, weights fitted on the held-out predictions, calibrated once) and scored on the test split:
intent accuracy, ECE and the members' weights. It also times the candidate on one message.

The candidate: WordLlama (PyPI `wordllama`, MIT; its `l2_supercat` 256-d token embeddings,
averaged, ship in the wheel). Its loader looks for the tokenizer in a `tokenizer/` folder while
the wheel ships `tokenizers/`, and would then download it; pointing its cache at the package's
own folder finds the shipped file, with downloads disabled.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.classifiers.calibration import expected_calibration_error
from nlu_engine.classifiers.combiner import IntentCombiner
from nlu_engine.contract.message import Features, Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data import load_data

ENCODERS = {"language": "en", "pipeline": [
    {"name": "WhitespaceTokenizer"},
    {"name": "UniversalSentenceEncoderFeaturizer", "alias": "use"},
    {"name": "LanguageModelFeaturizer", "model_name": "bert",
     "model_weights": "sentence-transformers/all-MiniLM-L6-v2", "alias": "minilm"},
]}
MEMBER_SETS = (["use"], ["minilm"], ["wordllama"], ["use", "minilm"],
               ["use", "minilm", "wordllama"], ["use", "wordllama"])


def wordllama_encoder():
    """The candidate's ``embed`` (texts -> [B, 256]), from the files its wheel ships."""
    import wordllama
    from wordllama import WordLlama

    model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
    return model.embed


def featurized(pipeline: Pipeline, messages: list[Message], embed) -> list[Message]:
    """Copies of ``messages`` through the encoders, with the candidate's vector (scaled, as
    the Universal Sentence Encoder's, to unit variance per column) and the intent kept."""
    out = pipeline.process([Message(text=m.text) for m in messages])
    vectors = np.asarray(embed([m.text for m in out]), np.float32)
    for message, source, vector in zip(out, messages, vectors, strict=True):
        message.intent = source.intent
        scaled = vector * np.sqrt(len(vector)) / max(float(np.linalg.norm(vector)), 1e-12)
        message.features.append(Features(attribute="text", kind="sentence", origin="wordllama",
                                         matrix=scaled[None, :]))
    return out


def score(members: list[str], train: list[Message], test: list[Message]) -> dict:
    combiner = IntentCombiner(IntentCombiner.Config(featurizers=members, sparse_head_below=0,
                                                    recorded_scorers=False))
    combiner.train(TrainingData(messages=train))
    gold = [m.intent for m in test]
    parsed = combiner_parse(combiner, test)
    correct = np.array([m.intent == g for m, g in zip(parsed, gold, strict=True)])
    confidences = np.array([m.intent_confidence for m in parsed])
    return {"accuracy": round(100 * float(correct.mean()), 2),
            "ece": round(float(expected_calibration_error(confidences, correct)[0]), 3),
            "weights": {m.name: round(m.weight, 2) for m in combiner.members_}}


def combiner_parse(combiner: IntentCombiner, test: list[Message]) -> list[Message]:
    """The test messages as the combiner ranks them (copies: the gold intents stay)."""
    copies = []
    for message in test:
        copy = Message(text=message.text)
        copy.tokens, copy.features = message.tokens, message.features
        copies.append(copy)
    combiner.process(copies)
    return copies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    args = parser.parse_args(argv)
    embed = wordllama_encoder()
    pipeline = Pipeline.build(load_config(ENCODERS))
    train_data = load_data(args.train)
    pipeline.train(train_data, log=None)
    train = featurized(pipeline, [m for m in train_data.messages if m.intent], embed)
    test = featurized(pipeline, [m for m in load_data(args.test).messages if m.intent], embed)
    texts = [m.text for m in test[:300]]
    start = time.perf_counter()
    for text in texts:
        embed([text])
    one_ms = (time.perf_counter() - start) * 1000 / max(len(texts), 1)
    rows = {"+".join(members): score(members, train, test) for members in MEMBER_SETS}
    for name, row in rows.items():
        print(f"{name:24s} accuracy {row['accuracy']:6.2f}  ECE {row['ece']:.3f}  weights {row['weights']}")
    print(f"wordllama, one message: {one_ms:.3f} ms")
    print(json.dumps({"train": args.train, "test": args.test, "rows": rows,
                      "wordllama_ms": round(one_ms, 3)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
