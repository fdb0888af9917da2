"""The one table of components: Rasa name -> class, imported only when a pipeline uses it.

A custom component is named in YAML by its dotted import path
(``my_package.module.MyComponent``) and needs no registration.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from nlu_engine.component import Component
from nlu_engine.errors import ConfigError, closest

# name -> "module:Class". Keeping this a table of strings keeps `nlu-engine --help` from
# importing TensorFlow, spaCy or scikit-learn.
COMPONENTS: dict[str, str] = {
    # model loaders and tokenizers
    "SpacyNLP": "nlu_engine.loaders.spacy_nlp:SpacyNLP",
    "WhitespaceTokenizer": "nlu_engine.tokenizers.whitespace:WhitespaceTokenizer",
    "SpacyTokenizer": "nlu_engine.tokenizers.spacy_tokenizer:SpacyTokenizer",
    # sparse featurizers
    "CountVectorsFeaturizer": "nlu_engine.featurizers.sparse.count_vectors:CountVectorsFeaturizer",
    "LexicalSyntacticFeaturizer": (
        "nlu_engine.featurizers.sparse.lexical_syntactic:LexicalSyntacticFeaturizer"
    ),
    "RegexFeaturizer": "nlu_engine.featurizers.sparse.regex:RegexFeaturizer",
    # dense featurizers
    "SpacyFeaturizer": "nlu_engine.featurizers.dense.spacy_featurizer:SpacyFeaturizer",
    "LanguageModelFeaturizer": "nlu_engine.featurizers.dense.language_model:LanguageModelFeaturizer",
    # intent classifiers
    "LogisticRegressionClassifier": (
        "nlu_engine.classifiers.logistic_regression:LogisticRegressionClassifier"
    ),
    "KeywordIntentClassifier": "nlu_engine.classifiers.keyword:KeywordIntentClassifier",
    "SklearnIntentClassifier": "nlu_engine.classifiers.sklearn_intent:SklearnIntentClassifier",
    "DIETClassifier": "nlu_engine.classifiers.diet.component:DIETClassifier",
    "FallbackClassifier": "nlu_engine.classifiers.fallback:FallbackClassifier",
    "ResponseSelector": "nlu_engine.classifiers.response_selector:ResponseSelector",
    # entity extractors and processors
    "RegexEntityExtractor": "nlu_engine.extractors.regex_entities:RegexEntityExtractor",
    "CRFEntityExtractor": "nlu_engine.extractors.crf_entity_extractor:CRFEntityExtractor",
    "EntitySynonymMapper": "nlu_engine.extractors.synonyms:EntitySynonymMapper",
}


def component_class(name: str) -> type[Component]:
    """The class for a registered name or a dotted import path; ConfigError otherwise."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"component name must be a non-empty string, got {name!r}")
    if name in COMPONENTS:
        module_name, class_name = COMPONENTS[name].split(":")
        module = importlib.import_module(module_name)
        return getattr(module, class_name)  # type: ignore[no-any-return]
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
            "nlu_engine.component.Component"
        )
    return cls


def registered_names() -> list[str]:
    return sorted(COMPONENTS)
