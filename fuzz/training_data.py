"""Fuzz targets ``yaml_data``, ``markdown_data`` and ``json_data``: a file of Rasa YAML, Markdown
or JSON training data, as ``load_file`` reads it. The data read is written back in its own family
(YAML for YAML and Markdown, JSON for JSON) and must read back the same."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fuzz.harness import ROOT, assert_one_line, dataset_files, slices
from nlu_engine.contract.errors import NLUError
from nlu_engine.contract.training_data import TrainingData
from nlu_engine.training_data.loading import load_file
from nlu_engine.training_data.rasa_json import dump_rasa_json, parse_rasa_json
from nlu_engine.training_data.rasa_markdown import parse_rasa_markdown
from nlu_engine.training_data.rasa_yaml import dump_rasa_yaml, parse_rasa_yaml

FOLDER = Path(tempfile.mkdtemp(prefix="fuzz-training-data-"))
atexit.register(shutil.rmtree, FOLDER, True)


def _pieces(data: TrainingData, size: int = 12) -> list[TrainingData]:
    """``data`` in small pieces (seeds stay small); the first keeps the synonyms, regexes, lookups."""
    pieces = [TrainingData(messages=data.messages[i:i + size]) for i in range(0, len(data.messages), size)]
    if pieces:
        pieces[0].synonyms, pieces[0].regex_features = data.synonyms, data.regex_features
        pieces[0].lookup_tables, pieces[0].responses = data.lookup_tables, data.responses
    return pieces[:8]


def seeds(extension: str) -> Iterable[bytes]:
    """Pieces of data/, the examples' data and the shared data sets, in the target's format."""
    files = [ROOT / "data" / "nlu.yml", *sorted(ROOT.glob("examples/*/data/nlu.yml"))]
    datas = [load_file(path) for path in files]
    markdown = [piece for path in dataset_files("**/*.md") if path.name != "README.md"
                for piece in slices(path.read_text(encoding="utf-8"), count=2)]
    datas += [parse_rasa_markdown(text, "seed.md") for text in markdown]
    for piece in (piece for data in datas if data is not None for piece in _pieces(data)):
        if extension == ".json":
            yield dump_rasa_json(piece).encode()
        else:
            yield dump_rasa_yaml(piece).encode()
    if extension == ".md":
        yield from (text.encode() for text in markdown)


def same(data: TrainingData) -> tuple:
    """What a write and a read must keep (synonyms mapping a word to itself are not written)."""
    return (sorted((m.text, m.intent or "", m.intent_response_key or "",
                    sorted(sorted((k, str(v)) for k, v in e.items()) for e in m.entities))
                   for m in data.messages),
            {k: v for k, v in data.synonyms.items() if k != v},
            sorted((r["name"], r["pattern"]) for r in data.regex_features))


def test_one_input(raw: bytes, extension: str) -> None:
    path = FOLDER / f"data{extension}"
    path.write_bytes(raw)
    try:
        data = load_file(path)
    except NLUError as error:
        assert_one_line(str(error), str(path))
        return
    assert data is not None
    try:
        written = dump_rasa_json(data) if extension == ".json" else dump_rasa_yaml(data)
    except NLUError as error:  # what the format cannot carry is refused in one line
        assert_one_line(str(error), "")
        return
    reader = parse_rasa_json if extension == ".json" else parse_rasa_yaml
    again = reader(written, "again")
    assert again is not None and same(again) == same(data), (same(data), same(again))
