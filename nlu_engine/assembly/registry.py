"""The one table of components: Rasa name -> class, imported only when a pipeline uses it.

A custom component is named in YAML by its dotted import path
(``my_package.module.MyComponent``) and needs no registration.

Two ways in. :func:`component_class` serves training from the user's own config: a dotted path
there is the user's code, and is imported (from the working directory too, as in Rasa).
:func:`component_class_for_loading` serves model archives, which are data: it imports a dotted
path only if the user allowed that exact name, and decides so before importing anything.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable
from pathlib import Path

from nlu_engine.contract.component import Component
from nlu_engine.contract.errors import ConfigError, closest

# name -> "module:Class". Keeping this a table of strings keeps `nlu-engine --help` from
# importing TensorFlow, spaCy or scikit-learn.
COMPONENTS: dict[str, str] = {
    # model loaders and tokenizers
    "SpacyNLP": "nlu_engine.loaders.spacy_nlp:SpacyNLP",
    "WhitespaceTokenizer": "nlu_engine.tokenizers.whitespace:WhitespaceTokenizer",
    "SpacyTokenizer": "nlu_engine.tokenizers.spacy_tokenizer:SpacyTokenizer",
    "JiebaTokenizer": "nlu_engine.tokenizers.jieba:JiebaTokenizer",
    "SudachiTokenizer": "nlu_engine.tokenizers.sudachi:SudachiTokenizer",
    "KiwiTokenizer": "nlu_engine.tokenizers.kiwi:KiwiTokenizer",
    "PyThaiNLPTokenizer": "nlu_engine.tokenizers.pythainlp:PyThaiNLPTokenizer",
    # sparse featurizers
    "CountVectorsFeaturizer": "nlu_engine.featurizers.sparse.count_vectors:CountVectorsFeaturizer",
    "LexicalSyntacticFeaturizer": (
        "nlu_engine.featurizers.sparse.lexical_syntactic:LexicalSyntacticFeaturizer"
    ),
    "RegexFeaturizer": "nlu_engine.featurizers.sparse.regex:RegexFeaturizer",
    "GazetteerFeaturizer": "nlu_engine.featurizers.sparse.gazetteer:GazetteerFeaturizer",
    # the message's language (no features: it writes message.language)
    "LanguageIdentifier": "nlu_engine.featurizers.language_identifier:LanguageIdentifier",
    # dense featurizers
    "SpacyFeaturizer": "nlu_engine.featurizers.dense.spacy_featurizer:SpacyFeaturizer",
    "LanguageModelFeaturizer": "nlu_engine.featurizers.dense.language_model:LanguageModelFeaturizer",
    "UniversalSentenceEncoderFeaturizer": (
        "nlu_engine.featurizers.dense.sentence_encoder:UniversalSentenceEncoderFeaturizer"
    ),
    # intent classifiers
    "LogisticRegressionClassifier": (
        "nlu_engine.classifiers.logistic_regression:LogisticRegressionClassifier"
    ),
    "KeywordIntentClassifier": "nlu_engine.classifiers.keyword:KeywordIntentClassifier",
    "SklearnIntentClassifier": "nlu_engine.classifiers.sklearn_intent:SklearnIntentClassifier",
    "DIETClassifier": "nlu_engine.classifiers.diet.component:DIETClassifier",
    "IntentCombiner": "nlu_engine.classifiers.combiner:IntentCombiner",
    "FallbackClassifier": "nlu_engine.classifiers.fallback:FallbackClassifier",
    "ResponseSelector": "nlu_engine.classifiers.response_selector:ResponseSelector",
    # entity extractors and processors
    "RegexEntityExtractor": "nlu_engine.extractors.regex_entities:RegexEntityExtractor",
    "CRFEntityExtractor": "nlu_engine.extractors.crf_entity_extractor:CRFEntityExtractor",
    "EntitySynonymMapper": "nlu_engine.extractors.synonyms:EntitySynonymMapper",
    "EntityChooser": "nlu_engine.extractors.entity_chooser:EntityChooser",
    "DucklingEntityExtractor": "nlu_engine.extractors.duckling:DucklingEntityExtractor",
    "SpacyEntityExtractor": "nlu_engine.extractors.spacy_entities:SpacyEntityExtractor",
}

# Rasa components a config may name that this engine does not build: name -> what to use instead
# (and why), so a Rasa config.yml fails with one line that says what to write.
NOT_AVAILABLE: dict[str, str] = {
    "MitieNLP": "MITIE is not built here; load a language model with SpacyNLP instead",
    "MitieTokenizer": "MITIE is not built here; use WhitespaceTokenizer (or SpacyTokenizer with "
                      "SpacyNLP)",
    "MitieFeaturizer": "MITIE is not built here; for dense word vectors use SpacyFeaturizer "
                       "(with SpacyNLP and SpacyTokenizer) or LanguageModelFeaturizer",
    "MitieEntityExtractor": "MITIE is not built here; use CRFEntityExtractor or DIETClassifier",
    "MitieIntentClassifier": "MITIE is not built here; use SklearnIntentClassifier (the closest: "
                             "an SVM) or DIETClassifier",
    "ConveRTFeaturizer": "ConveRT's weights are no longer published (PolyAI took them offline); "
                         "use LanguageModelFeaturizer for pre-trained dense features",
    "ConveRTTokenizer": "removed in Rasa 3.0; use WhitespaceTokenizer",
    "LanguageModelTokenizer": "removed in Rasa 3.0; use WhitespaceTokenizer before "
                              "LanguageModelFeaturizer",
    "HFTransformersNLP": "removed in Rasa 3.0; use LanguageModelFeaturizer with model_weights",
    "EmbeddingIntentClassifier": "removed in Rasa 2.0; use DIETClassifier",
}


def component_class(name: str) -> type[Component]:
    """The class for a registered name or a dotted import path; ConfigError otherwise."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"component name must be a non-empty string, got {name!r}")
    if name in COMPONENTS:
        module_name, class_name = COMPONENTS[name].split(":")
        module = importlib.import_module(module_name)
        return getattr(module, class_name)  # type: ignore[no-any-return]
    if name in NOT_AVAILABLE:
        raise ConfigError(f"{name} is not available: {NOT_AVAILABLE[name]}")
    if "." not in name:
        raise ConfigError(
            f"unknown component '{name}'{closest(name, COMPONENTS)}; registered components: "
            f"{', '.join(sorted(COMPONENTS))}, or a custom one by its import path "
            "(my_package.module.MyComponent)"
        )
    module_name, _, class_name = name.rpartition(".")
    if not all(part.isidentifier() for part in name.split(".")):
        raise ConfigError(
            f"custom component '{name}' is not an import path; write it as "
            "my_package.module.MyComponent"
        )
    # Rasa resolves custom components relative to the working directory.
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # ImportError, or any error the module raises on import
        raise ConfigError(
            f"custom component '{name}': cannot import module '{module_name}' "
            f"({type(error).__name__}: {error}); "
            "check the path and that the module is importable from the working directory"
        ) from None
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise ConfigError(
            f"custom component '{name}': '{class_name}' in '{module_name}' is not a subclass of "
            "nlu_engine.contract.component.Component"
        )
    return cls


