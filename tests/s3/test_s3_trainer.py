"""The trainer's write-back (the functions its driver calls each step) into an s3:// store."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "trainer"))
from test_writeback import SPEC, _group, _verifier_for, _write

from rldata.trainer import writeback as wb


def test_write_back_resume_cleanup_and_ledger_on_s3(s3_store):
    for run in ("a", "b"):
        for step in (1, 2, 3):
            _write(
                s3_store, run, step, step - 1, [_group(f"t{step}", "easy", [True, False], run=run, step=step)]
            )
    assert s3_store.sql("SELECT count(*), count(DISTINCT traj_id) FROM trajectories").fetchall() == [(12, 12)]
    assert s3_store.count("verifications") == 12 and s3_store.count("metrics") == 6
    # a resumed run drops what it wrote after its last checkpoint, once
    gone = wb.discard_after(s3_store, "a", 1, keep_versions_upto=0)
    assert gone == {"verifications": 4, "trajectories": 4, "metrics": 2, "passrates": 2}
    assert wb.discard_after(s3_store, "a", 1, keep_versions_upto=0) == dict.fromkeys(gone, 0)
    left = s3_store.sql(
        "SELECT run_id, max(step), count(*) FROM trajectories GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert left == [("a", 1, 2), ("b", 3, 6)]
    # the pooled ledger row of a version that generated two steps
    pending = wb.pending_outcomes(s3_store, "a", "tiny@abc+a/v0", 2)
    new = wb.outcomes([_group("t1", "easy", [True, True], run="a", step=2)], _verifier_for)
    wb.write_ledger(s3_store, pending + new, model="tiny@abc+a/v0", params_hash=SPEC.params_hash, run_id="a")
    assert s3_store.sql("SELECT n, n_correct FROM passrates WHERE model = 'tiny@abc+a/v0'").fetchall() == [
        (4, 3)
    ]
