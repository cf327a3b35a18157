"""``rldata env register|list|show`` against a real store; bad specs leave the store unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rldata import open_store
from rldata.cli import main
from rldata.envs import EnvSpec
from rldata.envs.catalog import get_env, spec_of


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "s")


def _spec(tmp_path, text, name="spec.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


CALC = "name: calc\nenv: calculator\nconfig: {max_calls: 2}\nmax_turns: 4\nsystem_prompt: Use <calc>.\n"


def test_register_list_show(root, tmp_path, capsys):
    code, out, err = run(capsys, "--store", root, "env", "register", _spec(tmp_path, CALC), "-f", "json")
    assert code == 0, err
    row = json.loads(out)[0]
    assert row["env_id"] == "calc" and row["kind"] == "calculator" and row["version"].startswith("1+")
    assert json.loads(row["spec"])["max_turns"] == 4 and "registered: calc@1+" in err
    # the same spec again adds nothing; a changed limit is a new version of the same environment
    code, _, err = run(capsys, "--store", root, "env", "register", _spec(tmp_path, CALC))
    assert code == 0 and "already registered" in err
    code, _, _ = run(
        capsys,
        "--store",
        root,
        "env",
        "register",
        _spec(tmp_path, CALC.replace("max_turns: 4", "max_turns: 5"), "v2.yaml"),
    )
    assert code == 0
    code, _, _ = run(
        capsys, "--store", root, "env", "register", _spec(tmp_path, "env: single-turn\n", "st.yaml")
    )
    assert code == 0
    code, out, _ = run(capsys, "--store", root, "env", "list", "-f", "json")
    rows = json.loads(out)
    assert [(r["env_id"], r["registered"]) for r in rows] == [
        ("calc", True),
        ("calc", True),
        ("calculator", False),  # bundled, registered on first use: listed before that
        ("calculator-tools", False),
        ("code-feedback", False),
        ("reasoning-gym", False),
        ("single-turn", True),
    ]
    assert len({r["version"] for r in rows[:2]}) == 2
    code, out, _ = run(capsys, "--store", root, "env", "show", "calc", "-f", "csv")
    assert code == 0 and out.count("\ncalc,calculator,") == 2
    stored = get_env(open_store(root), "calc").to_dicts()[0]
    assert spec_of(stored) == EnvSpec(
        "calculator", config={"max_calls": 2}, max_turns=4, system_prompt="Use <calc>."
    )


def test_a_class_path_registers(root, tmp_path, capsys, monkeypatch):
    (tmp_path / "my_env_mod.py").write_text(
        "from rldata.envs import BaseEnv, StepResult\n"
        "class Echo(BaseEnv):\n"
        "    name, version = 'echo', '7'\n"
        "    def step(self, msg):\n"
        "        return StepResult([], True, {})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run(
        capsys, "--store", root, "env", "register", _spec(tmp_path, "env: my_env_mod:Echo\n"), "-f", "json"
    )
    assert code == 0, err
    row = json.loads(out)[0]
    assert (row["env_id"], row["kind"], row["version"][:2]) == ("Echo", "my_env_mod:Echo", "7+")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "env: no_such_mod_q:Env\n",
            "environment 'no_such_mod_q:Env' does not import: No module named 'no_such_mod_q'",
        ),
        (
            "env: nope\n",
            "unknown environment 'nope'; known: calculator, calculator-tools, code-feedback, openenv, openenv-mcp, reasoning-gym, single-turn",  # then any toys other tests registered, then verifiers
        ),
        ("env: calculator\nmax_turns: 0\n", "spec field 'max_turns': expected a positive integer, got 0"),
        ("env: calculator\nstep_timeout_s: fast\n", "spec field 'step_timeout_s'"),
        ("env: calculator\ntools: [calc]\n", "spec field 'tools': unknown"),
        ("max_turns: 3\n", "spec field 'env': missing"),
        ("env: calculator\nconfig: {max_calls: -1}\n", "environment 'calculator' rejected its config"),
        ("env: calculator\nname: 'a b'\n", "spec field 'name': 'a b' is not a name"),
        ("- just\n- a list\n", "expected a mapping of spec fields, got list"),
        ("env: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_specs_are_one_line_errors_and_the_store_is_unchanged(root, tmp_path, capsys, text, message):
    before = open_store(root).versions()
    code, out, err = run(capsys, "--store", root, "env", "register", _spec(tmp_path, text))
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rldata: error: ") and message in lines[0], err
    assert open_store(root).versions() == before


def test_show_an_unknown_environment(root, capsys):
    open_store(root)  # an existing store (reading a missing one is its own error)
    code, out, err = run(capsys, "--store", root, "env", "show", "nope")
    assert (
        code != 0
        and out == ""
        and err.strip()
        == "rldata: error: unknown environment 'nope'; registered: (none); "
        "bundled: calculator, calculator-tools, code-feedback, reasoning-gym, single-turn"
    )


def test_bundled_environments_are_listed_and_shown_before_first_use(root, capsys):
    """Unregistered, with the version first use registers (the same row, created_at aside)."""
    from rldata.rollout import bind_envs

    open_store(root)
    code, out, _ = run(capsys, "--store", root, "env", "list", "-f", "json")
    listed = {r["env_id"]: r for r in json.loads(out)}
    assert code == 0 and {"calculator", "code-feedback", "single-turn"} <= set(listed)
    assert all(not r["registered"] and r["created_at"] is None for r in listed.values())
    code, out, _ = run(capsys, "--store", root, "env", "show", "calculator", "-f", "json")
    (shown,) = json.loads(out)
    assert code == 0 and not shown["registered"] and json.loads(shown["spec"])["system_prompt"] == "<tools>"
    assert open_store(root).count("environments") == 0  # listing registers nothing
    bind_envs(open_store(root), [{"task_id": "t"}], env="calculator")  # first use registers it
    (row,) = get_env(open_store(root), "calculator").to_dicts()
    assert row["registered"] and (row["version"], row["spec"]) == (shown["version"], shown["spec"])


def test_a_missing_spec_file(root, tmp_path, capsys):
    code, _, err = run(capsys, "--store", root, "env", "register", str(tmp_path / "absent.yaml"))
    assert code != 0 and "absent.yaml: cannot read" in err


def test_a_class_path_that_does_not_import_says_how_to_make_it_importable(
    root, tmp_path, capsys, monkeypatch
):
    import os
    import subprocess
    import sys

    work = tmp_path / "work"
    work.mkdir()
    (work / "my_cwd_env.py").write_text(
        "from rldata.envs import BaseEnv, StepResult\n"
        "class Echo(BaseEnv):\n"
        "    name, version = 'echo', '1'\n"
        "    def step(self, msg):\n"
        "        return StepResult([], True, {})\n"
    )
    spec = _spec(work, "env: my_cwd_env:Echo\n")
    monkeypatch.chdir(work)  # the module is here, but the working directory is not on sys.path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(work))])
    code, _, err = run(capsys, "--store", root, "env", "register", spec)
    assert code == 1 and err.count("\n") == 1
    assert "No module named 'my_cwd_env' ('my_cwd_env' is in the working directory" in err
    assert "run with PYTHONPATH=." in err
    spec2 = _spec(work, "env: elsewhere_mod_q:Env\n", "other.yaml")
    code, _, err = run(capsys, "--store", root, "env", "register", spec2)
    assert code == 1 and "make 'elsewhere_mod_q' importable: pip install" in err
    # the hint works: the same command with PYTHONPATH=. registers it
    env = {**os.environ, "PYTHONPATH": "."}
    p = subprocess.run(
        # the console script: `python -m` would put the working directory on the path by itself
        [str(Path(sys.executable).parent / "rldata"), "--store", str(root), "env", "register", spec],
        check=False,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0 and "registered: Echo@1+" in p.stderr, p.stderr


def test_a_misspelt_env_names_the_registered_one(root, tmp_path, capsys):
    """issue 45: `--env mycalcc` says which registered environment it probably means."""
    code, _, err = run(
        capsys, "--store", root, "env", "register", _spec(tmp_path, CALC.replace("calc\n", "mycalc\n", 1))
    )
    assert code == 0, err
    open_store(root).append("tasks", [{"task_id": "t", "source": "u", "domain": "math", "prompt": "1+1="}])
    code, _, err = run(capsys, "--store", root, "sample", "--env", "mycalcc", "--n", "1")
    assert code == 1 and err.startswith("rldata: error: --env: environment 'mycalcc' is not registered"), err
    assert err.rstrip().endswith("did you mean 'mycalc'?"), err
    assert open_store(root).sql("SELECT count(*) FROM runs").fetchall() == [(0,)]
