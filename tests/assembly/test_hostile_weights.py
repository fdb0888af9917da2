"""Archives with hostile weights: every array of a trained DIET archive, mutated one at a time.

Each mutant (NaN, infinity, another dtype, a zero or huge dimension, one more column, a missing
array, a truncated file) must load into a one-line ArchiveError naming the file, or parse as
the original does: never a crash, a traceback or a NaN confidence (issue 43, item 3). The
weights would reach NumPy and ONNX Runtime, so they are checked as they are read
(``contract.npz.load_npz``), before anything native runs.
"""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from nlu_engine.assembly.model import Model, train
from nlu_engine.contract.errors import ArchiveError
from nlu_engine.contract.message import Message
from tests.conftest import TINY_TEXTS

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# diet.yml's shape (sparse features into DIET, intents and entities with roles), trained tiny
CONFIG = """language: en
pipeline:
  - name: WhitespaceTokenizer
  - name: CountVectorsFeaturizer
  - name: CountVectorsFeaturizer
    analyzer: char_wb
    min_ngram: 1
    max_ngram: 3
  - name: DIETClassifier
    epochs: 1
    transformer_size: 8
    number_of_transformer_layers: 1
    number_of_attention_heads: 2
    embedding_dimension: 4
    hidden_layers_sizes: {text: [8], label: [8]}
  - name: EntitySynonymMapper
"""

Archive = list[tuple[tarfile.TarInfo, bytes | None]]
Mutation = Callable[[np.ndarray], np.ndarray | None]  # None: the array is dropped


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, tiny_data_path: Path) -> tuple[Path, list[str]]:
    """(a trained archive, the intents it gives TINY_TEXTS)."""
    folder = tmp_path_factory.mktemp("hostile")
    config = folder / "config.yml"
    config.write_text(CONFIG, encoding="utf-8")
    archive = train(config, tiny_data_path, out=folder, fixed_model_name="diet", log=None)
    return archive, [result["intent"]["name"] for result in Model.load(archive).parse_batch(TINY_TEXTS)]


