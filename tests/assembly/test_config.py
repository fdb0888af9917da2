"""config.yml -> validated pipeline: every bad input is a one-line ConfigError naming the place."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from nlu_engine.assembly.config import DEFAULT_PIPELINE, RASA_DEFAULT_PIPELINE, load_config, shipped_pipelines
from nlu_engine.contract.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
LOGREG = PROJECT_ROOT / "nlu_engine" / "pipelines" / "logreg.yml"


def pipeline(*steps: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"language": "en", "pipeline": list(steps), **top}


TOKENIZER = {"name": "WhitespaceTokenizer"}
FEATURIZER = {"name": "CountVectorsFeaturizer"}
CLASSIFIER = {"name": "LogisticRegressionClassifier"}


def config_error(source: Any, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(source, overrides)
    message = str(info.value)
    assert "\n" not in message, "errors are one line"
    return message


def write(tmp_path: Path, text: str, name: str = "config.yml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --- a good config ------------------------------------------------------------------------------
def test_valid_config_fills_every_default() -> None:
    config = load_config(pipeline(TOKENIZER, {**FEATURIZER, "max_ngram": 2}, CLASSIFIER))
    assert [s.name for s in config.steps] == [
        "WhitespaceTokenizer", "CountVectorsFeaturizer", "LogisticRegressionClassifier"
    ]
    featurizer = config.steps[1].params
    assert featurizer["max_ngram"] == 2
    assert featurizer["analyzer"] == "word"  # default filled in
    assert config.notices == []
    as_dict = config.as_dict()
    assert as_dict["pipeline"][1] == {"name": "CountVectorsFeaturizer", **featurizer}


@pytest.mark.parametrize("name", shipped_pipelines())
def test_shipped_pipelines_are_valid(name: str) -> None:
    config = load_config(name)  # an unknown component fails here: ship a pipeline with its component
    assert config.steps
    assert all("accepted and ignored" in notice for notice in config.notices)


# --- YAML and top-level keys --------------------------------------------------------------------
def test_a_control_character_is_one_line_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.yml"
    path.write_text("language: en\npipeline:\n  - name: Whitespace\x00Tokenizer\n", encoding="utf-8")
    message = config_error(path)
    assert message.startswith(f"{path}:3: invalid YAML (unacceptable character #x0000")
    assert "\n" not in message


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        language: en
        pipeline:
          - name: WhitespaceTokenizer
           - name: CountVectorsFeaturizer
        """)
    message = config_error(path)
    assert message.startswith(f"{path}:4: invalid YAML")


def test_unclosed_bracket_names_a_line(tmp_path: Path) -> None:
    path = write(tmp_path, "language: en\npipeline: [{name: WhitespaceTokenizer}\n")
    message = config_error(path)
    assert f"{path}:" in message and "invalid YAML" in message
    line = message.split(f"{path}:")[1].split(":")[0]
    assert line.isdigit()


def test_missing_file() -> None:
    assert "not found" in config_error("no/such/config.yml")


def test_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- name: WhitespaceTokenizer\n")
    assert "must be a mapping" in config_error(path)


def test_unknown_top_level_key_suggests_closest() -> None:
    message = config_error({"language": "en", "pipline": [TOKENIZER]})
    assert "unknown top-level key 'pipline'" in message
    assert "did you mean 'pipeline'" in message


def test_language_must_be_a_code() -> None:
    message = config_error(pipeline(TOKENIZER, language=["en"]))
    assert "language '['en']' is not known" in message and "'xx' for any language" in message


@pytest.mark.parametrize("key, value", [("recipe", "default.v1"), ("assistant_id", "bot"),
                                        ("policies", [{"name": "RulePolicy"}])])
def test_rasa_only_keys_are_ignored_with_a_notice(key: str, value: Any) -> None:
    config = load_config(pipeline(TOKENIZER, **{key: value}))
    assert [s.name for s in config.steps] == ["WhitespaceTokenizer"]
    assert len(config.notices) == 1
    assert f"'{key}' is accepted and ignored" in config.notices[0]


# --- missing or empty pipeline -> the default, with a notice ------------------------------------
@pytest.mark.parametrize("text", ["language: en\n", "language: en\npipeline: []\n",
                                  "language: en\npipeline:\n", ""])
