"""rldata.verbs from Python: passrates, cost, judge / judge_export and the env verbs return frozen
results holding what their commands print, and name a bad parameter (the CLI adds the flag)."""

from __future__ import annotations

import dataclasses
import json

import polars as pl
import pytest

import rldata
from rldata.cli import main
from rldata.errors import ConfigError, RldataError
from tests.reliability.helpers import fingerprint
from tests.test_api import _ledger
from tests.test_cost import _traj


def _cli_json(capsys, *argv) -> list[dict]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _frozen(res) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(res, dataclasses.fields(res)[0].name, None)
    json.dumps(res.to_dict(), default=str)


# ---- passrates ----------------------------------------------------------------------------------
def test_passrates_is_what_the_command_prints(store, capsys):
    _ledger(store, [0, 4, 8, 16])
    res = rldata.passrates(store.root, k=(1, 4))
    _frozen(res)
    assert res.k == (1, 4) and res.rows.height == 4
    assert res.rows.columns[-3:] == ["early_stop", "pass@1", "pass@4"]
    assert res.rows.filter(pl.col("task_id") == "t2")["pass@1"].item() == pytest.approx(0.5)
    assert res.to_dict()["rows"] == _cli_json(
        capsys, "--store", store.root, "passrates", "--k", "1,4", "-f", "json"
    )
    default = rldata.passrates(store)
    assert (
        default.k == (1, 4, 16) and "pass@16" in default.rows.columns
    )  # the command's default is the verb's
    got = rldata.passrates(store, where="t.category = 'c0' AND p.n_correct > 0", limit=5)
    assert got.rows["task_id"].to_list() == ["t2"]
    assert rldata.passrates(store, model="other").rows.height == 0
    assert rldata.passrates(store, limit=1).rows.height == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"k": (0,)}, "k"),
        ({"k": ()}, "k"),
        ({"k": (1.5,)}, "k"),
        ({"limit": -5}, "limit"),
        ({"where": " "}, "where"),
    ],
)
def test_passrates_names_a_bad_parameter(store, kwargs, field):
    _ledger(store, [1])
    with pytest.raises(RldataError) as e:
        rldata.passrates(store, **kwargs)
    assert e.value.field == field and field in str(e.value) and "--" not in str(e.value)


# ---- cost ---------------------------------------------------------------------------------------
def test_cost_prices_a_budget_without_a_store(capsys):
    res = rldata.cost(params="7B", tokens=1e9, gpu="h100")
    _frozen(res)
    assert res.gpu_hours == pytest.approx(29.49, abs=0.01) and res.warnings == ()
    assert res.to_dict()["rows"] == _cli_json(
        capsys, "cost", "--params", "7B", "--tokens", "1e9", "--gpu", "h100", "-f", "json"
    )
    gen = rldata.cost(params=7e9, tokens="1e9", gpu="h100", kind="generate", gpus=4)
    assert gen.rows["mfu"].item() == 0.1 and gen.rows["wall_hours"].item() == pytest.approx(gen.gpu_hours / 4)
    moe = rldata.cost(params="47B", name="Mixtral-8x7B", tokens="1e9", gpu="h100")
    assert len(moe.warnings) == 1 and "active_params was not given" in moe.warnings[0]
    assert (
        rldata.cost(params="47B", active_params="13B", name="Mixtral-8x7B", tokens="1e9", gpu="h100").warnings
        == ()
    )


def test_cost_prices_stored_runs(store, capsys):
    store.append("trajectories", [_traj("r1", f"t{t}", i) for t in range(3) for i in range(4)], dedupe=True)
    res = rldata.cost(store, params="7B", gpu="h100", run_id="r1", scale_tasks="3k")
    assert res.rows["scenario"].to_list() == ["run r1", "run r1 x1000 (3000 tasks)"]
    assert res.rows["tokens"].to_list() == [180.0, 180_000.0]
    cli = _cli_json(
        capsys,
        "--store",
        store.root,
        "cost",
        "--params",
        "7B",
        "--gpu",
        "h100",
        "--run",
        "r1",
        "--scale-tasks",
        "3k",
        "-f",
        "json",
    )
    assert res.to_dict()["rows"] == cli


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"params": "seven", "tokens": 1}, "params"),
        ({"params": "7B", "active_params": "8B", "tokens": 1}, "active_params"),
        ({"params": "7B", "tokens": 1, "kind": "infer"}, "kind"),
        ({"params": "7B"}, "tokens"),
        ({"params": "7B", "run_id": "r1", "gpu": "h100"}, "store"),
        ({"params": "7B", "tokens": 1, "gpu": "h100", "gpus": 0}, "gpus"),
        ({"params": "7B", "tokens": 1, "gpu": "z80"}, "gpu"),
    ],
)
def test_cost_names_a_bad_parameter(kwargs, field):
    with pytest.raises(RldataError) as e:
        rldata.cost(**kwargs)
    assert e.value.field == field and "--" not in str(e.value)


