"""Fixtures the command-line tests share with the corpus tests."""

from tests.corpus.conftest import logreg_archive  # noqa: F401 - a fixture
