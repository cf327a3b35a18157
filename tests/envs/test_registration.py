"""rldata.envs.registration.EnvRegisterConfig: `rldata env register`'s options, declared once, checked
in the library; ``rldata.env_register`` from Python meets the CLI's one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rldata
from rldata.cli import main
from rldata.envs.registration import EnvRegisterConfig
from rldata.errors import ConfigError


@pytest.mark.parametrize(
    ("kw", "argv", "flag"),
    [
        (
            {"openenv": "http://127.0.0.1:1", "openenv_image": "img"},
            ["--openenv", "http://127.0.0.1:1", "--openenv-image", "img"],
            "--openenv-image",
        ),
        (
            {"openenv": "http://127.0.0.1:1", "verifiers": "m"},
            ["--openenv", "http://127.0.0.1:1", "--verifiers", "m"],
            "--verifiers",
        ),
        (
            {"openenv": "http://127.0.0.1:1", "observation_role": "system"},
            ["--openenv", "http://127.0.0.1:1", "--observation-role", "system"],
            "--observation-role",
        ),
        ({"verifiers": "m", "max_turns": 0}, ["--verifiers", "m", "--max-turns", "0"], "--max-turns"),
    ],
)
def test_a_python_call_meets_the_clis_one_line_error_and_nothing_is_created(tmp_path, capsys, kw, argv, flag):
    root = tmp_path / "s"
    with pytest.raises(ConfigError) as e:
        rldata.env_register(root, spec="x", **kw)
    assert "--" not in str(e.value) and "\n" not in str(e.value)
    assert main(["--store", str(root), "env", "register", "x", *argv]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"rldata: error: {flag}: {e.value}\n", err
    assert not root.exists()


def test_two_sources_name_both():
    with pytest.raises(ConfigError) as e:
        EnvRegisterConfig(spec="x", openenv="http://h:1", openenv_image="img")
    assert e.value.field == "openenv_image" and "not openenv and openenv_image" in str(e.value)


def test_a_verifiers_spec_is_built_in_the_library_from_the_options(tmp_path, monkeypatch):
    """--verifiers ID: NAME registers as the verifiers v1 environment with the limits given, the
    env config and what the loaded environment says (its package, the harness rldata plays)."""
    pytest.importorskip("verifiers.v1")
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # tests/envs/vf1_sums.py
    cfg = EnvRegisterConfig(
        spec="vf", verifiers="vf1_sums", max_turns=3, pass_reward=0.5, env_config='{"taskset": {"size": 2}}'
    )
    assert cfg.env_config == {"taskset": {"size": 2}}
    assert cfg.spec_data() == {
        "name": "vf",
        "env": "verifiers",
        "config": {
            "id": "vf1_sums",
            "env_config": {"taskset": {"size": 2}},
            "pass_reward": 0.5,
            "package": None,
            "harness": "vf1_sums",
        },
        "max_turns": 3,
        "max_total_tokens": 4096,
        "step_timeout_s": 10.0,
    }
    with pytest.raises(ConfigError, match="env_config goes with verifiers"):
        EnvRegisterConfig(spec="x", openenv="http://h:1", env_config={"a": 1})
    # a spec file: nothing built, the file is read by the verb
    assert EnvRegisterConfig(spec="calc.yaml").spec_data() is None


def test_the_verb_registers_a_spec_mapping_or_file_as_before(tmp_path):
    spec = {"name": "calc", "env": "calculator", "max_turns": 4}
    res = rldata.env_register(tmp_path / "s", spec=spec)
    assert res.new and res.env_id == "calc" and json.loads(res.spec)["max_turns"] == 4
    path = tmp_path / "calc.yaml"
    path.write_text("name: calc\nenv: calculator\nmax_turns: 4\n")
    again = rldata.env_register(tmp_path / "s", spec=path)
    assert not again.new and again.version == res.version


def test_the_register_decorator_is_not_shadowed_by_this_module():
    """``from rldata.envs import register`` (the class decorator the docs show) still gives the
    decorator once this module, rldata env register's options, is imported: a submodule named
    ``register`` would replace the package's attribute on its first import."""
    import importlib
    import subprocess
    import sys

    import rldata.envs

    assert callable(rldata.envs.register) and not isinstance(rldata.envs.register, type(rldata))
    code = (
        "import rldata.cli.env, rldata.envs.registration\n"
        "from rldata.envs import register\n"
        "assert callable(register), register\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert importlib.util.find_spec("rldata.envs.register") is None
