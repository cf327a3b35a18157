"""The environment registry, class-path resolution and EnvSpec validation."""

from __future__ import annotations

import sys

import pytest

from rldata.envs import REGISTRY, EnvSpec, env_key, make_env, resolve
from rldata.envs.calculator import CalculatorEnv
from rldata.envs.single_turn import SingleTurnEnv
from rldata.errors import RldataError


def test_builtin_names_resolve():
    assert resolve("single-turn") is SingleTurnEnv and resolve("calculator") is CalculatorEnv
    assert {"single-turn", "calculator"} <= set(REGISTRY)
    assert env_key(make_env(EnvSpec("calculator"))) == "calculator@1"


def test_a_class_path_resolves(tmp_path, monkeypatch):
    (tmp_path / "my_envs.py").write_text(
        "from rldata.envs import BaseEnv, StepResult\n"
        "class Echo(BaseEnv):\n"
        "    name, version = 'echo', '3'\n"
        "    def step(self, msg):\n"
        "        return StepResult([{'role': 'user', 'content': msg['content']}], True, {})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    env = make_env(EnvSpec("my_envs:Echo"))
    assert env.step({"role": "assistant", "content": "hi"}).observations == [
        {"role": "user", "content": "hi"}
    ]
    sys.modules.pop("my_envs", None)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("no_such_module_xyz:Env", "environment 'no_such_module_xyz:Env' does not import: No module named"),
        (
            "json:NoSuchClass",
            "environment 'json:NoSuchClass' does not import: module 'json' has no attribute 'NoSuchClass'",
        ),
        ("json:dumps", "environment 'json:dumps' has no reset() method"),
        (
            "no-such-env",
            "unknown environment 'no-such-env'; known: calculator, calculator-tools, code-feedback, openenv, openenv-mcp, reasoning-gym, single-turn",  # then any toys other tests registered, then verifiers
        ),
    ],
)
def test_bad_names_and_paths_are_one_line_errors(env, message):
    with pytest.raises(RldataError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        resolve(env)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"env": ""}, "spec field 'env'"),
        ({"env": "mod:"}, "is not a 'module:Class' path"),
        ({"env": "calculator", "max_turns": 0}, "spec field 'max_turns': expected a positive integer, got 0"),
        ({"env": "calculator", "max_turns": True}, "spec field 'max_turns'"),
        ({"env": "calculator", "max_total_tokens": 1.5}, "spec field 'max_total_tokens'"),
        ({"env": "calculator", "step_timeout_s": float("inf")}, "spec field 'step_timeout_s'"),
        ({"env": "calculator", "step_timeout_s": -1}, "spec field 'step_timeout_s'"),
        ({"env": "calculator", "config": [1]}, "spec field 'config': expected a mapping, got list"),
        ({"env": "calculator", "config": {"x": object()}}, "not JSON-serializable"),
        ({"env": "calculator", "tools": []}, "spec field 'tools': unknown"),
        ({"max_turns": 3}, "spec field 'env': missing"),
        ({"env": "calculator", "system_prompt": 3}, "spec field 'system_prompt'"),
    ],
)
def test_invalid_specs_are_refused(spec, message):
    with pytest.raises(RldataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EnvSpec.from_dict(spec)


def test_a_bad_config_is_refused_when_the_env_is_made():
    with pytest.raises(
        RldataError, match="environment 'calculator' rejected its config: ValueError: max_calls"
    ):
        make_env(EnvSpec("calculator", config={"max_calls": 0}))
    with pytest.raises(RldataError, match="takes no config keys, got: colour"):
        make_env(EnvSpec("single-turn", config={"colour": "red"}))


def test_spec_round_trips_through_json():
    spec = EnvSpec("calculator", config={"max_calls": 2}, max_turns=4, system_prompt="Use <calc>.")
    import json

    assert EnvSpec.from_dict(json.loads(spec.to_json())) == spec


def test_a_class_gets_the_spec_limits_it_names_in_spec_fields(tmp_path, monkeypatch):
    (tmp_path / "my_limited_envs.py").write_text(
        "from rldata.envs import BaseEnv\n"
        "class Sized(BaseEnv):\n"
        "    name, version = 'sized', '1'\n"
        "    spec_fields = ('step_timeout_s', 'max_turns')\n"
        "    def __init__(self, *, step_timeout_s, max_turns, **kw):\n"
        "        super().__init__(**kw)\n"
        "        self.got = (step_timeout_s, max_turns)\n"
        "class Greedy(BaseEnv):\n"
        "    name, version = 'greedy', '1'\n"
        "    spec_fields = ('system_prompt',)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert make_env(EnvSpec("my_limited_envs:Sized", step_timeout_s=7, max_turns=3)).got == (7, 3)
    # a class that does not ask gets nothing extra (calculator would refuse an unknown key)
    assert make_env(EnvSpec("calculator", step_timeout_s=7)).max_calls == 4
    with pytest.raises(RldataError, match="config key 'max_turns' is a spec field; set it at the top level"):
        make_env(EnvSpec("my_limited_envs:Sized", config={"max_turns": 2}))
    with pytest.raises(RldataError, match="spec_fields names 'system_prompt', not one of"):
        make_env(EnvSpec("my_limited_envs:Greedy"))
    sys.modules.pop("my_limited_envs", None)
