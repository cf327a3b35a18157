"""The public API (rldata.api): uniform verbs, keyword-only after the store, frozen results, the doc's
example run as it stands, and a CLI that calls exactly these verbs."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rldata
from rldata import api
from rldata.errors import RldataError

ROOT = Path(__file__).resolve().parents[1]
VERBS = (
    *("ingest", "sample", "verify", "filter", "stratify", "train", "export", "report"),
    *("passrates", "cost", "rewards", "judge", "judge_export", "env_register", "env_list", "env_show"),
    *("decontaminate", "dedup", "lint", "blast_radius"),
)


def test_the_package_exports_one_verb_per_stage_even_after_its_namesake_packages_load():
    import rldata.ingest.gym
    import rldata.report.page
    import rldata.rewards.compose
    import rldata.verify.math

    for verb in VERBS:
        assert verb in rldata.__all__
        assert getattr(rldata, verb) is getattr(api, verb), verb
    from rldata.verify import get_verifier  # the package is still reachable

    assert callable(get_verifier)


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_takes_the_store_then_keywords_only(verb):
    params = list(inspect.signature(getattr(api, verb)).parameters.values())
    assert params[0].name == "store" and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in params[1:]), verb
    assert getattr(api, verb).__doc__


def _ledger(store, counts):
    store.append(
        "tasks",
        [
            {
                "task_id": f"t{i}",
                "source": "test",
                "domain": "math",
                "category": f"c{i % 2}",
                "prompt": f"{i}+1=",
                "answer": str(i + 1),
            }
            for i in range(len(counts))
        ],
    )
    store.append(
        "passrates",
        [
            {
                "task_id": f"t{i}",
                "model": "m",
                "params_hash": "p",
                "verifier_key": "math@1",
                "n": 16,
                "n_correct": k,
                "n_error": 0,
                "pass_rate": k / 16,
            }
            for i, k in enumerate(counts)
        ],
    )


def test_results_are_frozen_and_plain(store, tmp_path):
    _ledger(store, [0, 3, 5, 8, 11, 13, 16, 2])
    got = rldata.filter(store, band=(0.1, 0.9), name="band")
    assert got.kept == 6 and got.counts["too_hard"] == 1 and got.counts["too_easy"] == 1
    strat = rldata.stratify(store.root, selection="band", quantiles=2, curriculum=tmp_path / "b.yaml")
    assert (tmp_path / "b.yaml").exists() and sum(b.count for b in strat.curriculum.buckets) == 6
    exp = rldata.export(store, selection="band", format="jsonl", out=tmp_path / "exp")
    assert exp.rows == 6 and all((tmp_path / "exp" / f).exists() for f in exp.files)
    assert exp.manifest["rows"] == 6
    page = rldata.report(store, out=tmp_path / "rep")
    assert Path(page.html).exists() and page.selection == "band"
    for res in (got, strat, exp, page):
        d = res.to_dict()
        json.dumps(d, default=str)  # plain data
        field = dataclasses.fields(res)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(res, field, None)
    with pytest.raises(TypeError):  # nested mappings are read-only too
        exp.manifest["rows"] = 0


def test_ingest_returns_the_summary_and_names_bad_parameters(store, tmp_path):
    res = rldata.ingest(store, sample="arith-heldout")
    assert res.added == 500 and res.to_dict()["added"] == 500 and store.count("tasks") == 500
    for kwargs, field in [
        ({}, "path"),
        ({"sample": "arith", "gym": "chain_sum"}, "path"),
        ({"gym": "chain_sum"}, "n"),
        ({"gym": "chain_sum", "n": 0}, "n"),
        ({"sample": "arith", "n": 3}, "n"),
    ]:
        with pytest.raises(RldataError) as e:
            rldata.ingest(store, **kwargs)
        assert e.value.field == field, kwargs
    assert store.count("tasks") == 500


def test_parameter_errors_name_the_field_and_the_cli_adds_the_flag(store, capsys):
    with pytest.raises(RldataError) as e:
        rldata.report(store, out="x", group_by="color")
    assert e.value.field == "group_by" and "--" not in str(e.value)
    from rldata.cli import main

    code = main(["--store", str(store.root), "report", "-o", "x", "--run", "r", "--group-by", "color"])
    assert code == 1 and "--group-by" in capsys.readouterr().err


# verb -> the CLI module of the command that runs it
COMMANDS = {
    "ingest": "ingest.py",
    "sample": "sample.py",
    "verify": "verify.py",
    "filter": "select_cmds.py",
    "stratify": "select_cmds.py",
    "train": "train.py",
    "export": "interop.py",
    "report": "stats.py",
    "passrates": "sample.py",
    "cost": "cost.py",
    "rewards": "rewards.py",
    "judge": "judge.py",
    "judge_export": "judge.py",
    "env_register": "env.py",
    "env_list": "env.py",
    "env_show": "env.py",
    "decontaminate": "quality.py",
    "dedup": "quality.py",
    "lint": "quality.py",
    "blast_radius": "quality.py",
}


def test_the_cli_commands_call_the_verbs():
    """Each command's module imports its verb from rldata.api and calls it (so runs exactly it)."""
    assert set(COMMANDS) == set(VERBS)
    for verb, mod in COMMANDS.items():
        tree = ast.parse((ROOT / "rldata" / "cli" / mod).read_text())
        local = {
            a.asname or a.name: a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module == "rldata.api"
            for a in n.names
        }
        called = {
            local[n.func.id]
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in local
        }
        assert verb in called, f"rldata/cli/{mod} does not call rldata.api.{verb}"


# ---- the library guards: a predicate is one predicate, from Python as from the CLI --------------
HOSTILE = ("1=1; COPY tasks TO 'stolen.csv'", "1=1; DROP VIEW tasks", "nonsense((")


