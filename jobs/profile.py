"""``rldata env profile NAME``: measure and store an environment's learnability card.

The card's contents and verdict rule are :mod:`rldata.envs.profile`'s; this job picks the tasks,
samples them through the ordinary sample job (the episodes land in the store; a killed profile
resumes), reads the outcomes back and writes one ``env_profiles`` row.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from rldata.envs.profile import card_from_rates
from rldata.errors import RldataError

__all__ = ["profile_env"]


def _pick_tasks(store, binding, k: int) -> list[str]:
    own = store.sql(
        "SELECT task_id FROM tasks WHERE env_id = $1 AND env_version = $2 ORDER BY task_id LIMIT $3",
        params=[binding.env_id, binding.version, k],
    ).fetchall()
    if own:
        return [r[0] for r in own]
    plain = store.sql(
        "SELECT task_id FROM tasks WHERE env_id IS NULL ORDER BY task_id LIMIT $1", params=[k]
    ).fetchall()
    return [r[0] for r in plain]


def profile_env(
    store,
    name: str,
    *,
    model: str | None = None,
    n: int = 16,
    tasks: int = 32,
    max_tokens: int = 16,
    temperature: float = 1.0,
    seed: int = 0,
    engines: int | None = None,
    batch_tasks: int = 128,
    max_model_len: int | None = None,
) -> dict[str, Any]:
    """Sample and store the learnability card of environment ``name`` (NAME or NAME@VERSION).

    The tasks: the first ``tasks`` (by task_id) tied to this environment version, or, for an
    environment without tasks of its own (``calculator``, ``single-turn``), the first tasks that
    name no environment, run in it as ``rldata sample --env`` would.  Returns the ``env_profiles`` row.
    """
    from rldata.jobs.sample import SampleJob, run_sample
    from rldata.params import SamplingSpec
    from rldata.rollout.bind import env_binding

    for what, v in (("n", n), ("tasks", tasks)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise RldataError(f"{what}: expected an integer >= 1, got {v!r}", field=what)
    b = env_binding(store, name)
    ids = _pick_tasks(store, b, tasks)
    if not ids:
        raise RldataError(
            f"environment {b.env_id!r} has no tasks to profile: ingest some (rldata ingest --env "
            f"{b.env_id} --n K, or a file)"
        )
    spec = SamplingSpec(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
    where = "task_id IN (" + ", ".join("'" + t.replace("'", "''") + "'" for t in ids) + ")"
    job = SampleJob(
        spec=spec,
        model=model,
        where=where,
        env=f"{b.env_id}@{b.version}",
        engines=engines,
        batch_tasks=batch_tasks,
        max_model_len=max_model_len,
    )
    s = run_sample(store, job)
    row = _measure(store, b, ids, s.model, spec)
    row["seconds_per_episode"] = s.seconds / s.samples if s.samples else None
    row["run_id"] = s.run_id
    key = json.dumps([b.ledger_key, s.model, spec.params_hash, n, sorted(ids)])
    row["profile_id"] = hashlib.sha256(key.encode()).hexdigest()[:16]
    store.append("env_profiles", [row], dedupe=True)
    return row


def _measure(store, b, ids: list[str], model: str, spec) -> dict[str, Any]:

    params = {"ids": ids, "m": model, "ph": spec.params_hash, "ev": b.version, "n": spec.n}
    seed_cond = "t.seed IS NULL" if spec.seed is None else f"t.seed = {int(spec.seed)}"
    base = (
        "FROM trajectories t WHERE t.task_id IN (SELECT unnest($ids)) AND t.model = $m "
        f"AND t.params_hash = $ph AND t.env_version = $ev AND t.sample_idx < $n AND {seed_cond}"
    )
    # one outcome per sample: an error on any layer is an error, else a pass when every layer passed
    per_task = store.sql(
        "WITH s AS (SELECT t.task_id, t.traj_id " + base + "), "
        "o AS (SELECT s.task_id, bool_or(v.passed IS NULL) AS err, bool_and(coalesce(v.passed, false)) AS ok, "
        "  bool_and(v.extracted IS NULL AND v.passed IS NOT NULL) AS no_ans "
        "  FROM s JOIN verifications v USING (traj_id) WHERE v.layer <> 'judge' GROUP BY s.task_id, s.traj_id) "
        "SELECT task_id, count(*) FILTER (WHERE NOT err) AS n_ok, count(*) FILTER (WHERE ok AND NOT err) AS n_pass, "
        "  count(*) FILTER (WHERE no_ans AND NOT err) AS n_noans, count(*) AS n_all FROM o GROUP BY task_id",
        params=params,
    ).fetchall()
    rates = [p / k for _, k, p, _, _ in per_task if k]
    episodes = store.sql(
        "SELECT count(*), avg(t.num_turns), avg(CASE WHEN t.num_tool_calls > 0 THEN 1.0 ELSE 0.0 END), "
        "avg(CASE WHEN t.finish_reason = 'env_error' THEN 1.0 ELSE 0.0 END), avg(t.completion_tokens) "
        + base,
        params=params,
    ).fetchall()[0]
    total = sum(r[4] for r in per_task)
    return {
        "env_id": b.env_id,
        "env_version": b.version,
        "model": model,
        "params_hash": spec.params_hash,
        "n": spec.n,
        "tasks": len(ids),
        **card_from_rates(rates),
        "mean_turns": episodes[1],
        "tool_call_rate": episodes[2],
        "parse_fail_rate": sum(r[3] for r in per_task) / total if total else None,
        "env_error_rate": episodes[3],
        "tokens_per_episode": episodes[4],
    }
