"""Where a language model's weights are found: an installed package (by import or distribution
name) or a local directory, never a download (``LanguageModelFeaturizer``'s ``model_weights``)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from nlu_engine.contract.errors import ConfigError
from nlu_engine.contract.paths import shallowest_folder
from nlu_engine.featurizers.dense.bert import CONFIG_FILE, WEIGHTS_FILE, model_files_present
from nlu_engine.loaders.weight_packages import WEIGHT_PACKAGES, find_package

#: the weights without ``model_weights``: all-MiniLM-L6-v2's package (``nlu-engine download``)
DEFAULT_WEIGHTS_PACKAGE = find_package("all-MiniLM-L6-v2").import_name
#: the names configs use for a weights package (Hugging Face hub names among them) -> its import name
WEIGHTS_ALIASES = {
    name: package.import_name
    for package in WEIGHT_PACKAGES if package.component == "LanguageModelFeaturizer"
    for name in package.names if name is not None and name != package.import_name
}

#: hub names without an owner that Rasa configs use for BERT weights
HUB_NAMES = frozenset({"bert-base-uncased", "bert-base-cased", "bert-base-multilingual-cased",
                       "bert-large-uncased", "LaBSE"})


# --- finding the weights --------------------------------------------------------------------------
def _package_dir(name: str) -> Path | None:
    """The folder of an installed package, by import name or distribution name (no import)."""
    candidates = [name, name.replace("-", "_").replace(".", "_")]
    try:
        top = importlib.metadata.distribution(name).read_text("top_level.txt")
        if top:
            candidates.extend(line.strip() for line in top.splitlines() if line.strip())
    except (importlib.metadata.PackageNotFoundError, ValueError):
        pass
    for candidate in candidates:
        if not candidate.isidentifier():
            continue
        try:
            spec = importlib.util.find_spec(candidate)
        except (ImportError, ValueError):
            continue
        if spec and spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations)))
    return None


def _model_folder(root: Path) -> Path | None:
    """``root`` or the shallowest folder just below it with a config, safetensors weights and vocab."""
    return shallowest_folder(root, model_files_present)


def resolve_weights(model_weights: str | None, cache_dir: str | None = None) -> Path:
    """The local folder holding the model's files; ConfigError (never a download) otherwise."""
    name = model_weights or DEFAULT_WEIGHTS_PACKAGE
    name = WEIGHTS_ALIASES.get(name, name)
    roots: list[Path] = []
    path = Path(name).expanduser()
    if path.is_dir():
        roots.append(path)
    if cache_dir and (Path(cache_dir).expanduser() / name).is_dir():
        roots.append(Path(cache_dir).expanduser() / name)
    if not roots and "/" not in name and "\\" not in name:
        package = _package_dir(name)
        if package is not None:
            roots.append(package)
    for root in roots:
        folder = _model_folder(root)
        if folder is not None:
            return folder.resolve()
    where = f"'{roots[0]}'" if roots else None
    if where:
        raise ConfigError(
            f"LanguageModelFeaturizer: no {CONFIG_FILE} + {WEIGHTS_FILE} + vocab.txt/tokenizer.json "
            f"found in {where}; weights must be safetensors (convert a pytorch_model.bin first)"
        )
    shipped = next((p for p in WEIGHT_PACKAGES if p.import_name == name), None)
    if shipped is not None:
        hint = f"install the weights with `{shipped.install_hint}`"
    elif "/" in name or name in HUB_NAMES:
        # a Hugging Face hub name, as Rasa configs write them (rasa/LaBSE, bert-base-uncased)
        hint = (
            f"'{name}' is a Hugging Face hub name and weights are never downloaded here; "
            f"download the model folder once (e.g. `huggingface-cli download {name} "
            "--local-dir models/lm`; it needs config.json, model.safetensors and vocab.txt) and "
            "set model_weights to that folder, or set cache_dir to a folder holding "
            f"'{name}'; without model_weights the installed all-MiniLM-L6-v2 is used"
        )
    else:
        hint = ("give an installed package or a local directory with config.json, "
                "model.safetensors and vocab.txt (weights are never downloaded)")
    raise ConfigError(
        f"LanguageModelFeaturizer: model_weights '{model_weights or name}' is neither a local "
        f"directory nor an installed package; {hint}"
    )