def test_empty_or_missing_pipeline_uses_default(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    config = load_config(path)
    default = load_config(DEFAULT_PIPELINE)
    assert [s.name for s in config.steps] == [s.name for s in default.steps]
    assert [s.params for s in config.steps] == [s.params for s in default.steps]
    assert any("no pipeline given" in n and "diet.yml" in n for n in config.notices)


def test_default_pipeline_keeps_language_and_takes_overrides() -> None:
    config = load_config({"language": "de", "policies": []}, ["DIETClassifier.epochs=3"])
    assert config.language == "de"
    diet = next(step for step in config.steps if step.name == "DIETClassifier")
    assert diet.params["epochs"] == 3
    assert len(config.notices) == 2  # policies ignored + default pipeline


def test_none_means_default_pipeline() -> None:
    config = load_config(None)
    assert config.source == str(DEFAULT_PIPELINE)
    assert "DIETClassifier" in [step.name for step in config.steps]


# --- shipped pipelines by name, from any folder -------------------------------------------------
@pytest.mark.parametrize("source", ["diet", "diet.yml", "pipelines/diet.yml", Path("pipelines/diet.yml")])
def test_a_shipped_pipeline_is_found_by_name_from_any_folder(
    source: str | Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(source)
    assert config.source == str(DEFAULT_PIPELINE)
    assert "DIETClassifier" in [step.name for step in config.steps]


def test_a_local_file_wins_over_a_shipped_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipelines").mkdir()
    write(tmp_path / "pipelines", "pipeline:\n  - name: WhitespaceTokenizer\n", name="diet.yml")
    config = load_config("pipelines/diet.yml")
    assert [step.name for step in config.steps] == ["WhitespaceTokenizer"]
    assert config.source == str(Path("pipelines/diet.yml"))


@pytest.mark.parametrize("source", ["no_such_pipeline", "elsewhere/diet.yml", "pipelines/nope.yml"])
def test_an_unknown_config_names_the_shipped_pipelines(source: str) -> None:
    message = config_error(source)
    assert f"config file '{source}' not found" in message
    assert "shipped pipeline (" in message and "diet, " in message and "logreg" in message


def test_pipeline_must_be_a_list() -> None:
    assert "must be a list" in config_error({"pipeline": "WhitespaceTokenizer"})


@pytest.mark.parametrize("step", ["WhitespaceTokenizer", {"analyzer": "word"}])
def test_step_needs_a_name(step: Any) -> None:
    assert "step 1 needs a 'name'" in config_error({"pipeline": [step]})


# --- components -----------------------------------------------------------------------------------
def test_unknown_component_suggests_closest_and_lists_registered() -> None:
    message = config_error(pipeline(TOKENIZER, {"name": "CountVectorFeaturizer"}))
    assert "pipeline step 2" in message
    assert "unknown component 'CountVectorFeaturizer'" in message
    assert "did you mean 'CountVectorsFeaturizer'" in message
    assert "WhitespaceTokenizer" in message  # the registered names are listed


def test_component_name_must_be_a_string() -> None:
    assert "non-empty string" in config_error(pipeline({"name": 3}))


# --- parameters ---------------------------------------------------------------------------------
def test_misspelled_parameter_suggests_closest() -> None:
    message = config_error(pipeline(TOKENIZER, {**FEATURIZER, "max_ngrm": 2}))
    assert "CountVectorsFeaturizer (step 2)" in message
    assert "unknown parameter 'max_ngrm'" in message
    assert "did you mean 'max_ngram'" in message
    assert "allowed: " in message and "min_ngram" in message


def test_unknown_parameter_without_close_match_lists_allowed() -> None:
    message = config_error(pipeline(TOKENIZER, {**FEATURIZER, "colour": "blue"}))
    assert "unknown parameter 'colour'" in message
    assert "did you mean" not in message
    assert "analyzer" in message


def test_non_string_parameter_key() -> None:
    message = config_error(pipeline(TOKENIZER, {**FEATURIZER, 1: 2}))
    assert "unknown parameter '1'" in message


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("max_ngram", "two", "must be an integer, got 'two'"),
        ("max_ngram", True, "must be an integer, got True"),  # a bool is not an int
        ("max_ngram", 1.5, "must be an integer"),
        ("lowercase", "yes", "must be true/false"),
        ("analyzer", "words", "must be one of 'word', 'char', 'char_wb'"),
        ("OOV_words", "foo", "must be a list of a string"),
        ("OOV_words", ["ok", 3], "must be a list of a string"),
        ("min_df", "1", "must be an integer or a number"),
    ],
)
def test_wrong_type(key: str, value: Any, expected: str) -> None:
    message = config_error(pipeline(TOKENIZER, {**FEATURIZER, key: value}))
    assert f"CountVectorsFeaturizer (step 2): parameter '{key}'" in message
    assert expected in message