def allowed_components(names: Iterable[str] | str | None) -> frozenset[str]:
    """The custom component classes a user allows a model archive to import.

    ``names`` are import paths (``my_package.module.MyComponent``); a single string counts as one
    name. Registered names need no allowing and are dropped. Anything else is a ConfigError.
    """
    if names is None:
        return frozenset()
    if isinstance(names, str):
        names = [names]
    allowed = set()
    for name in names:
        if not isinstance(name, str):
            raise ConfigError(f"an allowed component must be a class path string, got {name!r}")
        if registered_name(name) is not None:
            continue
        parts = name.split(".")
        if len(parts) < 2 or not all(part.isidentifier() for part in parts):
            raise ConfigError(
                f"allowed component '{name}' is not a registered component nor an import path; "
                "write it as my_package.module.MyComponent"
            )
        allowed.add(name)
    return frozenset(allowed)


def registered_name(name: str) -> str | None:
    """The registered name of ``name``: itself, or the one whose class lives at this import path
    (``nlu_engine.classifiers.fallback.FallbackClassifier``); None for anything else."""
    if name in COMPONENTS:
        return name
    return next((n for n, target in COMPONENTS.items() if target.replace(":", ".") == name), None)


def check_loadable(name: object, allowed: frozenset[str]) -> str:
    """``name`` if an archive may use it (registered, or allowed by the user); ConfigError if not.

    Imports nothing and leaves ``sys.path`` alone: the decision comes first.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"component name must be a non-empty string, got {name!r}")
    if registered_name(name) is not None or name in allowed:
        return name
    shown = name if name.isprintable() and len(name) <= 200 else repr(name[:200])  # one line
    if "." not in name:
        raise ConfigError(
            f"unknown component '{shown}'{closest(shown, COMPONENTS)}; this version registers "
            f"{', '.join(sorted(COMPONENTS))}"
        )
    raise ConfigError(
        f"component '{shown}' is not registered; a model may import a custom component only if "
        f"you allow it: pass --allow-component {shown} (Python: allow_components=['{shown}']) "
        "if you trust that code"
    )


def component_class_for_loading(name: str, allowed: frozenset[str]) -> type[Component]:
    """The class a model archive names: a registered one, or a custom one the user allowed."""
    check_loadable(name, allowed)
    return component_class(registered_name(name) or name)
