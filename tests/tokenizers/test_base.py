"""Every tokenizer on text that breaks tokenizers (tests/hostile_texts.py): no crash, and each
token's offsets index the text exactly."""

from __future__ import annotations

import pytest

from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.tokenizers.base import BaseTokenizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from tests.extras import requires_extra
from tests.hostile_texts import HOSTILE_TEXTS
from tests.spacy_models import needs_sm


def assert_exact_tokens(tokenizer: BaseTokenizer, before: list | None = None) -> None:
    messages = [Message(text) for text in HOSTILE_TEXTS]
    for step in before or []:
        step.process(messages)
    tokenizer.process(messages)
    for message in messages:
        tokens = message.tokens["text"]
        assert tokens, repr(message.text)
        for token in tokens:
            assert message.text[token.start:token.end] == token.text, (message.text, token)
        assert [t.start for t in tokens] == sorted(t.start for t in tokens)


def test_whitespace_tokenizer() -> None:
    assert_exact_tokens(WhitespaceTokenizer())


@requires_extra("zh")
def test_jieba_tokenizer() -> None:
    from nlu_engine.tokenizers.jieba import JiebaTokenizer

    tokenizer = JiebaTokenizer()
    tokenizer.train(TrainingData([]))
    assert_exact_tokens(tokenizer)


@requires_extra("spacy")
@needs_sm
def test_spacy_tokenizer() -> None:
    # a lone surrogate (a str that is not UTF-8) crashed SpacyNLP: spaCy encodes to UTF-8
    from nlu_engine.loaders.spacy_nlp import SpacyNLP
    from nlu_engine.tokenizers.spacy_tokenizer import SpacyTokenizer

    assert_exact_tokens(SpacyTokenizer(), before=[SpacyNLP(model="en_core_web_sm")])


@pytest.mark.parametrize("case_sensitive", [True, False])
@requires_extra("spacy")
@needs_sm
def test_spacy_nlp_reads_a_lone_surrogate_as_one_replacement_character(case_sensitive: bool) -> None:
    from nlu_engine.loaders.spacy_nlp import SpacyNLP, get_doc

    message = Message("Berlin\ud800 is big")
    SpacyNLP(model="en_core_web_sm", case_sensitive=case_sensitive).process([message])
    doc = get_doc(message, "text")
    assert len(doc.text) == len(message.text) and doc.text[6] == "\ufffd"
