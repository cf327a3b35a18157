"""Upgrading a store written by the previous release (tests/data/stores/v3, made by commit ``243eedc``:
passrates schema version 3, selections version 1) to passrates 4 / selections 2: the ``name@version``
column ``verifier_version`` of both is renamed ``verifier_key`` (a rewrite of the rows, not a metadata
commit), while ``verifications.verifier_version`` (the bare version) stays."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from rldata import open_store, schemas
from rldata.errors import RldataError
from rldata.ledger.core import passrate_row, recompute_passrates
from rldata.ledger.select import Band, filter_store, selection_rules
from rldata.store.migrate import STEPS, table_version

V3 = Path(__file__).parents[1] / "data" / "stores" / "v3"
RENAMED = {
    "passrates": {"verifier_version": "verifier_key"},
    "selections": {"verifier_version": "verifier_key"},
}


@pytest.fixture
def v3(tmp_path) -> Path:
    root = tmp_path / "v3"
    shutil.copytree(V3, root)
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


def _names(root: Path, name: str) -> list[str]:
    return DeltaTable(str(root / name)).schema().to_arrow().names


def test_the_fixture_is_a_version_3_store(v3):
    assert table_version(DeltaTable(str(v3 / "passrates"))) == 3
    assert table_version(DeltaTable(str(v3 / "trajectories"))) == 3
    assert table_version(DeltaTable(str(v3 / "selections"))) == 1
    for name in ("passrates", "selections"):
        assert "verifier_version" in _names(v3, name) and "verifier_key" not in _names(v3, name)


def test_opening_a_v3_store_renames_the_key_and_keeps_every_value(v3):
    before = {
        n: _renamed(n, DeltaTable(str(v3 / n)).to_pyarrow_table())
        for n in schemas.TABLES
        if (v3 / n).exists()
    }
    assert before["passrates"].num_rows == 4 and before["selections"].num_rows == 4
    store = open_store(v3)
    for name, ts in schemas.TABLES.items():
        assert table_version(store.table(name)) == ts.version, name
        if name not in before:  # a table added after this release: created empty on open
            assert store.count(name) == 0, name
            continue
        after = store.read(name).to_arrow()
        assert sorted(after.column_names) == sorted(ts.columns), name
        # every row, every value: the same cells, the renamed ones under their new name
        assert after.num_rows == before[name].num_rows, name
        assert _rows(after.select(before[name].column_names), ts.key) == _rows(before[name], ts.key), name
    for name in ("passrates", "selections"):
        assert "verifier_version" not in store.read(name).columns
        assert set(store.read(name)["verifier_key"].to_list()) == {"math@1"}
    # the bare version of verifications is not a key: it keeps its name and values
    assert set(store.read("verifications")["verifier_version"].to_list()) == {"1"}
    # the adaptive-N values of the calculator rows came through the rewrite
    seq = store.read("passrates").filter(stop_rule="sequential")
    assert seq.height == 2 and set(seq["env_version"]) == {"calculator@1"} and set(seq["n_max"]) == {8}
    versions = store.versions()
    assert open_store(v3).versions() == versions  # reopening commits nothing


def test_an_upgraded_v3_store_writes_reads_and_filters_under_the_new_name(v3):
    store = open_store(v3)
    p = store.read("passrates").sort("task_id").to_dicts()[0]
    # a write with the old column name is refused: the schema has one name for the key
    with pytest.raises(RldataError, match="verifier_version"):
        store.upsert(
            "passrates",
            [{**{k: v for k, v in p.items() if k != "verifier_key"}, "verifier_version": "math@1"}],
        )
    row = passrate_row(
        p["task_id"],
        model="tiny",
        params_hash="ph0",
        verifier_key="math@2",
        n=4,
        n_correct=4,
        n_error=0,
        env_version=p["env_version"],
    )
    assert store.upsert("passrates", [row]) == 1 and store.count("passrates") == 5
    got = store.sql("SELECT verifier_key, count(*) FROM passrates GROUP BY 1 ORDER BY 1").fetchall()
    assert got == [("math@1", 4), ("math@2", 1)]
    rows = recompute_passrates(store, model="tiny", params_hash="ph0", verifier_keys=["math@1"])
    assert sorted((r["n"], r["n_correct"]) for r in rows) == [(2, 1)] * 4
    assert store.count("passrates") == 5  # recomputed rows land on the renamed rows' keys
    plain = store.read("passrates").filter(env_version="", verifier_key="math@1")["task_id"].to_list()
    with pytest.raises(RldataError, match="several verifier_keys"):
        filter_store(store, name="x", band=Band(0.2, 0.8), model="tiny", params_hash="ph0", min_n=2)
    store.delete("passrates", "env_version <> ''")  # one environment per slice: filter the plain tasks
    result, _ = filter_store(
        store,
        name="mid4",
        band=Band(0.2, 0.8),
        model="tiny",
        params_hash="ph0",
        verifier_key="math@1",
        min_n=2,
    )
    assert result.key["verifier_key"] == "math@1" and result.counts["in_band"] == 2
    sel = store.read("selections").filter(selection="mid4")
    assert set(sel["verifier_key"]) == {"math@1"} and sorted(
        sel.filter(decision="keep")["task_id"]
    ) == sorted(plain)


def test_a_selection_made_before_the_upgrade_reads_its_pinned_ledger_version(v3):
    # selection 'mid' pins passrates version 1, written before the rename: read under its old name
    store = open_store(v3)
    assert store.version("passrates") > 1  # the rename is a later commit
    calc = set(store.read("passrates").filter(env_version="calculator@1")["task_id"])
    rules = selection_rules(store, "mid")
    assert rules.height == 4 and set(rules["reason"]) == {"in_band"}
    assert {r["task_id"]: r["decided_by"] for r in rules.to_dicts()} == {
        t: "sequential" if t in calc else "fixed" for t in rules["task_id"]
    }


def test_an_interrupted_rename_resumes(v3):
    # a process killed after the rewrite commit but before the version was recorded
    STEPS[("passrates", 3)](DeltaTable(str(v3 / "passrates")))
    assert table_version(DeltaTable(str(v3 / "passrates"))) == 3 and "verifier_key" in _names(v3, "passrates")
    store = open_store(v3)
    assert table_version(store.table("passrates")) == schemas.get("passrates").version
    assert store.count("passrates") == 4 and set(store.read("passrates")["verifier_key"]) == {"math@1"}


def test_a_row_appended_during_the_rename_is_not_left_behind(v3):
    # an old writer commits between the rename's read and its commit: the rewrite must not land
    dtable = DeltaTable(str(v3 / "selections"))
    old = DeltaTable(str(v3 / "selections")).to_pyarrow_table().slice(0, 1)
    write_deltalake(str(v3 / "selections"), old.set_column(1, "task_id", pa.array(["late"])), mode="append")
    with pytest.raises(Exception, match="(?i)concurrent|commit"):
        STEPS[("selections", 1)](dtable)  # its snapshot predates the append
    store = open_store(v3)  # the upgrade re-reads and renames all five rows
    sel = store.read("selections")
    assert sel.height == 5 and set(sel["verifier_key"]) == {"math@1"}


def test_an_empty_table_is_renamed_too(tmp_path, v3):
    store_dir = tmp_path / "empty"
    shutil.copytree(v3, store_dir)
    DeltaTable(str(store_dir / "selections")).delete()
    store = open_store(store_dir)
    assert store.count("selections") == 0 and "verifier_key" in store.read("selections").columns
    assert table_version(store.table("selections")) == schemas.get("selections").version


def test_several_processes_opening_one_v3_store_all_succeed(v3):
    code = "import sys; from rldata import open_store; open_store(sys.argv[1]); print('ok')"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(v3)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err[-300:] for _, err in results]
    store = open_store(v3)
    assert all(table_version(store.table(n)) == ts.version for n, ts in schemas.TABLES.items())
    assert store.count("passrates") == 4 and store.count("selections") == 4
    assert set(store.read("passrates")["verifier_key"]) == {"math@1"}


def test_a_v4_bump_without_its_step_is_caught(v3, monkeypatch):
    monkeypatch.delitem(STEPS, ("passrates", 3))
    with pytest.raises(RldataError, match="table 'passrates': upgrade left columns missing: verifier_key"):
        open_store(v3)
    assert table_version(DeltaTable(str(v3 / "passrates"))) == 3