def _hostile_calls(tmp_path, text):
    """(verb call from Python, the CLI arguments doing the same, the field) for every verb that
    splices a predicate into its SQL."""
    return [
        (lambda st: rldata.passrates(st, where=text), ["passrates", "--where", text], "where"),
        (lambda st: rldata.sample(st, where=text), ["sample", "--where", text], "where"),
        (lambda st: rldata.verify(st, where=text), ["verify", "--where", text], "where"),
        (lambda st: rldata.train(st, where=text), ["train", "--where", text], "where"),
        (lambda st: rldata.train(st, eval={"where": text}), ["train", "--eval-where", text], "eval.where"),
        (
            lambda st: rldata.export(st, rollouts=True, format="jsonl", where=text, out=tmp_path / "x"),
            ["export", "--rollouts", "--format", "jsonl", "--where", text, "--out", str(tmp_path / "x")],
            "where",
        ),
    ]


@pytest.mark.parametrize("text", HOSTILE)
def test_every_verb_refuses_a_hostile_predicate_with_the_clis_one_line_error(store, tmp_path, capsys, text):
    from rldata.cli import main
    from tests.reliability.helpers import fingerprint

    _ledger(store, [3, 8])
    before = fingerprint(store.root)
    for call, argv, field in _hostile_calls(tmp_path, text):
        with pytest.raises(RldataError) as e:
            call(store)
        assert e.value.field == field, argv
        msg = str(e.value)
        # a verb's own check says "where '...' is not a"; a config field's says "where: '...' is not a"
        assert msg.startswith((f"{field} {text!r} is not a ", f"{field}: {text!r} is not a ")), msg
        assert "--" not in msg.replace(text, ""), msg
        code = main(["--store", store.root, *argv])
        out, err = capsys.readouterr()
        flag = "--eval-where" if field == "eval.where" else "--where"
        assert (code, out, err) == (1, "", f"rldata: error: {flag}: {msg}\n"), argv
    assert fingerprint(store.root) == before  # nothing written, no run recorded
    assert not (tmp_path / "x").exists()


def test_a_refused_call_creates_no_store(tmp_path, capsys):
    from rldata.cli import main

    missing = tmp_path / "nowhere"
    for argv in (
        ["train", "--where", HOSTILE[0]],
        ["sample", "--where", HOSTILE[0]],
        ["ingest", "--sample", "arith", "--n", "3"],
        ["ingest"],
    ):
        assert main(["--store", str(missing), *argv]) == 1, argv
        assert not missing.exists(), argv
    capsys.readouterr()


def _doc_example() -> str:
    text = (ROOT / "docs" / "api.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) == 1, "docs/api.md holds one runnable example"
    return blocks[0]


@pytest.mark.slow
def test_the_documented_example_runs_as_written(tmp_path):
    """docs/api.md's loop, unchanged, in a fresh interpreter (its own Ray), on the bundled model."""
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "RAY_ADDRESS": ""}
    env.pop("RAY_ADDRESS")
    proc = subprocess.run(
        [sys.executable, "-c", _doc_example()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    store = rldata.open_store(tmp_path / "api-demo-store", create=False)
    assert store.count("tasks") == 3500
    run = json.loads(store.sql("SELECT to_json(r) FROM (SELECT run_id, status FROM runs) r").fetchall()[0][0])
    assert run["status"] == "done"
    assert (tmp_path / "api-demo-export" / "rldata-manifest.json").exists()
    assert (tmp_path / "api-demo-report" / "training.html").exists()
    assert "rows exported; report:" in proc.stdout


@pytest.mark.parametrize(
    ("kwargs", "argv", "flag"),
    [
        (
            {"verb": "export", "selection": "band", "rollouts": True, "format": "jsonl", "out": "x"},
            ["export", "-s", "band", "--rollouts", "-f", "jsonl", "--out", "x"],
            "--selection",
        ),
        (
            {"verb": "export", "selection": "band", "where": "true", "format": "jsonl", "out": "x"},
            ["export", "-s", "band", "--where", "true", "-f", "jsonl", "--out", "x"],
            "--where",
        ),
        (
            {"verb": "export", "format": "jsonl", "out": "x"},
            ["export", "-f", "jsonl", "--out", "x"],
            "--selection",
        ),
        ({"verb": "ingest", "sample": "arith", "n": 3}, ["ingest", "--sample", "arith", "--n", "3"], "--n"),
        (
            {"verb": "train", "eval": {"heldout": True, "where": "true"}},
            ["train", "--eval-heldout", "--eval-where", "true"],
            "--eval-heldout",
        ),
        (
            {"verb": "train", "curriculum": "b.yaml", "where": "true"},
            ["train", "--curriculum", "b.yaml", "--where", "true"],
            "--where",
        ),
    ],
)
def test_option_combinations_are_checked_by_the_verb(
    store, tmp_path, capsys, monkeypatch, kwargs, argv, flag
):
    """The CLI's line is the verb's message with the flag in front: the check lives once."""
    from rldata.cli import main

    monkeypatch.chdir(tmp_path)
    _ledger(store, [3, 8])
    kwargs = dict(kwargs)
    verb = getattr(rldata, kwargs.pop("verb"))
    with pytest.raises(RldataError) as e:
        verb(store, **kwargs)
    # eval.heldout, a field of the prefixed eval section, is --eval-heldout
    assert flag == "--" + e.value.field.replace("_", "-").replace(".", "-") and "--" not in str(e.value)
    assert main(["--store", store.root, *argv]) == 1
    assert capsys.readouterr().err == f"rldata: error: {flag}: {e.value}\n"
    assert not (tmp_path / "x").exists()
