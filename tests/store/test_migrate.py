"""Upgrading a store written by the previous release (tests/data/stores/v1, made by `commit `7d330d5``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from rldata import open_store, schemas
from rldata.errors import RldataError
from rldata.ledger.core import passrate_row, recompute_passrates
from rldata.ledger.select import Band, filter_store
from rldata.store.migrate import STEPS, table_version

V1 = Path(__file__).parents[1] / "data" / "stores" / "v1"
CHANGED = {
    "tasks": ("env_id", "env_version"),
    "trajectories": ("env_id", "env_version", "num_turns", "num_tool_calls", "env_info"),
    "passrates": ("env_version", "alpha", "confidence", "n_max", "band"),
}
FILLED = {
    ("passrates", "env_version"): {""},
    ("passrates", "stop_rule"): {"fixed"},
}  # required columns' defaults
# columns later versions renamed (passrates 4, selections 2): their values stay, under the new name
RENAMED = {
    "passrates": {"verifier_version": "verifier_key"},
    "selections": {"verifier_version": "verifier_key"},
}


@pytest.fixture
def v1(tmp_path) -> Path:
    root = tmp_path / "v1"
    shutil.copytree(V1, root)
    return root


def _rows(table: pa.Table, key) -> list[dict]:
    rows = table.to_pylist()
    for r in rows:  # trajectories 5 gave each message tool_calls and tool_call_id: null in old turns
        if r.get("messages"):
            assert all(
                m.pop("tool_calls", None) is None and m.pop("tool_call_id", None) is None
                for m in r["messages"]
            )
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in key))


def _renamed(name: str, table: pa.Table) -> pa.Table:
    return table.rename_columns([RENAMED.get(name, {}).get(c, c) for c in table.column_names])


# tables added after this release
ADDED_SINCE_V1 = (
    *("env_profiles", "env_validations", "env_checks", "predictions", "sample_predictions"),
    *("eval_items", "contamination", "lint_findings", "near_duplicates"),
)


def test_the_fixture_is_a_version_1_store(v1):
    for name in schemas.TABLES:
        if name not in ADDED_SINCE_V1:
            assert table_version(DeltaTable(str(v1 / name))) == 1
    assert "env_id" not in DeltaTable(str(v1 / "tasks")).schema().to_arrow().names


def test_opening_a_v1_store_upgrades_every_table_and_keeps_every_value(v1):
    before = {
        n: _renamed(n, DeltaTable(str(v1 / n)).to_pyarrow_table())
        for n in schemas.TABLES
        if (v1 / n).exists()
    }
    assert before["tasks"].num_rows == 4 and before["trajectories"].num_rows == 8
    store = open_store(v1)
    for name, ts in schemas.TABLES.items():
        dtable = store.table(name)
        assert table_version(dtable) == ts.version, name
        if name not in before:  # a table added after this release: created empty on open
            assert store.count(name) == 0, name
            continue
        after = store.read(name).to_arrow()
        assert sorted(after.column_names) == sorted(ts.columns), name
        old_cols = before[name].column_names
        # every old row, every old value, unchanged (Polars reads strings as views: compare as Python)
        assert _rows(after.select(old_cols), ts.key if name != "passrates" else ts.key[:-1]) == _rows(
            before[name], ts.key if name != "passrates" else ts.key[:-1]
        ), name
        for col in CHANGED.get(name, ()) + (("stop_rule",) if name == "passrates" else ()):
            values = set(after.column(col).to_pylist())
            assert values == FILLED.get((name, col), {None}), (name, col)
    # reopening is a no-op: no further commits
    versions = store.versions()
    assert open_store(v1).versions() == versions


def test_an_upgraded_store_takes_new_rows_with_and_without_environments(v1):
    store = open_store(v1)
    base = store.read("tasks").row(0, named=True)
    new = [
        {
            **{k: base[k] for k in ("source", "domain", "prompt", "answer")},
            "task_id": "t-env",
            "env_id": "calculator",
            "env_version": "1",
        },
        {**{k: base[k] for k in ("source", "domain", "prompt", "answer")}, "task_id": "t-plain"},
    ]
    assert store.append("tasks", new, dedupe=True) == 2
    got = {r["task_id"]: r for r in store.read("tasks").to_dicts()}
    assert (got["t-env"]["env_id"], got["t-env"]["env_version"]) == ("calculator", "1")
    assert got["t-plain"]["env_id"] is None and len(got) == 6
    traj = store.read("trajectories").row(0, named=True)
    store.append("trajectories", [{**traj, "traj_id": "x-env", "env_id": "calculator", "env_version": "1"}])
    assert store.count("trajectories") == 9

    # the ledger: the same task under an environment version is a separate row, never merged
    tid = base["task_id"]
    row = passrate_row(
        tid, model="tiny", params_hash="ph0", verifier_key="math@1", n=4, n_correct=4, n_error=0
    )
    store.upsert("passrates", [{**row, "env_version": "calculator@1"}])
    assert store.upsert("passrates", [row]) == 1  # replaces the old plain row (env_version ''), adds none
    pr = store.sql(f"SELECT env_version, n FROM passrates WHERE task_id = '{tid}' ORDER BY 1").fetchall()
    assert pr == [("", 4), ("calculator@1", 4)]
    assert store.count("passrates") == 5


def test_the_ledger_and_filter_read_an_upgraded_store(v1):
    store = open_store(v1)
    rows = recompute_passrates(store, model="tiny", params_hash="ph0", verifier_keys=["math@1"])
    assert [(r["n"], r["n_correct"]) for r in rows] == [(2, 1)] * 4
    assert store.count("passrates") == 4  # recomputed rows land on the upgraded rows' keys
    result, decisions = filter_store(
        store,
        name="mid2",
        band=Band(0.2, 0.8),
        model="tiny",
        params_hash="ph0",
        verifier_key="math@1",
        min_n=2,
    )
    assert result.counts["in_band"] == 4 and sum(result.counts.values()) == 4
    assert decisions.height == 4


def test_the_filter_refuses_to_pool_two_environment_versions(v1):
    store = open_store(v1)
    tid = store.read("tasks")["task_id"][0]
    row = passrate_row(
        tid,
        model="tiny",
        params_hash="ph0",
        verifier_key="math@1",
        n=2,
        n_correct=2,
        n_error=0,
        env_version="calculator@1",
    )
    store.upsert("passrates", [row])
    with pytest.raises(RldataError, match="several environment versions"):
        filter_store(
            store,
            name="mixed",
            band=Band(0.2, 0.8),
            model="tiny",
            params_hash="ph0",
            verifier_key="math@1",
            min_n=2,
        )


def test_an_interrupted_upgrade_resumes(v1):
    # a process killed after a step's column commit but before the version was recorded
    STEPS[("tasks", 1)](DeltaTable(str(v1 / "tasks")))
    assert table_version(DeltaTable(str(v1 / "tasks"))) == 1
    store = open_store(v1)
    assert table_version(store.table("tasks")) == schemas.get("tasks").version
    assert store.count("tasks") == 4


def test_a_store_newer_than_the_code_is_refused(v1):
    dtable = DeltaTable(str(v1 / "tasks"))
    dtable.alter.set_table_description(f"rldata.schema_version={schemas.get('tasks').version + 1}")
    with pytest.raises(RldataError, match="newer than this rldata"):
        open_store(v1)


def test_several_processes_opening_one_old_store_all_succeed(v1):
    code = "import sys; from rldata import open_store; open_store(sys.argv[1]); print('ok')"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(v1)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-300:] for _, err in results]
    store = open_store(v1)
    assert all(table_version(store.table(n)) == ts.version for n, ts in schemas.TABLES.items())
    assert store.count("passrates") == 4 and store.read("passrates")["env_version"].to_list() == [""] * 4
    assert [r["n"] for r in store.read("passrates").to_dicts()] == [2] * 4


def test_a_version_bump_without_its_step_is_caught(v1, monkeypatch):
    monkeypatch.delitem(STEPS, ("tasks", 1))
    with pytest.raises(RldataError, match="table 'tasks': upgrade left columns missing: env_id, env_version"):
        open_store(v1)
    assert table_version(DeltaTable(str(v1 / "tasks"))) == 1  # not recorded as upgraded: fixed code retries


def test_writers_leaving_out_env_version_get_the_empty_default(tmp_path):
    store = open_store(tmp_path / "s")
    row = passrate_row("t1", model="m", params_hash="p", verifier_key="v@1", n=1, n_correct=1, n_error=0)
    del row["env_version"]
    store.upsert("passrates", pa.Table.from_pylist([row]))  # the Arrow path
    store.upsert("passrates", [{**row, "task_id": "t2"}])  # the rows path
    assert store.read("passrates").sort("task_id")["env_version"].to_list() == ["", ""]
    assert store.upsert("passrates", [row]) == 1 and store.count("passrates") == 2  # same key: replaced
