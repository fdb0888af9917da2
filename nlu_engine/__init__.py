"""nlu_engine: intent classification and entity extraction for chatbots, Rasa NLU compatible."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
MINIMUM_COMPATIBLE_VERSION = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from nlu_engine.assembly.model import Model


def train(
    config: str | Any,
    data: str | list[str] | Any,
    out: str = "models",
    fixed_model_name: str | None = None,
    overrides: list[str] | None = None,
    finetune: str | bool | None = None,
    epoch_fraction: float | None = None,
    rehearsal_fraction: float | None = None,
    domain: str | None = None,
) -> str:
    """Train a pipeline on Rasa training data and write a model archive; returns its path.

    ``data`` may be a Rasa project's data folder (stories and rules are skipped); ``domain``, its
    domain file, adds the responses of retrieval intents. ``finetune``: continue a trained model
    instead (an archive, a folder's newest, or True for the newest in ``out``); ``config`` may
    then be None (the model's own). ``epoch_fraction``: the share of a full training's epochs;
    ``rehearsal_fraction``: the share of the examples the model already knew mixed into each
    epoch (defaults: ``FinetuneOptions``).
    """
    from nlu_engine.assembly.model import train as _train
    from nlu_engine.contract.component import FinetuneOptions

    given = {"epoch_fraction": epoch_fraction, "rehearsal_fraction": rehearsal_fraction}
    options = FinetuneOptions(**{k: v for k, v in given.items() if v is not None})
    return str(_train(config, data, out=out, fixed_model_name=fixed_model_name, overrides=overrides,
                      finetune=finetune, finetune_options=options, domain=domain))


def load(path: str, allow_components: list[str] | None = None, runtime: str | None = None) -> Model:
    """Load a model archive (``.tar.gz``) or a folder of archives (the newest is taken).

    A model is data: loading imports registered components only, plus the custom component
    classes named in ``allow_components`` (``["my_package.module.MyComponent"]``) if you trust them.
    ``runtime`` (float32, int8, int8_dynamic or bfloat16) overrides the parse runtime the archive records.
    """
    from nlu_engine.assembly.model import Model

    return Model.load(path, allow_components=allow_components, runtime=runtime)


__all__ = ["__version__", "load", "train"]
