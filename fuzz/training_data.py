"""Fuzz target ``training_data``: a file of Rasa YAML, Markdown or JSON training data, as
``load_file`` reads it (the first byte picks the extension). The data read is written back in
its own family (YAML for YAML and Markdown, JSON for JSON) and must read back the same."""

from __future__ import annotations

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

EXTENSIONS = (".yml", ".md", ".json")
FOLDER = Path(tempfile.mkdtemp(prefix="fuzz-training-data-"))


def seeds() -> Iterable[bytes]:
    yaml_texts = [p.read_text(encoding="utf-8") for p in [ROOT / "data" / "nlu.yml",
                                                          *sorted(ROOT.glob("examples/*/data/nlu.yml"))]]
    markdown = [piece for path in dataset_files("**/*.md") if path.name != "README.md"
                for piece in slices(path.read_text(encoding="utf-8"), count=2)]
    for text in [piece for text in yaml_texts for piece in slices(text)]:
        yield b"\x00" + text.encode()
    for text in markdown:
        yield b"\x01" + text.encode()
        data = parse_rasa_markdown(text, "seed.md")
        yield b"\x00" + dump_rasa_yaml(data).encode()
        yield b"\x02" + dump_rasa_json(data).encode()


def same(data: TrainingData) -> tuple:
    """What a write and a read must keep (synonyms mapping a word to itself are not written)."""
    return (sorted((m.text, m.intent or "", m.intent_response_key or "",
                    sorted(sorted((k, str(v)) for k, v in e.items()) for e in m.entities))
                   for m in data.messages),
            {k: v for k, v in data.synonyms.items() if k != v},
            sorted((r["name"], r["pattern"]) for r in data.regex_features))


def test_one_input(raw: bytes) -> None:
    if not raw:
        return
    extension = EXTENSIONS[raw[0] % len(EXTENSIONS)]
    path = FOLDER / f"data{extension}"
    path.write_bytes(raw[1:])
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
    again = parse_rasa_json(written, "again.json") if extension == ".json" else parse_rasa_yaml(written, "again.yml")
    assert again is not None and same(again) == same(data), (same(data), same(again))
