"""The training data's regexes and lookup tables as patterns: which ones a component uses, how a
lookup table becomes one regex, and compiling them with a clear error. Shared by the
RegexFeaturizer and the RegexEntityExtractor."""

from __future__ import annotations

import re
from dataclasses import dataclass

from nlu_engine.contract.component import Component
from nlu_engine.contract.errors import DataError
from nlu_engine.contract.training_data import TrainingData


def lookup_table_regex(elements: list[str], use_word_boundaries: bool = True) -> str:
    """One regex matching any element of a lookup table."""
    escaped = [re.escape(str(element)) for element in elements if str(element)]
    if use_word_boundaries:
        escaped = [rf"\b{element}\b" for element in escaped]
    return "(" + "|".join(escaped) + ")"


def extract_patterns(
    data: TrainingData,
    use_regexes: bool = True,
    use_lookup_tables: bool = True,
    use_word_boundaries: bool = True,
) -> list[dict[str, str]]:
    """The ``{name, pattern}`` list a RegexFeaturizer (or regex entity extractor) uses."""
    patterns: list[dict[str, str]] = []
    if use_regexes:
        patterns.extend(
            {"name": str(r["name"]), "pattern": str(r["pattern"])} for r in data.regex_features
        )
    if use_lookup_tables:
        for table in data.lookup_tables:
            elements = [e for e in table.get("elements", []) if str(e)]
            if elements:
                patterns.append(
                    {
                        "name": str(table["name"]),
                        "pattern": lookup_table_regex(elements, use_word_boundaries),
                    }
                )
    return patterns


def compile_patterns(patterns: list[dict[str, str]], case_sensitive: bool) -> list[re.Pattern[str]]:
    """Compiled patterns; an invalid one is a DataError naming it."""
    flags = 0 if case_sensitive else re.IGNORECASE
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern["pattern"], flags))
        except re.error as exc:
            raise DataError(
                f"The regex '{pattern['name']}' has an invalid pattern "
                f"'{pattern['pattern']}': {exc}. Fix it in the training data's regex section."
            ) from None
    return compiled


@dataclass(frozen=True, kw_only=True)
class PatternConfig(Component.Config):
    """Which of the training data's patterns are used and how they match (RegexFeaturizer and
    RegexEntityExtractor)."""

    case_sensitive: bool = True
    use_lookup_tables: bool = True
    use_regexes: bool = True
    use_word_boundaries: bool = True
