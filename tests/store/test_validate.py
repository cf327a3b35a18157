"""rldata.store.validate.conform: rows, Arrow and Polars in; exactly the table's schema out, or a SchemaError."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pyarrow as pa
import pytest

from rldata.errors import SchemaError
from rldata.schemas import get as table_schema
from rldata.store.validate import conform

TASKS = table_schema("tasks")
TRAJ = table_schema("trajectories")


def task(i: int = 0, **kw) -> dict:
    return {
        "task_id": f"t{i}",
        "source": "s",
        "domain": "math",
        "prompt": f"{i}+1=",
        "answer": str(i + 1),
        **kw,
    }


def traj(i: int = 0, **kw) -> dict:
    return {
        "traj_id": f"x{i}",
        "task_id": "t0",
        "run_id": "r",
        "sample_idx": i,
        "model": "m",
        "policy_version": 0,
        "params_hash": "h",
        **kw,
    }


def test_rows_become_the_exact_schema_with_created_at_filled():
    before = dt.datetime.now(dt.UTC)
    table = conform(TASKS, [task(0), task(1, category="add")])
    assert table.schema.equals(TASKS.schema)
    assert table.column("category").to_pylist() == [None, "add"]
    stamps = table.column("created_at").to_pylist()
    assert all(before <= t <= dt.datetime.now(dt.UTC) for t in stamps)


def test_a_single_mapping_is_one_row():
    assert conform(TASKS, task(3)).num_rows == 1


@pytest.mark.parametrize(
    ("rows", "row", "field", "reason"),
    [
        ([task(0), task(1, bogus=1)], 1, "bogus", "unknown field"),
        (
            [task(0), {k: v for k, v in task(1).items() if k != "prompt"}],
            1,
            "prompt",
            "missing required field",
        ),
        ([task(0, prompt=None)], 0, "prompt", "missing required field"),
        ([task(0), task(1), task(2, answer=42)], 2, "answer", "expected string, got int 42"),
        ([task(0, messages=[{"role": "user", "content": 5}])], 0, "messages", "expected"),
        ([task(0, created_at="yesterday")], 0, "created_at", "expected"),
    ],
)
def test_row_errors_name_table_row_and_field(rows, row, field, reason):
    with pytest.raises(SchemaError) as ei:
        conform(TASKS, rows)
    e = ei.value
    assert (e.table, e.row, e.field) == ("tasks", row, field)
    assert reason in e.reason
    assert str(e).startswith(f"table 'tasks', row {row}, field '{field}': ")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (1.5, "expected integer, got float"),
        (True, "expected integer, got bool"),
        ("3", "expected integer, got str"),
    ],
)
def test_no_silent_conversion_into_integers(value, reason):
    with pytest.raises(SchemaError, match=reason) as ei:
        conform(TRAJ, [traj(0), traj(1, sample_idx=value)])
    assert (ei.value.row, ei.value.field) == (1, "sample_idx")


def test_floats_accept_ints_but_not_bools():
    assert conform(TRAJ, [traj(0, reward=1)]).column("reward").to_pylist() == [1.0]
    with pytest.raises(SchemaError, match="expected number, got bool"):
        conform(TRAJ, [traj(0, reward=True)])


def test_row_offset_shifts_the_reported_row():
    with pytest.raises(SchemaError) as ei:
        conform(TASKS, [task(0, prompt=None)], row_offset=500)
    assert ei.value.row == 500


def test_non_mapping_row_is_refused():
    with pytest.raises(SchemaError, match="expected a record, got list"):
        conform(TASKS, [task(0), ["not", "a", "dict"]])


def test_arrow_input_is_cast_when_widening_is_safe():
    table = pa.table(
        {
            "traj_id": ["a"],
            "task_id": ["t"],
            "run_id": ["r"],
            "sample_idx": pa.array([3], pa.int8()),
            "model": ["m"],
            "policy_version": pa.array([1], pa.int32()),
            "params_hash": ["h"],
            "prompt": pa.array(["p"], pa.large_string()),
        }
    )
    out = conform(TRAJ, table)
    assert out.schema.equals(TRAJ.schema)
    assert out.column("sample_idx").to_pylist() == [3]
    assert out.column("created_at").null_count == 0


def test_arrow_errors_name_the_field_and_the_row():
    base = {
        "traj_id": ["a", "b"],
        "task_id": ["t", "t"],
        "run_id": ["r", "r"],
        "model": ["m", "m"],
        "policy_version": [0, 0],
        "params_hash": ["h", "h"],
    }
    with pytest.raises(SchemaError, match="field 'sample_idx': expected int32, got column of type string"):
        conform(TRAJ, pa.table({**base, "sample_idx": ["1", "2"]}))
    with pytest.raises(SchemaError) as ei:  # int64 -> int32 overflow in the second row
        conform(TRAJ, pa.table({**base, "sample_idx": pa.array([1, 2**40], pa.int64())}))
    assert (ei.value.row, ei.value.field) == (1, "sample_idx")
    with pytest.raises(SchemaError) as ei:
        conform(TRAJ, pa.table({**base, "sample_idx": [0, 1], "model": ["m", None]}))
    assert (ei.value.row, ei.value.field, ei.value.reason) == (1, "model", "null in required field")
    with pytest.raises(SchemaError, match="field 'extra': unknown field"):
        conform(TRAJ, pa.table({**base, "sample_idx": [0, 1], "extra": [1, 2]}))
    with pytest.raises(SchemaError, match="field 'run_id': missing required field"):
        conform(TRAJ, pa.table({k: v for k, v in base.items() if k != "run_id"} | {"sample_idx": [0, 1]}))


def test_polars_frames_and_record_batches_are_accepted():
    df = pl.DataFrame([task(0), task(1)])
    assert conform(TASKS, df).num_rows == 2
    batch = pa.RecordBatch.from_pylist([task(0)])
    assert conform(TASKS, batch).column("task_id").to_pylist() == ["t0"]


def test_unsupported_input_type():
    with pytest.raises(TypeError, match="cannot write int"):
        conform(TASKS, 5)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_rewards_and_scores_must_be_finite_on_every_input_path(bad):
    rows = [traj(0, reward=1.0), traj(1, reward=None), traj(2, reward=bad)]
    for data in (rows, pl.DataFrame(rows), pl.DataFrame(rows).to_arrow()):
        with pytest.raises(SchemaError) as e:
            conform(TRAJ, data)
        assert (e.value.table, e.value.row, e.value.field) == ("trajectories", 2, "reward")
        assert "must be a finite number" in str(e.value)
    score = {
        "traj_id": "x0",
        "task_id": "t0",
        "verifier": "math",
        "verifier_version": "1",
        "layer": "answer",
        "score": bad,
    }
    with pytest.raises(SchemaError, match="'score': must be a finite number"):
        conform(table_schema("verifications"), [score])
    assert conform(TRAJ, rows[:2]).column("reward").to_pylist() == [1.0, None]
