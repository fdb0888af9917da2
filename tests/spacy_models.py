"""Skip markers for tests that need an installed spaCy model package."""

from __future__ import annotations

import pytest

from nlu_engine.contract.errors import ConfigError
from nlu_engine.loaders.spacy_nlp import resolve_model


def installed(model: str) -> bool:
    try:
        resolve_model(model)
    except ConfigError:
        return False
    return True


needs_md = pytest.mark.skipif(not installed("en_core_web_md"), reason="en_core_web_md not installed")
needs_sm = pytest.mark.skipif(not installed("en_core_web_sm"), reason="en_core_web_sm not installed")