# --- mutations ------------------------------------------------------------------------------------
def _poisoned(value: float) -> Mutation:
    def mutate(array: np.ndarray) -> np.ndarray:
        out = array.copy() if array.dtype.kind == "f" else array.astype(np.float32)
        if out.size == 0:
            return np.full((1, *out.shape[1:]), value, out.dtype)
        out.flat[out.size // 2] = value
        return out
    return mutate


def _other_kind(array: np.ndarray) -> np.ndarray:
    """A float array as integers, an integer array as float64."""
    return array.astype(np.int32) if array.dtype.kind == "f" else array.astype(np.float64)


def _wider(array: np.ndarray) -> np.ndarray:
    """The same numbers in a wider type of the same kind (float16 -> float64, int8 -> int64)."""
    return array.astype(np.float64 if array.dtype.kind == "f" else np.int64)


def _zero_rows(array: np.ndarray) -> np.ndarray:
    return np.zeros((0, *array.shape[1:]), array.dtype)


def _one_more_column(array: np.ndarray) -> np.ndarray:
    if array.ndim == 0:
        return np.zeros(1, array.dtype)
    return np.concatenate([array, np.ones((*array.shape[:-1], 1), array.dtype)], axis=-1)


MUTATIONS: dict[str, Mutation] = {
    "nan": _poisoned(math.nan),
    "inf": _poisoned(math.inf),
    "-inf": _poisoned(-math.inf),
    "other kind": _other_kind,
    "wider": _wider,
    "zero rows": _zero_rows,
    "one more column": _one_more_column,
    "dropped": lambda array: None,
}


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def huge_dimension(data: bytes, name: str) -> bytes:
    """``data`` (an .npz) with the header of ``name`` claiming a billion rows."""
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename == f"{name}.npy":
                array = np.load(io.BytesIO(content))
                head = io.BytesIO()
                np.lib.format.write_array_header_1_0(head, {
                    "descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
                    "shape": (10**9, *array.shape[1:]),
                })
                content = head.getvalue() + array.tobytes()
            target.writestr(info.filename, content)
    return out.getvalue()


def read_archive(path: Path) -> Archive:
    with tarfile.open(path, "r:gz") as tar:
        return [(m, tar.extractfile(m).read() if m.isfile() else None)  # type: ignore[union-attr]
                for m in tar.getmembers()]


def write_archive(members: Archive, target: Path, replace: dict[str, bytes]) -> Path:
    """The archive of ``members`` with the members named in ``replace`` holding its bytes."""
    with tarfile.open(target, "w:gz", compresslevel=1) as tar:
        for info, content in members:
            if info.name in replace:
                content = replace[info.name]
                info = tarfile.TarInfo(info.name)
                info.size = len(content)
            tar.addfile(info, io.BytesIO(content) if content is not None else None)
    return target


def weight_files(members: Archive) -> dict[str, dict[str, np.ndarray]]:
    """Every .npz of the archive: member name -> its arrays."""
    found = {}
    for info, content in members:
        if info.name.endswith(".npz") and content is not None:
            with np.load(io.BytesIO(content), allow_pickle=False) as arrays:
                found[info.name] = {name: arrays[name] for name in arrays.files}
    return found


def mutants(members: Archive, kind: str) -> Iterator[tuple[str, str, dict[str, bytes]]]:
    """(member, what was done, the mutated members' bytes) for every array of every .npz.

    A kind "... (diet.json too)" changes DIET's weights and their shapes in ``diet.json`` alike,
    so the file agrees with its description and only the network can tell."""
    contents = {info.name: content for info, content in members}
    for member, arrays in weight_files(members).items():
        if kind == "truncated":
            data = contents[member]
            assert data is not None
            for size in (len(data) // 2, len(data) - 1, 30):
                yield member, f"truncated to {size} bytes", {member: data[:size]}
            continue
        described = kind.endswith(JSON_TOO)
        if described and not member.endswith("/weights.npz"):
            continue
        for name, array in arrays.items():
            if kind == "huge dimension":
                yield member, f"{name}: 10**9 rows", {member: huge_dimension(npz_bytes(arrays), name)}
                continue
            mutated = MUTATIONS[kind.removesuffix(JSON_TOO)](array)
            changed = {k: v for k, v in arrays.items() if k != name}
            if mutated is not None:
                changed[name] = mutated
            replace = {member: npz_bytes(changed)}
            if described and mutated is not None and not name.endswith(":scale"):
                state_member = member.replace("weights.npz", "diet.json")
                state = json.loads(contents[state_member] or b"")
                state["weight_shapes"][name.removesuffix(":int8")] = list(mutated.shape)
                replace[state_member] = json.dumps(state).encode()
            yield member, f"{name}: {kind}", replace


# --- the outcome of one mutant ----------------------------------------------------------------------
def outcome(path: Path, named: str, original: list[str]) -> str | None:
    """None for a one-line refusal naming ``named`` (the file, or the component), or a parse as
    the original's; else what went wrong."""
    try:
        model = Model.load(path)
    except ArchiveError as error:
        message = str(error)
        if "\n" in message or len(message) > 500 or named not in message or "retrain" not in message:
            return f"refused, but not in one line naming {named} and what to do: {message!r}"
        return None
    except Exception as error:  # the point of the test
        return f"load raised {type(error).__name__}: {error}"
    try:
        results = model.parse_batch(TINY_TEXTS)
    except Exception as error:
        return f"loaded, then parse raised {type(error).__name__}: {error}"
    intents = [r["intent"]["name"] for r in results]
    if intents != original:
        return f"loaded and parsed {intents}, not {original}"
    confidences = [r["intent"]["confidence"] for r in results]
    confidences += [c["confidence"] for r in results for c in r["intent_ranking"]]
    confidences += [v for r in results for entity in r["entities"]
                    for k, v in entity.items() if k.startswith("confidence")]
    if not all(math.isfinite(c) for c in confidences):
        return "loaded and parsed with a non-finite confidence"
    return None


JSON_TOO = " (diet.json too)"
KINDS = [*MUTATIONS, "huge dimension", "truncated", f"zero rows{JSON_TOO}", f"one more column{JSON_TOO}"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_array_mutated_is_refused_in_one_line_or_parses_as_before(
    trained: tuple[Path, list[str]], tmp_path: Path, kind: str
) -> None:
    archive, original = trained
    members = read_archive(archive)
    assert any(name.endswith("weights.npz") for name in weight_files(members))
    failures, count = [], 0
    for member, what, replace in mutants(members, kind):
        count += 1
        path = write_archive(members, tmp_path / f"mutant{count}.tar.gz", replace)
        # the file; the component when its arrays agree with diet.json but not with the network
        named = "DIETClassifier" if kind.endswith(JSON_TOO) else member.rsplit("/", 1)[-1]
        problem = outcome(path, named, original)
        path.unlink()
        if problem:
            failures.append(f"{member} ({what}): {problem}")
    assert count >= 3
    assert not failures, f"{len(failures)} of {count} mutants:\n" + "\n".join(failures)


@pytest.mark.parametrize("kind", ["nan", "one more column"])
def test_a_mutant_through_the_command_line_is_one_line_and_exit_code_1(
    trained: tuple[Path, list[str]], tmp_path: Path, kind: str
) -> None:
    archive, _ = trained
    members = read_archive(archive)
    member = next(name for name in weight_files(members) if name.endswith("/weights.npz"))
    arrays = weight_files(members)[member]
    name = next(n for n in arrays if n.startswith("transformer/"))  # it reaches ONNX Runtime
    arrays[name] = MUTATIONS[kind](arrays[name])  # type: ignore[assignment]
    path = write_archive(members, tmp_path / "mutant.tar.gz", {member: npz_bytes(arrays)})
    result = subprocess.run(
        [sys.executable, "-m", "nlu_engine", "parse", "--model", str(path), "fly from Madrid to Paris"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    folder = member.split("/")[-2]
    assert f"{folder}/weights.npz" in lines[0] and repr(name) in lines[0] and "retrain" in lines[0]
    assert str(path) in lines[0]


def test_the_refusals_say_what_is_wrong(trained: tuple[Path, list[str]], tmp_path: Path) -> None:
    archive, _ = trained
    members = read_archive(archive)
    member = next(name for name in weight_files(members) if name.endswith("/weights.npz"))
    arrays = weight_files(members)[member]
    name = "text_embed/kernel"
    expected = {
        "nan": f"array '{name}' holds NaN or infinite values",
        "other kind": f"array '{name}' is int32, not the float16 or float32 the component stores",
        "one more column": f"array '{name}' has shape {(arrays[name].shape[0], arrays[name].shape[1] + 1)}",
    }
    for kind, fragment in expected.items():
        changed = {**arrays, name: MUTATIONS[kind](arrays[name])}
        path = write_archive(members, tmp_path / "mutant.tar.gz", {member: npz_bytes(changed)})
        with pytest.raises(ArchiveError) as info:
            Model.load(path)
        assert fragment in str(info.value) and "retrain the model or restore its archive" in str(info.value)


def test_an_object_array_is_refused_before_it_is_read(
    trained: tuple[Path, list[str]], tmp_path: Path
) -> None:
    archive, _ = trained
    members = read_archive(archive)
    member = next(name for name in weight_files(members) if name.endswith("/label_features.npz"))
    out = io.BytesIO()
    np.savez(out, label_features=np.array([{"a": 1}], dtype=object))  # pickled
    path = write_archive(members, tmp_path / "mutant.tar.gz", {member: out.getvalue()})
    with pytest.raises(ArchiveError, match=r"array 'label_features' holds 'object' values, not numbers"):
        Model.load(path)


def test_the_diet_json_shapes_are_checked_too(trained: tuple[Path, list[str]], tmp_path: Path) -> None:
    """A ``weight_shapes`` that is not a map of shapes is refused in one line."""
    archive, _ = trained
    members = read_archive(archive)
    member, content = next((i.name, c) for i, c in members if i.name.endswith("/diet.json"))
    state = json.loads(content or b"")
    state["weight_shapes"] = {name: [-1] for name in state["weight_shapes"]}
    path = write_archive(members, tmp_path / "mutant.tar.gz", {member: json.dumps(state).encode()})
    with pytest.raises(ArchiveError, match=r"weight_shapes is not a map of weight names to shapes"):
        Model.load(path)


# --- a parse result never carries NaN ---------------------------------------------------------------
@pytest.mark.parametrize("where", ["intent", "ranking", "entity", "selector"])
def test_a_non_finite_confidence_never_reaches_the_parse_result(where: str) -> None:
    message = Message(text="hi")
    message.intent, message.intent_confidence = "greet", 0.9
    message.intent_ranking = [{"name": "greet", "confidence": 0.9}]
    message.entities = [{"entity": "city", "start": 0, "end": 2, "value": "hi", "confidence_entity": 0.5}]
    assert message.as_parse_result()["intent"]["confidence"] == 0.9
    if where == "intent":
        message.intent_confidence = math.nan
    elif where == "ranking":
        message.intent_ranking[0]["confidence"] = math.inf
    elif where == "entity":
        message.entities[0]["confidence_entity"] = np.float32("nan")
    else:
        message.response_selector = {"default": {"response": {"confidence": -math.inf}, "ranking": []}}
    with pytest.raises(ValueError, match=r"holds (nan|inf|-inf) at .*confidence.*retrain the model"):
        message.as_parse_result()


# --- JSON members: NaN and Infinity are not JSON ------------------------------------------------------
def poisoned_json(content: bytes, constant: str) -> bytes:
    """``content`` (a JSON file) with its first number, or else a new member, set to ``constant``."""
    text = content.decode("utf-8")
    value = json.loads(text)
    if isinstance(value, dict):
        return (json.dumps({**value, "poison": 0.5})[:-1].replace('"poison": 0.5', f'"poison": {constant}')
                + "}").encode()
    return f"[{constant}, {text}]".encode()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_json_member_with_nan_or_infinity_is_refused_in_one_line(
    trained: tuple[Path, list[str]], tmp_path: Path, constant: str
) -> None:
    archive, _ = trained
    members = read_archive(archive)
    names = [info.name for info, content in members if info.name.endswith(".json") and content]
    assert any(name.endswith("manifest.json") for name in names) and len(names) >= 3
    for name in names:
        content = next(c for i, c in members if i.name == name)
        poisoned = {name: poisoned_json(content or b"", constant)}
        path = write_archive(members, tmp_path / "mutant.tar.gz", poisoned)
        with pytest.raises(ArchiveError) as info:
            Model.load(path)
        message = str(info.value)
        assert "\n" not in message and name.removeprefix("./") in message, message
        assert f"holds {constant}, which JSON does not allow" in message and "retrain" in message
