"""Upgrading a store written by the previous release (tests/data/stores/v5, made by commit ``526609d``,
whose trajectories' messages were ``{role, content}``) to trajectories 5: messages gain ``tool_calls``
and ``tool_call_id`` (null in every old turn), every other cell stays, and new rows with tool calls
land next to the old ones, readable by Polars and by SQL."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from rldata import open_store, schemas
from rldata.store.migrate import STEPS, table_version

V5 = Path(__file__).parents[1] / "data" / "stores" / "v5"


@pytest.fixture
def v5(tmp_path) -> Path:
    root = tmp_path / "v5"
    shutil.copytree(V5, root)
    return root


def _before(root: Path, name: str) -> pl.DataFrame:
    return pl.from_arrow(DeltaTable(str(root / name)).to_pyarrow_table())


def test_the_fixture_is_a_version_4_trajectories_table_without_tool_fields(v5):
    dt = DeltaTable(str(v5 / "trajectories"))
    assert table_version(dt) == 4
    turn = pa.schema(dt.schema().to_arrow()).field("messages").type.value_type
    assert [turn.field(i).name for i in range(turn.num_fields)] == ["role", "content"]


def test_opening_adds_the_tool_fields_and_keeps_every_cell(v5):
    before = {n: _before(v5, n) for n in schemas.TABLES if (v5 / n).exists()}
    store = open_store(v5)
    for name, ts in schemas.TABLES.items():
        assert table_version(store.table(name)) == ts.version, name
    traj = store.read("trajectories").sort("traj_id")
    old = before["trajectories"].sort("traj_id")
    assert traj.height == old.height == 8
    assert traj.drop("messages").to_dicts() == old.select(traj.drop("messages").columns).to_dicts()
    for new_msgs, old_msgs in zip(traj["messages"].to_list(), old["messages"].to_list()):
        if old_msgs is None:
            assert new_msgs is None
            continue
        assert [{"role": m["role"], "content": m["content"]} for m in new_msgs] == old_msgs
        assert all(m["tool_calls"] is None and m["tool_call_id"] is None for m in new_msgs)
    for name in ("tasks", "verifications", "passrates", "runs", "environments"):
        after = store.read(name)
        assert (
            after.sort(after.columns[0]).to_dicts()
            == before[name].select(after.columns).sort(after.columns[0]).to_dicts()
        ), name


def test_sql_reads_the_new_fields_of_old_rows_as_null(v5):
    store = open_store(v5)
    rows = store.sql(
        "SELECT messages[3].content, messages[3].tool_calls, messages[4].tool_call_id FROM trajectories "
        "WHERE messages IS NOT NULL ORDER BY traj_id"
    ).fetchall()
    assert len(rows) == 4 and all(r[0].startswith("<calc>") and r[1] is None and r[2] is None for r in rows)


def test_new_rows_with_tool_calls_land_next_to_old_ones(v5):
    store = open_store(v5)
    row = store.read("trajectories").sort("traj_id").row(0, named=True)
    msgs = [
        {"role": "user", "content": "What is 2+3?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c00010000", "name": "calculate", "arguments": '{"expression": "2+3"}'}],
        },
        {"role": "tool", "content": "5", "tool_call_id": "c00010000"},
        {"role": "assistant", "content": "5"},
    ]
    store.append("trajectories", [{**row, "traj_id": "new-1", "messages": msgs}])
    got = store.read("trajectories").filter(pl.col("traj_id") == "new-1")["messages"].to_list()[0]
    assert got[1]["tool_calls"][0]["arguments"] == '{"expression": "2+3"}'
    assert got[2]["tool_call_id"] == "c00010000" and got[3]["tool_calls"] is None
    [(name, call)] = store.sql(
        "SELECT messages[2].tool_calls[1].name, messages[3].tool_call_id FROM trajectories WHERE traj_id = 'new-1'"
    ).fetchall()
    [(n_old,)] = store.sql("SELECT count(*) FROM trajectories WHERE messages IS NOT NULL").fetchall()
    assert (name, call) == ("calculate", "c00010000") and n_old == 5


def test_the_step_is_idempotent(v5):
    dt = DeltaTable(str(v5 / "trajectories"))
    STEPS[("trajectories", 4)](dt)
    dt.update_incremental()
    version = dt.version()
    STEPS[("trajectories", 4)](dt)  # a second run (a process killed before recording the version)
    dt.update_incremental()
    assert dt.version() == version
    store = open_store(v5)
    assert store.count("trajectories") == 8
