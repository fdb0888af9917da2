"""Scale-out on Ray: the only package that imports Ray (``pip install 'nlu-engine[distributed]'``).

- ``cluster``: start a local Ray or connect to a cluster (``--ray-address``), with one-line errors;
- ``corpus``: ``nlu-engine parse --input ... --ray``: Ray Data reads the corpus in chunks and an
  actor pool, one model per actor, parses the same groups as ``nlu_engine.corpus.parsing``;
- ``trials``: ``nlu-engine test ... --ray``: each training of a cross-validation or a
  comparison is a Ray task running the same unit as the sequential run
  (``nlu_engine.evaluation.experiments``);
- ``serving``: a Ray Serve deployment of the HTTP app with a replica count
  (``examples/ray_serve.py``).

Components know nothing of Ray. Ray is imported inside the functions that use it, so importing
this package (and ``nlu-engine --help``) does not import it.
"""

from __future__ import annotations

import importlib.util

from nlu_engine.contract.errors import NLUError

RAY_MISSING = "needs Ray: pip install 'nlu-engine[distributed]'"


def require_ray(flag: str = "--ray") -> None:
    """A one-line error naming the extra to install when Ray is not installed."""
    if importlib.util.find_spec("ray") is None:
        raise NLUError(f"{flag} {RAY_MISSING}")