# ---- environments -------------------------------------------------------------------------------
CALC = {"name": "calc", "env": "calculator", "config": {"max_calls": 2}, "max_turns": 4}


def test_env_verbs_register_list_and_show(store, tmp_path, capsys):
    res = rldata.env_register(store, spec=CALC)
    _frozen(res)
    assert (res.env_id, res.kind, res.new) == ("calc", "calculator", True) and res.version.startswith("1+")
    assert json.loads(res.spec)["max_turns"] == 4
    spec_file = tmp_path / "calc.yaml"
    spec_file.write_text("name: calc\nenv: calculator\nconfig: {max_calls: 2}\nmax_turns: 4\n")
    again = rldata.env_register(store.root, spec=spec_file)  # the same spec, from its file
    assert again.new is False and again.version == res.version
    rldata.env_register(store, spec={**CALC, "max_turns": 5})
    listed = rldata.env_list(store)
    # the registered versions, then the bundled environments not yet used (listed before first use)
    ids = listed.rows["env_id"].to_list()
    assert ids[:2] == ["calc", "calc"] and "calc" not in ids[2:] and "calculator" in ids[2:], ids
    cli = _cli_json(capsys, "--store", store.root, "env", "list", "-f", "json")
    assert [(r["env_id"], r["version"]) for r in cli] == listed.rows.select("env_id", "version").rows()
    shown = rldata.env_show(store, name="calc")
    assert shown.rows.height == 2 and len({json.loads(s)["max_turns"] for s in shown.rows["spec"]}) == 2
    with pytest.raises(RldataError, match="unknown environment 'nope'; registered: calc"):
        rldata.env_show(store, name="nope")


def test_a_bad_env_spec_leaves_the_store_unchanged(store):
    before = fingerprint(store.root)
    with pytest.raises(RldataError, match="spec field 'max_turns'"):
        rldata.env_register(store, spec={"env": "calculator", "max_turns": 0})
    assert fingerprint(store.root) == before


# ---- the generative judge -----------------------------------------------------------------------
def test_judge_export_returns_the_manifest(store, tmp_path, capsys):
    from rldata.rewards.judge import PAIRWISE, judge_rows, parse_pairwise
    from tests.rewards.test_judge import _seed_store

    _seed_store(store)
    verdicts = [parse_pairwise(t) for t in ("5 is right\nVERDICT: B", "16 is right\nVERDICT: A")]
    rows = judge_rows(
        verdicts, ["t1/1", "t2/0"], ["t1", "t2"], verifier=PAIRWISE, version="v1:m", others=["t1/0", "t2/1"]
    )
    store.append("verifications", rows)
    res = rldata.judge_export(store, out=tmp_path / "prefs", kinds="pairwise")
    _frozen(res)
    assert res.rows == 2 and res.files == ("train.jsonl",) and res.manifest["rows_by_kind"] == {"pairwise": 2}
    assert pl.read_ndjson(tmp_path / "prefs" / "train.jsonl").height == 2
    pq = rldata.judge_export(store, out=tmp_path / "pq", format="parquet", split="dev")
    assert pq.files == ("dev.parquet",) and pq.rows == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"mode": "listwise"}, "mode"), ({"limit": 0}, "limit"), ({"max_tokens": 0}, "max_tokens")],
)
def test_judge_checks_its_parameters_before_an_engine_starts(tmp_path, kwargs, field):
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError) as e:
        rldata.judge(missing, **kwargs)
    assert e.value.field == field
    assert not missing.exists()  # refused before the store was created


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.ray
def test_judge_through_the_real_engine(store, engine_pools):
    """The bundled tiny model cannot follow the judge's template: every verdict is an error row
    (never a score), and judging again skips what is judged.  The verb borrows the session's warm
    engine of a 64-token context (its own engine's verdicts are the same: tests/engine/test_pool.py)."""
    from rldata.configs.sampling import VllmConfig
    from rldata.engine.pool import PoolKey
    from tests.rewards.test_judge import _seed_store

    pool = engine_pools.pool_for(PoolKey.of(None, max_model_len=64, vllm=VllmConfig()), engines=1)
    _seed_store(store)
    res = rldata.judge(store, run_id="r1", max_tokens=8, max_model_len=64, engines=pool)
    _frozen(res)
    assert (res.mode, res.verifier, res.added) == ("pointwise", "genrm", 6)
    assert res.verdicts.to_dicts() == [{"passed": None, "n": 6, "errors": 6}]
    assert rldata.judge(store, run_id="r1", max_tokens=8, engines=pool).added == 0  # the context follows
