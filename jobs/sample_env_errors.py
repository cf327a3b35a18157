"""A resumed sampling job draws again the episodes that ended in ``env_error``.

An ``env_error`` is the environment's failure (a server killed or down mid-episode, a hang, garbage),
not the model's outcome: once the environment is back, those episodes should be played.  At the
start of a job, this job's stored episodes (its model, parameters, seed and each task's environment
version) that ended in ``env_error`` are deleted, their verifications first, so the usual resume
finds those sample indices missing and draws them again under the same ids.  The ledger rows of
every task in the job are rebuilt from what is stored when the job ends, as always.

Order for a kill between the two deletes: an episode whose verifications are gone but whose row
stays is still ``env_error``, so the next start deletes it.
"""

from __future__ import annotations

import pyarrow as pa

from rldata.console import log

__all__ = ["drop_env_errors"]


def _lit(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def drop_env_errors(
    store, task_ids: list[str], *, model: str, params_hash: str, seed: int | None, ekeys: dict[str, str]
) -> int:
    """Delete this job's ``env_error`` episodes (module docstring); how many there were."""
    ids = [t for t in task_ids if t in ekeys]
    if not ids:
        return 0
    seed_cond = "t.seed IS NULL" if seed is None else f"t.seed = {int(seed)}"
    rows = store.sql(
        "SELECT t.traj_id FROM trajectories t JOIN _ids USING (task_id) "
        "WHERE t.finish_reason = 'env_error' AND t.model = $1 AND t.params_hash = $2 "
        f"AND {seed_cond} AND coalesce(t.env_id || '@' || t.env_version, '') = _ids.ekey",
        params=[model, params_hash],
        extra={
            "_ids": pa.table(
                {
                    "task_id": pa.array(ids, pa.string()),
                    "ekey": pa.array([ekeys[t] for t in ids], pa.string()),
                }
            )
        },
    ).fetchall()
    if not rows:
        return 0
    inlist = ", ".join(_lit(r[0]) for r in rows)
    store.delete("verifications", f"traj_id IN ({inlist})")
    store.delete("trajectories", f"traj_id IN ({inlist}) AND finish_reason = 'env_error'")
    log(f"{len(rows)} episode(s) that ended in env_error earlier are drawn again")
    return len(rows)
