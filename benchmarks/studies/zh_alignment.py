"""How many of a data set's entities a tokenizer's tokens can hold exactly: the ceiling of
exact-span recall for a model that tags whole tokens (DIET, CRFEntityExtractor).

    .venv/bin/python -m benchmarks.studies.zh_alignment training_configs/cais.yml

For JiebaTokenizer without and with ``split_annotated_words`` (trained on the config's train
file), prints the share of the test file's entities whose start and end both fall on token
boundaries. (One token per character holds every entity.)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nlu_engine.contract.message import Message
from nlu_engine.evaluation.benchmarking import read_training_config
from nlu_engine.tokenizers.base import BaseTokenizer
from nlu_engine.tokenizers.jieba import JiebaTokenizer
from nlu_engine.training_data import load_data


def aligned_share(tokenizer: BaseTokenizer, messages: list[Message]) -> tuple[int, int]:
    """(entities held exactly by tokens, entities) over ``messages``."""
    tokenizer.process(messages)
    held = total = 0
    for message in messages:
        starts = {t.start for t in message.tokens["text"]}
        ends = {t.end for t in message.tokens["text"]}
        for entity in message.entities:
            total += 1
            held += entity["start"] in starts and entity["end"] in ends
    return held, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("training_config", type=Path)
    args = parser.parse_args(argv)
    config = read_training_config(args.training_config)
    train_path, test_path = config.paths(config.folds[0])
    train = load_data(train_path)
    print("| tokens | entities held exactly | share |\n|---|---|---|")
    for name, split in (("jieba", False), ("jieba + split_annotated_words", True)):
        tokenizer = JiebaTokenizer(split_annotated_words=split)
        tokenizer.train(train)
        held, total = aligned_share(tokenizer, load_data(test_path).messages)
        print(f"| {name} | {held} / {total} | {100 * held / total:.2f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