def test_int_accepted_where_float_expected() -> None:
    config = load_config(pipeline(TOKENIZER, FEATURIZER, {**CLASSIFIER, "tol": 1}))
    assert config.steps[2].params["tol"] == 1


def test_optional_parameter_accepts_null() -> None:
    config = load_config(pipeline(TOKENIZER, {**FEATURIZER, "max_features": None}))
    assert config.steps[1].params["max_features"] is None


@pytest.mark.parametrize(
    "step, expected",
    [
        ({**FEATURIZER, "max_ngram": 0}, "parameter 'max_ngram' = 0 is out of range; allowed [1, inf]"),
        ({**FEATURIZER, "min_df": -1}, "parameter 'min_df' = -1 is out of range"),
        ({"name": "DIETClassifier", "drop_rate": 1.5}, "allowed [0, 0.99]"),
        ({"name": "DIETClassifier", "epochs": 0}, "parameter 'epochs' = 0 is out of range"),
        ({"name": "DIETClassifier", "hidden_layers_sizes": {"text": [0]}}, "out of range"),
        # ResponseSelector's Config only changes DIET's defaults: DIET's bounds still apply
        ({"name": "ResponseSelector", "number_of_transformer_layers": -1}, "allowed [0, inf]"),
        ({"name": "ResponseSelector", "dense_dimension": {"text": 0}}, "allowed [1, inf]"),
    ],
)
def test_out_of_range(step: dict[str, Any], expected: str) -> None:
    message = config_error(pipeline(TOKENIZER, FEATURIZER, step))
    assert expected in message
    assert f"{step['name']} (step 3)" in message


@pytest.mark.parametrize(
    "step, expected",
    [
        ({**FEATURIZER, "min_ngram": 3, "max_ngram": 2}, "min_ngram (3) must not exceed max_ngram (2)"),
        ({**FEATURIZER, "min_df": 3, "max_df": 2}, "max_df (2) must not be lower than min_df (3)"),
        ({**FEATURIZER, "stop_words": "german"}, "stop_words 'german' is not supported"),
        ({"name": "DIETClassifier", "transformer_size": 30},
         "transformer_size (30) must be divisible by number_of_attention_heads (4)"),
        ({"name": "ResponseSelector", "number_of_attention_heads": 3},
         "transformer_size (256) must be divisible by number_of_attention_heads (3)"),
        ({"name": "SklearnIntentClassifier", "kernels": []}, "kernels must not be empty"),
        ({"name": "CRFEntityExtractor", "features": [["low"], ["low"]]},
         "'features' needs an odd number of lists"),
        ({"name": "LexicalSyntacticFeaturizer", "features": [["lower"]]},
         "unknown feature 'lower' (did you mean 'low'?)"),
    ],
)
def test_fields_checked_against_each_other_before_training(step: dict[str, Any], expected: str) -> None:
    message = config_error(pipeline(TOKENIZER, FEATURIZER, step))
    assert f"{step['name']} (step 3): {expected}" in message


def test_invalid_token_pattern_is_refused_when_built() -> None:
    message = config_error(pipeline({**TOKENIZER, "token_pattern": "(unclosed"}))
    assert "WhitespaceTokenizer (step 1): token_pattern '(unclosed' is not a valid regular" in message


def test_share_hidden_layers_is_accepted_with_a_notice() -> None:
    diet = {"name": "DIETClassifier", "share_hidden_layers": True}
    config = load_config(pipeline(TOKENIZER, FEATURIZER, diet, {"name": "ResponseSelector"}))
    assert config.steps[2].params["share_hidden_layers"] is True
    assert config.notices == [
        "<config>: DIETClassifier (step 3): share_hidden_layers is accepted for Rasa configs and has "
        "no effect here: text and label keep separate hidden layers"
    ]


# --- order ----------------------------------------------------------------------------------------
def test_featurizer_before_tokenizer() -> None:
    message = config_error(pipeline(FEATURIZER, TOKENIZER))
    assert "CountVectorsFeaturizer (step 1) needs tokens" in message
    assert "WhitespaceTokenizer first" in message


def test_classifier_without_features() -> None:
    message = config_error(pipeline(TOKENIZER, CLASSIFIER))
    assert "LogisticRegressionClassifier (step 2) needs features" in message
    assert "add a featurizer" in message


def test_diet_without_tokens_or_features() -> None:
    assert "DIETClassifier (step 1) needs features" in config_error(pipeline({"name": "DIETClassifier"}))


