"""The component contract's typed config: one frozen dataclass per component, checked when built."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import pytest

from nlu_engine.contract.component import Component, ComponentConfig, build_config, param
from nlu_engine.contract.errors import ConfigError


class Echo(Component):
    @dataclass(frozen=True, kw_only=True)
    class Config(Component.Config):
        words: list[str] = param(["hi"])
        times: int = param(1, low=1, high=3)
        mode: Literal["loud", "soft"] = "soft"
        weights: dict[str, float] = param({"a": 0.5}, low=0, high=1)

        def validate(self) -> None:
            super().validate()
            if self.mode == "loud" and not self.words:
                raise ConfigError("mode 'loud' needs at least one word in 'words'")

    config: Config


class LoudEcho(Echo):
    @dataclass(frozen=True, kw_only=True)
    class Config(Echo.Config):
        mode: Literal["loud", "soft"] = "loud"
        times: int = 2  # declared again for the default only: Echo's bounds still apply


@dataclass(frozen=True, kw_only=True)
class NeedsPath(ComponentConfig):
    path: str
    depth: int = 1


def test_keyword_parameters_build_the_config() -> None:
    echo = Echo(times=2)
    assert isinstance(echo.config, Echo.Config)
    assert echo.config.times == 2 and echo.config.mode == "soft"
    assert echo.get_config() == {"words": ["hi"], "times": 2, "mode": "soft", "weights": {"a": 0.5}}
    assert vars(echo) == {"config": echo.config}


def test_a_ready_config_is_stored_as_given() -> None:
    config = Echo.Config(times=3)
    assert Echo(config).config is config
    with pytest.raises(TypeError, match="not both"):
        Echo(config, times=2)
    with pytest.raises(TypeError, match=r"takes a Echo\.Config, not a Component\.Config"):
        Echo(Component.Config())


def test_list_and_mapping_defaults_are_not_shared() -> None:
    first, second = Echo(), Echo()
    assert first.config.words == second.config.words
    assert first.config.words is not second.config.words
    assert first.config.weights is not second.config.weights


def test_the_config_is_frozen_and_hyperparameters_cannot_be_shadowed() -> None:
    echo = Echo()
    with pytest.raises(dataclasses.FrozenInstanceError):
        echo.config.times = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match=r"Echo.times is a hyperparameter: set it in the config"):
        echo.times = 2  # type: ignore[attr-defined]
    echo.config = dataclasses.replace(echo.config, times=2)
    assert echo.config.times == 2
    echo.learned_ = 1  # other attributes are set as usual
    assert echo.learned_ == 1


@pytest.mark.parametrize(
    "params, message",
    [
        ({"time": 2}, "Echo: unknown parameter 'time' (did you mean 'times'?); allowed: mode, times,"),
        ({"times": "2"}, "Echo: parameter 'times' must be an integer, got '2'"),
        ({"times": True}, "Echo: parameter 'times' must be an integer, got True"),
        ({"mode": "shout"}, "Echo: parameter 'mode' must be one of 'loud', 'soft', got 'shout'"),
        ({"times": 4}, "Echo: parameter 'times' = 4 is out of range; allowed [1, 3]"),
        ({"weights": {"a": 2}}, "Echo: parameter 'weights' = {'a': 2} is out of range; allowed [0, 1]"),
        ({"mode": "loud", "words": []}, "Echo: mode 'loud' needs at least one word in 'words'"),
    ],
)
def test_bad_parameters_are_one_line_errors(params: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Echo(**params)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_a_subclass_changes_defaults_and_keeps_the_parents_bounds() -> None:
    loud = LoudEcho()
    assert (loud.config.mode, loud.config.times) == ("loud", 2)
    assert list(loud.get_config()) == list(Echo().get_config())  # same parameters, same order
    with pytest.raises(ConfigError, match=r"LoudEcho: parameter 'times' = 5 .* allowed \[1, 3\]"):
        LoudEcho(times=5)
    with pytest.raises(ConfigError, match="needs at least one word"):  # the parent's validate runs
        LoudEcho(words=[])


def test_a_required_parameter_is_named() -> None:
    assert build_config(NeedsPath, {"path": "x"}).as_dict() == {"path": "x", "depth": 1}
    with pytest.raises(ConfigError, match=r"^parameter 'path' is required$"):
        build_config(NeedsPath, {})


def test_a_component_without_parameters() -> None:
    assert Component().get_config() == {}
    with pytest.raises(ConfigError, match="unknown parameter 'x'; allowed: none"):
        Component(x=1)
