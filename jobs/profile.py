"""``rldata env profile NAME``: measure and store an environment's learnability card.

The card's contents and verdict rule are :mod:`rldata.envs.profile`'s; this job picks the tasks,
samples them through the ordinary sample job (the episodes land in the store; a killed profile
resumes), reads the outcomes back and writes one ``env_profiles`` row.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from rldata.configs.fields import at_least, config, load, nested, param, validate
from rldata.configs.sampling import EngineConfig, SampleConfig, SamplingSpec
from rldata.envs.profile import card_from_rates
from rldata.errors import RldataError

__all__ = ["ProfileConfig", "profile_env"]


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


@config
class ProfileConfig:
    """How `rldata env profile` measures an environment: which one, how many tasks, sampled how and
    on which engines."""

    name: str | None = param(
        None,
        cli=False,
        check=lambda v: None if v else "the environment to profile is required",
        help="The environment, NAME or NAME@VERSION (the argument).",
    )
    tasks: int = param(32, check=at_least(1), help="Tasks to sample (K).")
    sampling: SamplingSpec = nested(SamplingSpec)
    engine: EngineConfig = nested(EngineConfig)
    batch_tasks: int = param(128, check=at_least(1), help="Tasks per engine call and per store commit.")

    def __post_init__(self):
        validate(self)


def profile_env(store, name: str | None = None, *, config=None, **overrides) -> dict[str, Any]:
    """Sample and store the learnability card of environment ``name`` (NAME or NAME@VERSION).

    ``config`` (a :class:`ProfileConfig`, a mapping or a YAML/TOML file) and ``overrides`` are its
    fields by name (``n``, ``tasks``, ``max_tokens``, ``model``, ``dtype``...).  The tasks: the first
    ``tasks`` (by task_id) tied to this environment version, or, for an environment without tasks of
    its own (``calculator``, ``single-turn``), the first tasks that name no environment, run in it as
    ``rldata sample --env`` would.  Returns the ``env_profiles`` row.
    """
    # the sample job and the rollout path load when a profile runs: `rldata` imports this module's
    # ProfileConfig at start-up (its options), and they would add ~0.3 s to every command (measured
    # with -X importtime on `rldata tables`)
    from rldata.jobs.sample import run_sample
    from rldata.rollout.bind import env_binding

    cfg = load(ProfileConfig, config, **({"name": name} if name is not None else {}), **overrides)
    name, tasks, spec, engine = cfg.name, cfg.tasks, cfg.sampling, cfg.engine
    n = spec.n
    b = env_binding(store, name)
    ids = _pick_tasks(store, b, tasks)
    if not ids:
        raise RldataError(
            f"environment {b.env_id!r} has no tasks to profile: ingest some (rldata ingest --env "
            f"{b.env_id} --n K, or a file)"
        )
    where = "task_id IN (" + ", ".join("'" + t.replace("'", "''") + "'" for t in ids) + ")"
    job = SampleConfig(
        sampling=spec, engine=engine, where=where, env=f"{b.env_id}@{b.version}", batch_tasks=cfg.batch_tasks
    )
    s = run_sample(store, job)
    spec = replace(spec, chat_template=s.chat_template)  # as the job resolved it: the params hash it keyed
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
