"""The example Rasa projects train as they are: the project `rasa init` writes and the travel
assistant (three formats, lookup files, synonyms over several files, three retrieval intents).

Each is trained through the CLI from its own folder, as a Rasa user runs it, with two epochs.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from nlu_engine.assembly.model import Model
from nlu_engine.cli.main import main
from nlu_engine.contract.message import Message

ROOT = Path(__file__).resolve().parents[2]
RASA_INIT = ROOT / "examples" / "rasa_init"
TRAVEL = ROOT / "examples" / "travel_assistant"
TINY = ["--set", "DIETClassifier.epochs=2", "--set", "DIETClassifier.run_eagerly=true"]
TINY_SELECTORS = ["--set", "ResponseSelector.epochs=2", "--set", "ResponseSelector.run_eagerly=true"]


def cli(project: Path, *args: str) -> tuple[int, str, str]:
    """``nlu-engine ARGS`` run from the project folder (lookup files and domain.yml are found from
    there, as in Rasa): exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        patch.chdir(project)
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def dialogue_counts(project: Path) -> Counter[str]:
    """What the notice should count: stories and rules in data/, and the domain's dialogue parts."""
    counts: Counter[str] = Counter()
    for path in (project / "data").rglob("*.yml"):
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for key in ("stories", "rules"):
            counts[key] += len(document.get(key) or [])
    domain = yaml.safe_load((project / "domain.yml").read_text(encoding="utf-8"))
    for key in ("slots", "forms", "actions"):
        counts[key] += len(domain.get(key) or [])
    counts["responses"] += sum("/" not in name for name in domain.get("responses") or {})
    return +counts


def notice_counts(stderr: str) -> Counter[str]:
    [line] = [line for line in stderr.splitlines() if "skipped what is not NLU" in line]
    listed = line.split("skipped what is not NLU: ", 1)[1].split(" (in ", 1)[0]
    counts: Counter[str] = Counter()
    for part in listed.split(", "):
        number, kind = part.split(" ", 1)
        counts[{"story": "stories"}.get(kind, kind if kind.endswith("s") else kind + "s")] = int(number)
    return counts


def test_the_rasa_init_project_trains_as_it_is(tmp_path: Path) -> None:
    code, _, err = cli(RASA_INIT, "train", "--config", "config.yml", "--data", "data", "--out",
                       str(tmp_path), "--fixed-model-name", "init", *TINY)
    assert code == 0, err
    assert "notice: using domain.yml from the working folder" in err
    assert notice_counts(err) == dialogue_counts(RASA_INIT)
    assert "Traceback" not in err and "warning" not in err
    model = Model.load(tmp_path / "init.tar.gz")
    domain = yaml.safe_load((RASA_INIT / "domain.yml").read_text(encoding="utf-8"))
    assert model.parse("hello there")["intent"]["name"] in domain["intents"]
    assert model.parse("/mood_great")["intent"] == {"name": "mood_great", "confidence": 1.0}
    code, out, err = cli(RASA_INIT, "data", "validate", "--data", "data")
    assert code == 0 and "no warnings" in out, out + err


@pytest.fixture(scope="module")
def travel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("travel")
    code, _, err = cli(TRAVEL, "train", "--config", "config.yml", "--data", "data", "--domain",
                       "domain.yml", "--out", str(out), "--fixed-model-name", "travel",
                       *TINY, *TINY_SELECTORS)
    assert code == 0, err
    return out / "travel.tar.gz", err


def test_the_travel_project_trains_and_counts_what_it_skipped(travel: tuple[Path, str]) -> None:
    archive, err = travel
    assert notice_counts(err) == dialogue_counts(TRAVEL)
    assert "Traceback" not in err and "warning" not in err, err
    model = Model.load(archive)
    result = model.parse("can I bring my dog on the plane?")
    selector = result["response_selector"]
    assert sorted(selector["all_retrieval_intents"]) == ["chitchat", "faq", "policy"]
    assert set(selector) == {"all_retrieval_intents", "faq", "chitchat", "policy"}
    domain = yaml.safe_load((TRAVEL / "domain.yml").read_text(encoding="utf-8"))
    faq = selector["faq"]["response"]
    assert faq["responses"] == domain["responses"][faq["utter_action"]]  # responses from domain.yml
    chitchat = selector["chitchat"]["response"]
    in_data = yaml.safe_load((TRAVEL / "data" / "nlu" / "chitchat_responses.yml").read_text())
    assert chitchat["responses"] == in_data["responses"][chitchat["utter_action"]]  # from a data file


def test_the_travel_projects_lookups_and_synonyms_come_from_every_file(travel: tuple[Path, str]) -> None:
    archive, _ = travel
    model = Model.load(archive)
    regex = [e for e in model.parse("fly to Zurich with Lufthansa, booking AB12345")["entities"]
             if e["extractor"] == "RegexEntityExtractor"]
    # Zurich is only in data/lookups/cities.txt, Lufthansa only in data/lookups/airlines.txt
    assert {(e["entity"], e["value"]) for e in regex} >= {("city", "Zurich"), ("airline", "Lufthansa"),
                                                           ("booking_id", "AB12345")}
    # synonyms from the JSON file, a YAML synonym item, the Markdown file and an inline annotation
    [mapper] = [c for c in model.pipeline.components if c.component_name() == "EntitySynonymMapper"]
    surfaces = {"frisco": "San Francisco", "the big apple": "New York", "double bed": "double",
                "ba": "British Airways"}
    messages = [Message(text=s, entities=[{"entity": "x", "start": 0, "end": len(s), "value": s}])
                for s in surfaces]
    mapper.process(messages)
    assert [m.entities[0]["value"] for m in messages] == list(surfaces.values())


def test_the_travel_project_validates_clean() -> None:
    code, out, err = cli(TRAVEL, "data", "validate", "--data", "data", "--domain", "domain.yml")
    assert code == 0, err
    assert "no warnings" in out, out


def test_nlu_engine_test_writes_rasas_files(travel: tuple[Path, str], tmp_path: Path) -> None:
    archive, _ = travel
    code, out, err = cli(TRAVEL, "test", "-m", str(archive), "--data", "data", "--out", str(tmp_path),
                         "--no-plot", "--successes")
    assert code == 0, err
    for name in ("intent_report.json", "intent_errors.json", "response_selection_report.json",
                 "response_selection_errors.json", "response_selection_successes.json",
                 "DIETClassifier_report.json", "summary.json", "index.html"):
        assert (tmp_path / name).is_file(), name
    report = json.loads((tmp_path / "response_selection_report.json").read_text())
    keys = {key for key in report if "/" in key}
    assert keys == {"faq/ask_baggage", "faq/ask_payment", "faq/ask_pets", "faq/ask_refund",
                    "chitchat/ask_name", "chitchat/ask_howdoing", "chitchat/ask_joke",
                    "policy/ask_privacy", "policy/ask_terms"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {"fallback_rate", "num_fallbacks", "accuracy_with_fallback"} <= set(summary["intent"])
    assert summary["response_selection"]["num_examples"] == sum(report[k]["support"] for k in keys)
    assert "Response selection: accuracy" in out
