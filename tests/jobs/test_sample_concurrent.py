"""Two `rldata sample` processes over the same tasks at once: every trajectory and verification lands
exactly once, and the job that came second says what it skipped (real store, Ray, vLLM engine)."""

from __future__ import annotations

import json

import pytest

from tests.jobs.test_sample import _arith_tasks, _cli

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


def test_two_sample_jobs_over_the_same_tasks_write_each_row_once(tmp_path):
    from rldata import open_store

    root = tmp_path / "store"
    open_store(root).append("tasks", _arith_tasks(40, seed=3))
    args = ["sample", "--n", "4", "--max-tokens", "8", "--batch-tasks", "4", "--seed", "2", "--engines", "1"]
    # started together, both find all the work to do and race for every batch.  Each starts its own
    # local Ray, as two commands typed in two shells do (sharing one 2-CPU Ray, each job's engine
    # reserves a CPU and neither job's verification tasks could ever be scheduled), and one engine:
    # the race is between the two jobs, not between a job's engines.
    p1 = _cli(root, *args)
    p2 = _cli(root, *args)
    _out1, err1 = p1.communicate(timeout=600)
    _out2, err2 = p2.communicate(timeout=600)
    assert p1.returncode == 0, err1
    assert p2.returncode == 0, err2
    store = open_store(root)
    assert store.sql("SELECT count(*), count(DISTINCT traj_id) FROM trajectories").fetchall()[0] == (160, 160)
    assert store.sql(
        "SELECT count(*), count(DISTINCT (traj_id, verifier, layer)) FROM verifications"
    ).fetchall()[0] == (160, 160)
    assert store.sql("SELECT DISTINCT count(*) FROM trajectories GROUP BY task_id").fetchall() == [(4,)]
    # every trajectory has its verification, and the ledger counts each sample once
    assert (
        store.sql("SELECT count(*) FROM trajectories t ANTI JOIN verifications v USING (traj_id)").fetchall()[
            0
        ][0]
        == 0
    )
    assert store.sql("SELECT count(*), min(n), max(n) FROM passrates").fetchall()[0] == (40, 4, 4)
    assert "skipped" in err1 + err2, (err1, err2)
    # each run's summary counts what it wrote: samples and their verdicts, never the other job's
    # (a run that wrote nothing records 0 correct)
    runs = [json.loads(s) for (s,) in store.sql("SELECT summary FROM runs WHERE kind = 'sample'").fetchall()]
    assert sum(r["samples"] for r in runs) == 160
    assert sum(r["samples"] + r["samples_skipped"] for r in runs) >= 160
    correct = store.sql(
        "SELECT count(*) FROM (SELECT traj_id FROM verifications GROUP BY traj_id HAVING bool_and(passed))"
    ).fetchall()[0][0]
    assert sum(r["correct"] for r in runs) == correct
    assert all(r["correct"] <= r["samples"] for r in runs), runs
