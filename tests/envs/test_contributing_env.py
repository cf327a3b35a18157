"""docs/contributing.md, "Add an environment", followed literally: the recipe's own class (read from
the doc) becomes a module, is registered by `rldata env register` from a spec naming its path, and
drives an episode through the guarded calls the rollout path makes; then the same class through the
recipe's entry point in a real (temporary) installed distribution."""

from __future__ import annotations

import json
import sys
import tomllib

import pytest

from rldata.cli import main
from rldata.envs import EnvSpec, base, guarded_reset, guarded_step, make_env
from tests.plugin_helpers import install_distribution, recipe_blocks, saved


@pytest.fixture
def clean():
    base.REGISTRY.names(plugins=False)  # the built-ins loaded before the snapshot
    restore = saved([base.REGISTRY])
    yield
    restore()
    for mod in ("contrib_asktwice", "mypkg", "mypkg.envs"):
        sys.modules.pop(mod, None)


def _episode(env_name: str) -> list[str]:
    """One episode as the rollout path drives it; returns what happened, turn by turn."""
    spec = EnvSpec(env_name, system_prompt="Answer with a number.", max_turns=4)
    env = make_env(spec)
    opened = guarded_reset(env, {"task_id": "t0", "prompt": "2+2="}, seed=0, timeout_s=5)
    assert opened.finish_reason is None
    assert [m["role"] for m in opened.messages] == ["system", "user"]
    first = guarded_step(env, {"role": "assistant", "content": "5"}, timeout_s=5)
    second = guarded_step(env, {"role": "assistant", "content": "4"}, timeout_s=5)
    return [first.messages[0]["content"], first.finish_reason, second.finish_reason]


def test_the_recipe_environment_by_its_path(tmp_path, monkeypatch, capsys, clean):
    (code,) = recipe_blocks("Add an environment", "python")
    (tmp_path / "contrib_asktwice.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _episode("contrib_asktwice:AskTwice") == ["Check your work, then answer again.", None, "env_done"]
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: twice\nenv: contrib_asktwice:AskTwice\nmax_turns: 2\n")
    code = main(["--store", str(tmp_path / "s"), "env", "register", str(spec), "-f", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["env_id"] == "twice" and row["version"].startswith(
        "1+"
    )  # the class's version, then the spec's hash


def test_the_recipe_environment_through_its_entry_point(tmp_path, monkeypatch, clean):
    (code,) = recipe_blocks("Add an environment", "python")
    (toml,) = recipe_blocks("Add an environment", "toml")
    eps = tomllib.loads(toml)["project"]["entry-points"]
    assert eps == {"rldata.envs": {"ask-twice": "mypkg.envs:AskTwice"}}
    files = {"mypkg/__init__.py": "", "mypkg/envs.py": code}
    monkeypatch.syspath_prepend(str(install_distribution(tmp_path / "site", "mypkg", files, eps)))
    assert "ask-twice" in base.REGISTRY.names()  # listed from metadata, before it is imported
    assert _episode("ask-twice") == ["Check your work, then answer again.", None, "env_done"]
