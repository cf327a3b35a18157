"""Pass-rate history of a run (rldata.ledger.history.history): the ledger rows the trainer writes per
policy version, against the recount from trajectories and verifications (HISTORY_SQL).

    python benchmarks/bench_pass_history.py [--steps 400] [--prompts 64] [--group 8] [--tasks 4000]

A synthetic training run (``steps`` policy versions, ``prompts`` groups of ``group`` samples per step
over ``tasks`` tasks, one verification per sample) is written through ``Store.append`` /
``Store.upsert`` into benchmarks/_work, with the ledger rows the trainer would write for it.  Each
source is then read ``--repeat`` times (best time reported); the two frames must be equal.
ratio = trajectories seconds / ledger seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"


def make_store(steps: int, prompts: int, group: int, tasks: int) -> Path:
    import duckdb

    from rldata import open_store

    root = WORK / f"history-{steps}x{prompts}x{group}-{tasks}"
    if (root / "_complete").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    store = open_store(root)
    n = steps * prompts * group
    rel = duckdb.sql(f"""
        SELECT md5('traj' || i) AS traj_id,
               'task' || lpad(((hash(i // {group}) % {tasks}))::VARCHAR, 6, '0') AS task_id,
               'run0' AS run_id, (i % {group})::INTEGER AS sample_idx,
               'base@r+run0/v' || (i // ({prompts * group})) AS model,
               (i // ({prompts * group}))::BIGINT AS policy_version, 'p0' AS params_hash,
               (i // {group})::BIGINT AS seed,  -- unique per group, as the trainer's request seeds
               (1 + i // ({prompts * group}))::BIGINT AS step,
               'x' AS completion, 4::INTEGER AS completion_tokens, 'stop' AS finish_reason,
               hash(i * 7) % 10 < 4 AS passed
        FROM range(0, {n}) t(i)""").to_arrow_table()
    traj = rel.drop_columns(["passed"]).append_column("reward", rel.column("passed").cast("float64"))
    ver = duckdb.sql(
        "SELECT traj_id, task_id, passed, passed::DOUBLE AS score, 'math' AS verifier, '1' AS verifier_version, "
        "'answer' AS layer FROM rel"
    ).to_arrow_table()
    store.append("trajectories", traj)
    store.append("verifications", ver)
    from rldata.ledger.core import passrate_row

    counts = duckdb.sql(
        "SELECT task_id, model, count(*) AS n, sum(passed::INT) AS k FROM rel GROUP BY ALL"
    ).fetchall()
    rows = [
        passrate_row(
            t, model=m, params_hash="p0", verifier_key="math@1", n=n, n_correct=k, n_error=0, run_id="run0"
        )
        for t, m, n, k in counts
    ]
    store.upsert("passrates", rows)
    (root / "_complete").write_text("ok\n")
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from rldata import open_store
    from rldata.ledger.history import history

    store = open_store(make_store(a.steps, a.prompts, a.group, a.tasks))
    out, frames = {}, {}
    for source in ("ledger", "trajectories"):
        best = float("inf")
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            frames[source] = history(store, "run0", source=source)
            best = min(best, time.perf_counter() - t0)
        out[source] = best
    assert frames["ledger"].equals(frames["trajectories"]), "the two sources disagree"
    res = {
        "samples": a.steps * a.prompts * a.group,
        "history_rows": frames["ledger"].height,
        "ledger_s": round(out["ledger"], 4),
        "trajectories_s": round(out["trajectories"], 4),
        "ratio": round(out["trajectories"] / out["ledger"], 1),
    }
    print(json.dumps(res))


if __name__ == "__main__":
    main()