def test_errors_name_the_config_file(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        language: en
        pipeline:
          - name: CountVectorsFeaturizer
        """)
    assert config_error(path).startswith(f"{path}: CountVectorsFeaturizer (step 1)")


# --- --set overrides ----------------------------------------------------------------------------
def test_set_by_name_parses_yaml_values() -> None:
    config = load_config(LOGREG, ["LogisticRegressionClassifier.max_iter=5",
                                  "LogisticRegressionClassifier.solver=liblinear"])
    params = config.steps[-1].params
    assert params["max_iter"] == 5 and params["solver"] == "liblinear"


def test_set_by_name_applies_to_every_step_of_that_name() -> None:
    config = load_config(LOGREG, ["CountVectorsFeaturizer.lowercase=false"])
    featurizers = [s for s in config.steps if s.name == "CountVectorsFeaturizer"]
    assert len(featurizers) == 2
    assert all(s.params["lowercase"] is False for s in featurizers)


def test_set_by_index_counts_from_zero() -> None:
    config = load_config(LOGREG, ["2.max_ngram=3"])
    assert config.steps[2].params["max_ngram"] == 3
    assert config.steps[1].params["max_ngram"] == 1


def test_set_lists_and_mappings() -> None:
    config = load_config(LOGREG, ['1.OOV_words=["foo", "bar"]'])
    assert config.steps[1].params["OOV_words"] == ["foo", "bar"]


@pytest.mark.parametrize("override", ["max_iter=5", "LogisticRegressionClassifier.max_iter",
                                      "LogisticRegressionClassifier=5", "=5", ".max_iter=5"])
def test_set_bad_form(override: str) -> None:
    message = config_error(LOGREG, [override])
    assert f"--set '{override}'" in message
    assert "expected Component.key=value" in message or "no component" in message


def test_set_unknown_component_suggests_closest() -> None:
    message = config_error(LOGREG, ["LogisticRegresionClassifier.max_iter=5"])
    assert "no component 'LogisticRegresionClassifier'" in message
    assert "did you mean 'LogisticRegressionClassifier'" in message


def test_set_index_out_of_range() -> None:
    assert "no component '9'" in config_error(LOGREG, ["9.max_iter=5"])


def test_set_unknown_key_is_validated() -> None:
    message = config_error(LOGREG, ["LogisticRegressionClassifier.max_itr=5"])
    assert "unknown parameter 'max_itr'" in message and "did you mean 'max_iter'" in message


def test_set_bad_value_is_validated() -> None:
    message = config_error(LOGREG, ["LogisticRegressionClassifier.max_iter=0"])
    assert "'max_iter' = 0 is out of range" in message
    message = config_error(LOGREG, ["LogisticRegressionClassifier.max_iter=lots"])
    assert "must be an integer, got 'lots'" in message


def test_overrides_do_not_change_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, LOGREG.read_text(encoding="utf-8"))
    before = path.read_text(encoding="utf-8")
    load_config(path, ["LogisticRegressionClassifier.max_iter=5"])
    assert path.read_text(encoding="utf-8") == before
    assert load_config(path).steps[-1].params["max_iter"] == 100


# --- custom components by dotted path -----------------------------------------------------------
CUSTOM_MODULE = '''
from dataclasses import dataclass

from nlu_engine.contract.component import Component, EntityExtractor, param
from nlu_engine.contract.errors import ConfigError


class Shouter(EntityExtractor):
    requires = ("tokens",)

    @dataclass(frozen=True, kw_only=True)
    class Config(EntityExtractor.Config):
        volume: int = param(3, low=0, high=11)
        word: str = "hey"

        def validate(self) -> None:
            super().validate()
            if self.volume > 5 and self.word.islower():
                raise ConfigError("a volume over 5 needs an upper-case word")


class Whisperer(Shouter):
    @dataclass(frozen=True, kw_only=True)
    class Config(Shouter.Config):
        volume: int = 1  # the parent's bounds still apply


class OldStyle(EntityExtractor):
    ranges = {"volume": (0, 11)}

    def __init__(self, volume: int = 3, word: str = "hey") -> None:
        self.volume = volume
        self.word = word


class OldRanges(EntityExtractor):
    ranges = {"volume": (0, 11)}


class Undecorated(EntityExtractor):
    class Config(EntityExtractor.Config):
        volume: int = 3


class TakesNothing(EntityExtractor):
    def __init__(self) -> None:
        super().__init__()


class NotAComponent:
    pass
'''


@pytest.fixture
def custom_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package in the working directory, as a user's project would have it."""
    name = f"custom_{tmp_path.name.replace('-', '_')}"
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "components.py").write_text(CUSTOM_MODULE)
    (package / "broken.py").write_text("def oops(:\n")
    (package / "raises.py").write_text("raise RuntimeError('boom on import')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_custom_component_by_dotted_path(custom_package: str) -> None:
    path = f"{custom_package}.components.Shouter"
    config = load_config(pipeline(TOKENIZER, {"name": path, "volume": 11, "word": "HEY"}))
    step = config.steps[1]
    assert step.name == path and step.cls.__name__ == "Shouter"
    assert step.params == {"volume": 11, "word": "HEY"}


def test_custom_component_parameters_are_validated(custom_package: str) -> None:
    path = f"{custom_package}.components.Shouter"
    message = config_error(pipeline(TOKENIZER, {"name": path, "volum": 2}))
    assert f"{path} (step 2): unknown parameter 'volum'" in message
    assert "did you mean 'volume'" in message
    assert "out of range" in config_error(pipeline(TOKENIZER, {"name": path, "volume": 12}))
    assert "must be a string" in config_error(pipeline(TOKENIZER, {"name": path, "word": 1}))


def test_custom_component_checks_between_fields(custom_package: str) -> None:
    path = f"{custom_package}.components.Shouter"
    message = config_error(pipeline(TOKENIZER, {"name": path, "volume": 6}))
    assert message == f"<config>: {path} (step 2): a volume over 5 needs an upper-case word"


def test_custom_config_subclass_changes_a_default_and_keeps_the_bounds(custom_package: str) -> None:
    path = f"{custom_package}.components.Whisperer"
    assert load_config(pipeline(TOKENIZER, {"name": path})).steps[1].params == {"volume": 1, "word": "hey"}
    assert "allowed [0, 11]" in config_error(pipeline(TOKENIZER, {"name": path, "volume": 12}))


@pytest.mark.parametrize(
    "suffix, expected",
    [
        ("OldStyle", "OldStyle takes its hyperparameters (volume, word) as __init__ arguments; "
                     "declare them as fields of a nested"),
        ("OldRanges", "OldRanges.ranges is not read: give each bound in its Config field"),
        ("Undecorated", "Undecorated.Config needs the decorator @dataclass(frozen=True, kw_only=True)"),
        ("TakesNothing", "TakesNothing.__init__ does not take its Config; remove __init__"),
    ],
)
def test_old_style_custom_component_says_what_to_change(custom_package: str, suffix: str,
                                                        expected: str) -> None:
    message = config_error(pipeline(TOKENIZER, {"name": f"{custom_package}.components.{suffix}"}))
    assert expected in message
    assert "Writing a custom component" in message or "Undecorated" in message


def test_custom_component_order_is_checked(custom_package: str) -> None:
    message = config_error(pipeline({"name": f"{custom_package}.components.Shouter"}))
    assert "needs tokens" in message


@pytest.mark.parametrize(
    "suffix, expected",
    [
        ("components.Missing", "is not a subclass of nlu_engine.contract.component.Component"),
        ("components.NotAComponent", "is not a subclass of nlu_engine.contract.component.Component"),
        ("nowhere.Shouter", "cannot import module"),
        ("broken.Thing", "cannot import module"),  # a SyntaxError in the user's module
        ("raises.Thing", "boom on import"),  # an error raised while importing
    ],
)
def test_bad_custom_component(custom_package: str, suffix: str, expected: str) -> None:
    message = config_error(pipeline(TOKENIZER, {"name": f"{custom_package}.{suffix}"}))
    assert "pipeline step 2: custom component" in message
    assert expected in message


@pytest.mark.parametrize("name", ["os.system", "subprocess.Popen", "no_such_package_xyz.Thing",
                                  ".Relative", "trailing.", "a..b"])
def test_bad_dotted_paths(name: str) -> None:
    message = config_error(pipeline(TOKENIZER, {"name": name}))
    assert f"custom component '{name}'" in message


@pytest.mark.parametrize("key", ["recipe: default.v1", "assistant_id: placeholder_default", "policies:"])
def test_a_rasa_config_without_pipeline_gets_rasas_default(tmp_path: Path, key: str) -> None:
    """As Rasa 3 does: a config.yml with `pipeline: null` trains Rasa's suggested pipeline
    (fallback, regex and lexical features, 100 epochs), not this project's own default."""
    config = load_config(write(tmp_path, f"{key}\nlanguage: en\npipeline: null\n"))
    suggested = load_config(RASA_DEFAULT_PIPELINE)
    assert [s.name for s in config.steps] == [s.name for s in suggested.steps]
    assert "FallbackClassifier" in [s.name for s in config.steps]
    assert any("Rasa's default for a Rasa config, rasa_suggested.yml" in n for n in config.notices)
