"""Property-based tests of the config reader (hypothesis): a broken config.yml, or one with
parameters of any name and type, gives a config or a one-line ``ConfigError`` naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from nlu_engine.assembly.config import PIPELINES, load_config
from nlu_engine.contract.errors import NLUError
from tests.reader_inputs import ALPHABET, assert_one_line, mutated

SHIPPED = {name: (PIPELINES / f"{name}.yml").read_text(encoding="utf-8")
           for name in ("diet", "logreg", "crf", "rasa_suggested")}
COMPONENTS = ["WhitespaceTokenizer", "CountVectorsFeaturizer", "LogisticRegressionClassifier",
              "RegexFeaturizer", "EntitySynonymMapper", "DIETClassifier", "CRFEntityExtractor",
              "FallbackClassifier", "Nope", "nlu_engine.tokenizers.whitespace.WhitespaceTokenizer"]
KEYS = ["epochs", "analyzer", "min_ngram", "max_ngram", "threshold", "random_seed", "C",
        "intent_tokenization_flag", "number_of_transformer_layers", "constrain_similarities",
        "features", "case_sensitive", "unknown"]
values = st.recursive(st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats()
                      | st.text(alphabet=ALPHABET, max_size=8),
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=2),
                      max_leaves=6)
steps = st.fixed_dictionaries({"name": st.sampled_from(COMPONENTS)},
                              optional={key: values for key in KEYS})
configs = st.fixed_dictionaries({"pipeline": st.lists(steps, max_size=5)},
                                optional={"language": values, "policies": values, "recipe": values})


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config-properties")


def load_or_refuse(folder: Path, text: str) -> None:
    path = folder / "config.yml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        config = load_config(path)
    except NLUError as error:
        assert_one_line(error, str(path))
        return
    assert config.steps and all(step.name for step in config.steps)


@given(st.sampled_from(sorted(SHIPPED)).flatmap(lambda name: mutated(SHIPPED[name])))
def test_a_broken_shipped_config_loads_or_gives_one_line(folder: Path, text: str) -> None:
    load_or_refuse(folder, text)


@given(configs)
def test_any_parameters_load_or_give_one_line(folder: Path, config: dict) -> None:
    load_or_refuse(folder, yaml.safe_dump(config, allow_unicode=True))
