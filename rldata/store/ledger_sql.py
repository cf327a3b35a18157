"""The SQL of the pass-rate ledger's counts: a leaf (no store, no ledger), so that the ledger
(:mod:`rldata.ledger.core`) and the store upgrade that rekeys old rows (:mod:`rldata.store.rehash`, run while a
store opens) share one definition without importing each other."""

from __future__ import annotations

__all__ = ["SAMPLE_ID", "counts_sql"]

# One sample, whichever job drew it: a seeded sample is (task, seed, sample index) within its model,
# params hash and environment, because the engine gives child j of an n-request the seed seed + j, so
# an N=8 and an N=16 job draw the same samples 0..7.  Stores upgraded from releases whose params hash
# included N hold such samples twice, under two traj_ids (rldata.store.rehash): they count once.  An unseeded
# sample is only itself (its traj_id).
SAMPLE_ID = "coalesce(t.seed::VARCHAR || ':' || t.sample_idx::VARCHAR, t.traj_id)"


def counts_sql(*, where: str, joins: str = "", params_hash: str = "t.params_hash") -> str:
    """DuckDB SQL of the ledger counts (task_id, model, params_hash, vkey, ekey, n, n_correct, n_error)
    of the samples joined by ``joins`` and kept by ``where`` (over ``trajectories t``, ``verifications
    v``), one count per distinct sample (:data:`SAMPLE_ID`).  ``params_hash``: the expression the rows
    are keyed by (the upgrade step keys old rows by their new hash)."""
    return f"""
WITH per_traj AS (
    SELECT v.task_id, t.model, {params_hash} AS params_hash, v.traj_id,
           v.verifier || '@' || v.verifier_version AS vkey,
           coalesce(t.env_id || '@' || t.env_version, '') AS ekey,
           {SAMPLE_ID} AS sample,
           bool_or(v.passed IS NULL OR v.error IS NOT NULL) AS err,
           bool_and(coalesce(v.passed, false)) AS ok
    FROM verifications v
    JOIN trajectories t ON t.traj_id = v.traj_id
    {joins}
    WHERE {where}
    GROUP BY ALL
), per_sample AS (
    -- copies of one sample are the same completion; a verifier error on one copy (a timeout) does
    -- not outvote a verdict on another
    SELECT task_id, model, params_hash, vkey, ekey, sample, bool_and(err) AS errored,
           arg_min(ok, (err, traj_id)) AS passed
    FROM per_traj
    GROUP BY ALL
)
SELECT task_id, model, params_hash, vkey, ekey,
       count(*) FILTER (WHERE NOT errored) AS n,
       count(*) FILTER (WHERE passed AND NOT errored) AS n_correct,
       count(*) FILTER (WHERE errored) AS n_error
FROM per_sample
GROUP BY ALL
"""
