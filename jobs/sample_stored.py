"""What the store already holds for a sampling job (its plan): samples stored and verified per task,
the counts of the job's ledger slice, and the adaptive rule's decisions on them.  A sample's id
(:func:`traj_id`) is here too: a re-run finds the samples an earlier run stored by it."""

from __future__ import annotations

import hashlib

import polars as pl
import pyarrow as pa

from rldata.adaptive.rules import decide_frame
from rldata.ledger.core import recompute_passrates
from rldata.store.core import Store

__all__ = ["decide_counts", "first_missing", "job_counts", "stored_samples", "stored_status", "traj_id"]


def traj_id(
    model: str, params_hash: str, seed: int | None, task_id: str, sample_idx: int, env_key: str = ""
) -> str:
    """A sample's id; ``env_key`` (``env_id@version``, '' for none) keeps episodes of two environment
    versions apart (plain samples keep the ids they always had)."""
    env = f"|{env_key}" if env_key else ""
    return hashlib.sha256(f"{model}|{params_hash}|{seed}|{task_id}|{sample_idx}{env}".encode()).hexdigest()[
        :32
    ]


_EKEY = "coalesce(t.env_id || '@' || t.env_version, '') = _ids.ekey"


def _ids_table(task_ids: list[str], ekeys: dict[str, str]) -> dict[str, pa.Table]:
    return {
        "_ids": pa.table(
            {
                "task_id": pa.array(task_ids, pa.string()),
                "ekey": pa.array([ekeys.get(t, "") for t in task_ids], pa.string()),
            }
        )
    }


def stored_status(
    store: Store,
    task_ids: list[str],
    *,
    model: str,
    params_hash: str,
    seed: int | None,
    n: int,
    vkeys,
    ekeys: dict[str, str],
) -> pl.DataFrame:
    """Per task: how many of samples 0..n-1 are stored (``k``) and verified (``kv``) for this job's key.

    Indices, not rows: an upgraded store can hold one sample twice (two jobs of an earlier release
    with different N drew it under two traj_ids), and samples past n (a larger job's) do not count."""
    ids = _ids_table(task_ids, ekeys)
    seed_cond = "t.seed IS NULL" if seed is None else "t.seed = $seed"
    params = {"model": model, "ph": params_hash, "vkeys": sorted(vkeys), "n": n} | (
        {} if seed is None else {"seed": seed}
    )
    return store.sql(
        "SELECT t.task_id, count(DISTINCT t.sample_idx) FILTER (WHERE t.sample_idx < $n) AS k, "
        "count(DISTINCT t.sample_idx) FILTER (WHERE t.sample_idx < $n AND v.traj_id IS NOT NULL) AS kv "
        "FROM trajectories t JOIN _ids USING (task_id) "
        "LEFT JOIN (SELECT DISTINCT traj_id FROM verifications "
        "           WHERE verifier || '@' || verifier_version IN (SELECT unnest($vkeys))) v "
        "  ON v.traj_id = t.traj_id "
        f"WHERE t.model = $model AND t.params_hash = $ph AND {seed_cond} AND {_EKEY} GROUP BY 1",
        params=params,
        extra=ids,
    ).pl()


def stored_samples(
    store: Store, task_ids: list[str], *, model: str, params_hash: str, seed, vkeys, ekeys: dict[str, str]
) -> dict:
    """task_id -> {sample_idx: (traj_id, completion, verified)} for partially done tasks (of two stored
    copies of one sample, the verified one)."""
    if not task_ids:
        return {}
    ids = _ids_table(task_ids, ekeys)
    seed_cond = "t.seed IS NULL" if seed is None else "t.seed = $seed"
    params = {"model": model, "ph": params_hash, "vkeys": sorted(vkeys)} | (
        {} if seed is None else {"seed": seed}
    )
    rows = store.sql(
        "SELECT t.task_id, t.sample_idx, t.traj_id, t.completion, "
        "       t.traj_id IN (SELECT traj_id FROM verifications "
        "                     WHERE verifier || '@' || verifier_version IN (SELECT unnest($vkeys))) AS verified "
        f"FROM trajectories t JOIN _ids USING (task_id) WHERE t.model = $model AND t.params_hash = $ph AND {seed_cond} "
        f"AND {_EKEY}",
        params=params,
        extra=ids,
    ).fetchall()
    out: dict[str, dict] = {}
    for task_id, idx, tid, completion, verified in sorted(rows, key=lambda r: (bool(r[4]), r[2])):
        out.setdefault(task_id, {})[idx] = (tid, completion, bool(verified))  # verified copies last: kept
    return out


def first_missing(have: dict, n: int) -> int:
    """The first of sample indices 0..n-1 not stored and verified: the job draws first..n-1 (stored ones
    among them are kept, and verified if they lost their verification)."""
    return next((i for i in range(n) if not (i in have and have[i][2])), n)


def job_counts(
    store: Store, task_ids: list[str], *, model: str, params_hash: str, vkeys, ekeys: dict
) -> dict:
    """task_id -> [verified, correct, errors] of the samples stored for this job's slice of the ledger
    (model, params, verifier, the task's environment version), whatever run or seed drew them."""
    rows = recompute_passrates(
        store, model=model, params_hash=params_hash, verifier_keys=vkeys, task_ids=task_ids, write=False
    )
    out = {t: [0, 0, 0] for t in task_ids}
    for r in rows:
        if r["env_version"] == ekeys.get(r["task_id"], ""):
            c = out[r["task_id"]]
            c[0], c[1], c[2] = c[0] + r["n"], c[1] + r["n_correct"], c[2] + r["n_error"]
    return out


def decide_counts(counts: dict, adaptive, *, n_max: int) -> pl.DataFrame:
    """The adaptive rule's decision frame (``rldata.adaptive.decide_frame``: ``next_draws``,
    ``n_drawn``, ...) of task_id -> [verified, correct, errors] counts."""
    return decide_frame(
        pl.DataFrame(
            [{"task_id": t, "n": c[0], "n_correct": c[1], "n_error": c[2]} for t, c in counts.items()],
            schema={"task_id": pl.String, "n": pl.Int64, "n_correct": pl.Int64, "n_error": pl.Int64},
        ),
        adaptive,
        n_max=n_max,
    )
