"""Learnability cards: ``rldata env profile NAME`` answers "can this model learn from this environment?".

A card samples ``tasks`` tasks of the environment ``n`` times each with a model (through the
ordinary ``rldata sample`` job, so the samples land in the store and a killed profile resumes) and
summarises what GRPO-style training would see:

- the pass-rate histogram over tasks (deciles [0, 0.1) .. [0.9, 1]);
- the in-band fraction: tasks whose pass rate lies in [0.1, 0.9] (a group of samples with mixed
  outcomes is the only kind that gives a policy gradient), with its Wilson 95% interval over tasks;
- mean turns, tool-call rate, parse-fail and env-error rates, generated tokens and seconds per
  episode; the model, sampling-parameters hash and environment version it was measured with.

The verdict: ``not learnable by this model`` when the in-band fraction's upper bound is below 5%
(almost every task is always or never solved: there is nothing to learn from); ``learnable`` when
its lower bound is at least 5%; ``undetermined`` otherwise (too few tasks to tell).  Cards are rows
of ``env_profiles`` (one per environment version, model, parameters, n and task set).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from rldata.errors import RldataError
from rldata.stats import wilson_interval

__all__ = ["BAND", "LEARNABLE_MIN", "card_from_rates", "card_line", "profile_env", "verdict_of"]

BAND = (0.1, 0.9)  # a task in this band gives mixed groups: a gradient
LEARNABLE_MIN = 0.05  # the in-band fraction below which an environment is not learnable


def verdict_of(lo: float, hi: float) -> str:
    if hi < LEARNABLE_MIN:
        return "not learnable by this model"
    if lo >= LEARNABLE_MIN:
        return "learnable"
    return "undetermined"


def card_from_rates(rates: list[float]) -> dict[str, Any]:
    """Histogram, in-band fraction, its Wilson interval and the verdict of per-task pass rates."""
    hist = [0] * 10
    for r in rates:
        if not (isinstance(r, (int, float)) and math.isfinite(r) and 0.0 <= r <= 1.0):
            raise RldataError(f"pass rate {r!r} is not in [0, 1]")
        hist[min(int(r * 10), 9)] += 1
    k = sum(BAND[0] <= r <= BAND[1] for r in rates)
    lo, hi = wilson_interval(k, len(rates))
    return {
        "histogram": hist,
        "in_band": k / len(rates) if rates else None,
        "in_band_lo": lo,
        "in_band_hi": hi,
        "verdict": verdict_of(lo, hi) if rates else "undetermined",
    }


def card_line(row: dict[str, Any]) -> str:
    """One line for ``env list``: ``in-band 31% [18-47%] learnable (tiny@..., n=16, 32 tasks)``."""
    if row.get("in_band") is None:
        return f"{row['verdict']} ({row['tasks']} tasks)"
    return (
        f"in-band {row['in_band']:.0%} [{row['in_band_lo']:.0%}-{row['in_band_hi']:.0%}] {row['verdict']} "
        f"({row['model']}, n={row['n']}, {row['tasks']} tasks)"
    )


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
