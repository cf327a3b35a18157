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

from rldata.stats import wilson_interval
from rldata.store.core import Store
from rldata.store.ledger_sql import SAMPLE_ID, counts_sql

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
