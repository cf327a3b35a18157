"""The pass-rate ledger: per (task, model, sampling-params hash, verifier version, environment) counts.

Rows are derived from ``trajectories`` joined with ``verifications``, never typed in by hand, so
the ledger can always be rebuilt.  A sample counts as correct when every verification layer
passed; as an error (excluded from ``n``) when any layer errored (crash or timeout).  Samples
from runs with different seeds or N but the same sampling distribution pool together, because the
params hash leaves the seed and N out; a sample two jobs drew (same seed and index) counts once.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping

import pyarrow as pa

from rldata.store import Store

__all__ = [
    "SAMPLE_ID",
    "counts_sql",
    "env_ledger_key",
    "passrate_row",
    "recompute_passrates",
    "rows_from_outcomes",
    "verifier_key",
]


def verifier_key(name: str, version: str) -> str:
    """The ledger's verifier_key value: ``name@version``."""
    return f"{name}@{version}"


def passrate_row(
    task_id: str,
    *,
    model: str,
    params_hash: str,
    verifier_key: str,
    n: int,
    n_correct: int,
    n_error: int,
    run_id: str | None = None,
    env_version: str = "",
    stop_rule: str = "fixed",
    alpha: float | None = None,
    confidence: float | None = None,
    n_max: int | None = None,
    band: str | None = None,
) -> dict:
    from rldata.stats import wilson_interval

    lo, hi = wilson_interval(n_correct, n)
    return {
        "task_id": task_id,
        "model": model,
        "params_hash": params_hash,
        "verifier_key": verifier_key,
        "n": int(n),
        "n_correct": int(n_correct),
        "n_error": int(n_error),
        "pass_rate": (n_correct / n) if n else 0.0,
        "ci_low": lo,
        "ci_high": hi,
        "run_id": run_id,
        "updated_at": dt.datetime.now(dt.UTC),
        "env_version": env_version,  # '' = plain single-turn: a key column, never null
        "stop_rule": stop_rule,  # fixed | exact | sequential (rldata sample --adaptive)
        "alpha": alpha,
        "confidence": confidence,
        "n_max": n_max,
        "band": band,
    }


def env_ledger_key(env_id: str | None, env_version: str | None) -> str:
    """The ledger's env_version value for a trajectory's environment: ``env_id@version``, '' for none."""
    return f"{env_id}@{env_version}" if env_id and env_version else ""


def rows_from_outcomes(
    outcomes: Iterable[tuple], *, model: str, params_hash: str, run_id: str | None = None
) -> list[dict]:
    """Ledger rows from in-memory ``(task_id, verifier_key, passed[, env_key])`` per sample (passed
    None = error; env_key as :func:`env_ledger_key`, '' or absent = single-turn)."""
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for task_id, vkey, passed, *env in outcomes:
        c = counts[(task_id, vkey, env[0] if env else "")]
        if passed is None:
            c[2] += 1
        else:
            c[0] += 1
            c[1] += int(passed)
    return [
        passrate_row(
            t,
            model=model,
            params_hash=params_hash,
            verifier_key=v,
            n=n,
            n_correct=k,
            n_error=e,
            run_id=run_id,
            env_version=ek,
        )
        for (t, v, ek), (n, k, e) in counts.items()
    ]


# One sample, whichever job drew it: a seeded sample is (task, seed, sample index) within its model,
# params hash and environment, because the engine gives child j of an n-request the seed seed + j, so
# an N=8 and an N=16 job draw the same samples 0..7.  Stores upgraded from releases whose params hash
# included N hold such samples twice, under two traj_ids (rldata.rehash): they count once.  An unseeded
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


def recompute_passrates(
    store: Store,
    *,
    model: str,
    params_hash: str,
    verifier_keys: Iterable[str],
    task_ids: Iterable[str] | None = None,
    run_id: str | None = None,
    write: bool = True,
    stop=None,
) -> list[dict]:
    """Rebuild ledger rows from the stored samples (all seeds, runs and N pooled, each distinct sample
    once: :data:`SAMPLE_ID`) and upsert them.

    One row per environment version the samples ran in (never pooled).  ``stop(task_id)``, when
    given, returns the stopping-rule columns of that task's row (``stop_rule``, ``alpha``, ...)."""
    extra: Mapping[str, pa.Table] = {}
    join_ids = ""
    if task_ids is not None:
        extra = {"_ids": pa.table({"task_id": pa.array(sorted(set(task_ids)), pa.string())})}
        join_ids = "JOIN _ids ON _ids.task_id = v.task_id"
    where = (
        "t.model = $model AND t.params_hash = $params_hash "
        "AND v.verifier || '@' || v.verifier_version IN (SELECT unnest($vkeys))"
    )
    rel = store.sql(
        f"SELECT task_id, vkey, ekey, n, n_correct, n_error FROM ({counts_sql(where=where, joins=join_ids)})",
        params={"model": model, "params_hash": params_hash, "vkeys": sorted(set(verifier_keys))},
        extra=extra,
    )
    rows = [
        passrate_row(
            t,
            model=model,
            params_hash=params_hash,
            verifier_key=v,
            n=n,
            n_correct=k,
            n_error=e,
            run_id=run_id,
            env_version=ek,
            **(dict(stop(t)) if stop is not None else {}),
        )
        for t, v, ek, n, k, e in rel.fetchall()
    ]
    if write and rows:
        store.upsert("passrates", rows)
    return rows
