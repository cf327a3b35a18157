"""Upgrading a store written by the previous release with schema version 2 (tests/data/stores/v2,
made by commit ``80fd9e1``) to version 3: episode columns on trajectories, stopping-rule columns
on passrates."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from rldata import open_store, schemas
from rldata.errors import RldataError
from rldata.ledger.core import recompute_passrates
from rldata.ledger.select import Band, filter_store
from rldata.store.migrate import STEPS, table_version

V2 = Path(__file__).parents[1] / "data" / "stores" / "v2"
NEW = {
    "trajectories": {"num_turns": {None}, "num_tool_calls": {None}, "env_info": {None}},
    "passrates": {
        "stop_rule": {"fixed"},
        "alpha": {None},
        "confidence": {None},
        "n_max": {None},
        "band": {None},
    },
}
# columns later versions renamed (passrates 4, selections 2): their values stay, under the new name
RENAMED = {
    "passrates": {"verifier_version": "verifier_key"},
    "selections": {"verifier_version": "verifier_key"},
}


@pytest.fixture
def v2(tmp_path) -> Path:
    root = tmp_path / "v2"
    shutil.copytree(V2, root)
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


def test_the_fixture_is_a_version_2_store(v2):
    for name in ("tasks", "trajectories", "passrates"):
        assert table_version(DeltaTable(str(v2 / name))) == 2
    assert "num_turns" not in DeltaTable(str(v2 / "trajectories")).schema().to_arrow().names
    assert "stop_rule" not in DeltaTable(str(v2 / "passrates")).schema().to_arrow().names


def test_opening_a_v2_store_upgrades_and_keeps_every_value(v2):
    before = {
        n: _renamed(n, DeltaTable(str(v2 / n)).to_pyarrow_table())
        for n in schemas.TABLES
        if (v2 / n).exists()
    }
    assert before["trajectories"].num_rows == 8 and before["passrates"].num_rows == 4
    store = open_store(v2)
    for name, ts in schemas.TABLES.items():
        assert table_version(store.table(name)) == ts.version, name
        if name not in before:  # a table added after this release: created empty on open
            assert store.count(name) == 0, name
            continue
        after = store.read(name).to_arrow()
        assert sorted(after.column_names) == sorted(ts.columns), name
        old = before[name].column_names
        assert _rows(after.select(old), ts.key) == _rows(before[name], ts.key), name
        for col, want in NEW.get(name, {}).items():
            assert set(after.column(col).to_pylist()) == want, (name, col)
    # the calculator rows kept their environment
    assert sorted(set(store.read("passrates")["env_version"].to_list())) == ["", "calculator@1"]
    versions = store.versions()
    assert open_store(v2).versions() == versions  # reopening commits nothing


def test_an_upgraded_v2_store_takes_episode_rows_and_rebuilds_its_ledger(v2):
    store = open_store(v2)
    t = store.read("trajectories").to_dicts()[0]
    row = {
        **t,
        "traj_id": "episode-1",
        "num_turns": 2,
        "num_tool_calls": 1,
        "env_info": '{"tool_calls": 1}',
        "messages": [
            {"role": "user", "content": "1+2="},
            {"role": "assistant", "content": "<calc>1+2</calc>"},
            {"role": "tool", "content": "3"},
            {"role": "assistant", "content": "3"},
        ],
        "finish_reason": "env_done",
    }
    del row["created_at"]
    store.append("trajectories", [row])
    got = store.sql(
        "SELECT num_turns, num_tool_calls, len(messages) FROM trajectories WHERE traj_id = 'episode-1'"
    )
    assert got.fetchall() == [(2, 1, 4)]
    p = store.read("passrates").to_dicts()[0]
    rows = recompute_passrates(
        store,
        model=p["model"],
        params_hash=p["params_hash"],
        verifier_keys={p["verifier_key"]},
        task_ids=[p["task_id"]],
    )
    assert rows and all(r["stop_rule"] == "fixed" for r in rows)
    res, _ = filter_store(
        store,
        name="after-v3",
        band=Band(0.0, 1.0),
        min_n=1,
        model=p["model"],
        params_hash=p["params_hash"],
        domain="math",
        dry_run=True,
    )
    assert res is not None


def test_a_v3_bump_without_its_step_is_caught(v2, monkeypatch):
    monkeypatch.delitem(STEPS, ("passrates", 2))
    with pytest.raises(RldataError, match="table 'passrates': upgrade left columns missing: stop_rule"):
        open_store(v2)
    assert table_version(DeltaTable(str(v2 / "passrates"))) == 2
