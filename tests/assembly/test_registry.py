"""The registry: training imports the user's custom components; loading imports only allowed ones."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nlu_engine.assembly.config import load_config
from nlu_engine.assembly.registry import (
    COMPONENTS,
    NOT_AVAILABLE,
    allowed_components,
    check_loadable,
    component_class,
    component_class_for_loading,
)
from nlu_engine.contract.component import Component
from nlu_engine.contract.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SENTIMENT = "examples.custom_components.sentiment.SentimentAnalyzer"
CANARY_MODULE = """\
from pathlib import Path

Path(__file__).with_name("canary.txt").write_text("imported")


class Evil:
    pass
"""


@pytest.fixture
def canary_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The working directory holds evilmod.py, which writes canary.txt when imported."""
    (tmp_path / "evilmod.py").write_text(CANARY_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored afterwards
    yield tmp_path
    sys.modules.pop("evilmod", None)


def test_registered_names_resolve_on_both_paths() -> None:
    for name in ("WhitespaceTokenizer", "CountVectorsFeaturizer", "LogisticRegressionClassifier"):
        cls = component_class_for_loading(name, frozenset())
        assert cls is component_class(name)
        assert issubclass(cls, Component) and cls.__name__ == name


def test_a_registered_class_by_its_import_path_needs_no_allowing(monkeypatch: pytest.MonkeyPatch) -> None:
    # a config may name a registered component by its module path; its archives load as before
    monkeypatch.setattr(sys, "path", list(sys.path))
    path_before = list(sys.path)
    name = "nlu_engine.classifiers.fallback.FallbackClassifier"
    assert check_loadable(name, frozenset()) == name
    assert component_class_for_loading(name, frozenset()) is component_class("FallbackClassifier")
    assert sys.path == path_before
    with pytest.raises(ConfigError, match=r"--allow-component nlu_engine\.classifiers\.fallback\.Other"):
        check_loadable("nlu_engine.classifiers.fallback.Other", frozenset())


def test_loading_refuses_a_custom_component_that_is_not_allowed(canary_dir: Path) -> None:
    path_before, modules_before = list(sys.path), set(sys.modules)
    with pytest.raises(ConfigError) as info:
        component_class_for_loading("evilmod.Evil", frozenset({"othermod.Other"}))
    message = str(info.value)
    assert "'evilmod.Evil'" in message and "--allow-component evilmod.Evil" in message
    assert "\n" not in message
    assert sys.path == path_before, "the refusal changed sys.path"
    assert set(sys.modules) == modules_before, "the refusal imported a module"
    assert not (canary_dir / "canary.txt").exists()


def test_check_loadable_decides_without_importing(canary_dir: Path) -> None:
    modules_before = set(sys.modules)
    assert check_loadable("DIETClassifier", frozenset()) == "DIETClassifier"
    assert check_loadable("evilmod.Evil", frozenset({"evilmod.Evil"})) == "evilmod.Evil"
    assert set(sys.modules) == modules_before
    assert not (canary_dir / "canary.txt").exists()


@pytest.mark.parametrize("name", ["evil\nmod.Evil", "Evil\nTokenizer", "x." * 50_000 + "Y"])
def test_a_refusal_stays_one_short_line(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_loadable(name, frozenset())
    assert "\n" not in str(info.value) and len(str(info.value)) < 1_500


@pytest.mark.parametrize("name", ["", None, 42, ["a.B"]])
def test_check_loadable_refuses_non_names(name: object) -> None:
    with pytest.raises(ConfigError, match="non-empty string"):
        check_loadable(name, frozenset())


def test_an_unknown_plain_name_suggests_the_closest() -> None:
    expected = r"unknown component 'DIETClasifier'.*did you mean 'DIETClassifier'"
    with pytest.raises(ConfigError, match=expected):
        component_class_for_loading("DIETClasifier", frozenset())


def test_an_allowed_custom_component_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    cls = component_class_for_loading(SENTIMENT, frozenset({SENTIMENT}))
    assert cls.__name__ == "SentimentAnalyzer" and issubclass(cls, Component)


def test_an_allowed_class_that_is_not_a_component_is_still_refused(canary_dir: Path) -> None:
    # the user allowed it, so it is imported (that is what allowing means), then refused
    with pytest.raises(ConfigError, match=r"not a subclass of nlu_engine\.contract\.component\.Component"):
        component_class_for_loading("evilmod.Evil", frozenset({"evilmod.Evil"}))
    assert (canary_dir / "canary.txt").exists()


def test_training_imports_the_users_own_custom_component(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROJECT_ROOT)
    assert component_class(SENTIMENT).__name__ == "SentimentAnalyzer"


def test_allowed_components_validates_the_names() -> None:
    assert allowed_components(None) == frozenset()
    assert allowed_components([SENTIMENT, "DIETClassifier"]) == frozenset({SENTIMENT})
    fallback = "nlu_engine.classifiers.fallback.FallbackClassifier"
    assert allowed_components([fallback]) == frozenset(), "registered: needs no allowing"
    assert allowed_components(SENTIMENT) == frozenset({SENTIMENT}), "one string is one name"
    assert all(name not in COMPONENTS for name in allowed_components(list(COMPONENTS)))
    for bad in ("NoDots", "my pkg.Thing", "pkg..Thing", ".relative.Thing", "pkg.Thing."):
        with pytest.raises(ConfigError, match=r"write it as my_package\.module\.MyComponent"):
            allowed_components([bad])
    with pytest.raises(ConfigError, match="class path string"):
        allowed_components([42])  # type: ignore[list-item]


# Rasa 3.6's documented NLU components (docs: "Components"), by the section they are listed in
RASA_36_COMPONENTS = [
    "MitieNLP", "SpacyNLP",
    "WhitespaceTokenizer", "JiebaTokenizer", "MitieTokenizer", "SpacyTokenizer",
    "MitieFeaturizer", "SpacyFeaturizer", "ConveRTFeaturizer", "LanguageModelFeaturizer",
    "RegexFeaturizer", "CountVectorsFeaturizer", "LexicalSyntacticFeaturizer",
    "MitieIntentClassifier", "LogisticRegressionClassifier", "SklearnIntentClassifier",
    "KeywordIntentClassifier", "DIETClassifier", "FallbackClassifier",
    "MitieEntityExtractor", "SpacyEntityExtractor", "CRFEntityExtractor", "DucklingEntityExtractor",
    "RegexEntityExtractor", "EntitySynonymMapper",
    "ResponseSelector",
]


@pytest.mark.parametrize("name", RASA_36_COMPONENTS)
def test_every_rasa_component_works_or_names_an_alternative(name: str) -> None:
    if name in COMPONENTS:
        assert component_class(name).component_name() == name
        return
    assert name in NOT_AVAILABLE
    config = {"language": "en", "pipeline": [{"name": "WhitespaceTokenizer"}, {"name": name}]}
    with pytest.raises(ConfigError) as info:
        load_config(config)
    message = str(info.value)
    assert "\n" not in message and f"{name} is not available" in message
    named = [other for other in COMPONENTS if re.search(rf"\b{other}\b", message)]
    assert named, f"the message for {name} names no available component: {message}"


def test_the_table_of_missing_components_names_only_available_ones() -> None:
    assert not set(NOT_AVAILABLE) & set(COMPONENTS)
    for name, advice in NOT_AVAILABLE.items():
        assert any(re.search(rf"\b{other}\b", advice) for other in COMPONENTS), name


def test_the_cli_reports_a_missing_component_in_one_line(
    tmp_path: Path, tiny_data_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nlu_engine.cli.main import main

    config = tmp_path / "config.yml"
    config.write_text("language: en\npipeline:\n- name: MitieTokenizer\n- name: DIETClassifier\n")
    assert main(["train", "--config", str(config), "--data", str(tiny_data_path),
                 "--out", str(tmp_path / "models")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert str(config) in err and "MitieTokenizer is not available" in err and "WhitespaceTokenizer" in err
    assert not (tmp_path / "models").exists()
