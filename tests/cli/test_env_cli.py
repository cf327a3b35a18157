"""``rldata env register|list|show`` against a real store; bad specs leave the store unchanged."""

from __future__ import annotations

import json

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
    assert [r["env_id"] for r in rows] == ["calc", "calc", "single-turn"]
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
            "unknown environment 'nope'; known: calculator, code-feedback, reasoning-gym, single-turn",
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
        and err.strip() == "rldata: error: unknown environment 'nope'; registered: (none)"
    )


def test_a_missing_spec_file(root, tmp_path, capsys):
    code, _, err = run(capsys, "--store", root, "env", "register", str(tmp_path / "absent.yaml"))
    assert code != 0 and "absent.yaml: cannot read" in err
