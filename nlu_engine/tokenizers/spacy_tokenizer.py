"""SpacyTokenizer: tokens, lemmas and part-of-speech tags from the doc SpacyNLP parsed.

Whitespace tokens are skipped. A token's ``text`` is the original text at its span (spaCy may
have seen the lowercased text: see SpacyNLP's ``case_sensitive``), its ``lemma`` is spaCy's
``lemma_`` and ``data["pos"]`` is the fine-grained tag ``tag_`` (``NN``, ``VBZ``: what Rasa
stores and LexicalSyntacticFeaturizer's ``pos`` / ``pos2`` read). Labels are split as by
every tokenizer (``intent_tokenization_flag``), and ``token_pattern`` applies.
"""

from __future__ import annotations

from nlu_engine.contract.component import SPACY_DOC, TOKENS
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message, Token
from nlu_engine.loaders.spacy_nlp import get_doc
from nlu_engine.tokenizers.base import BaseTokenizer

POS_TAG_KEY = "pos"


class SpacyTokenizer(BaseTokenizer):
    """Tokenizes with spaCy (needs SpacyNLP earlier in the pipeline)."""

    provides = (TOKENS,)
    requires = (SPACY_DOC,)

    def tokenize(self, message: Message, attribute: str) -> list[Token]:
        text = message.get(attribute) or ""
        doc = get_doc(message, attribute)
        if doc is None:
            raise ConfigError(
                f"SpacyTokenizer: message {text[:40]!r} has no spaCy doc; put SpacyNLP before "
                "SpacyTokenizer in the pipeline"
            )
        tokens = []
        for t in doc:
            if not t.text.strip():
                continue
            start = t.idx
            end = start + len(t.text)
            tokens.append(
                Token(text[start:end], start, end, lemma=t.lemma_, data={POS_TAG_KEY: t.tag_})
            )
        if not tokens:  # empty or blank text: one token holding it, as WhitespaceTokenizer does
            return [Token(text, 0, len(text))]
        return tokens
