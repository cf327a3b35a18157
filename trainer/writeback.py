"""Write-back of a training step: trajectories (dropped groups included), verifications, ledger rows
and metrics, and the clean-up that makes a killed-and-resumed run end with no duplicate, no lost row.

Ledger naming: rollouts of policy version v of run R, started from model ``M@rev``, are counted
under the model name ``M@rev+R/vV`` (e.g. ``tiny-arith@1a2b3c4d5e6f+train-20260101-120000-ab12cd/v3``):
one name per set of weights, so pass rates of different versions never pool, and the base name and
revision stay readable in front.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

import polars as pl

from rldata.ledger.core import rows_from_outcomes, verifier_key
from rldata.rewards.compose import reward_metrics
from rldata.rewards.judge import POINTWISE, judge_rows
from rldata.rollout import episode_columns
from rldata.store.core import Store
from rldata.verify.base import verdict_rows

__all__ = [
    "LEARNER_STATS",
    "bucket_accuracy",
    "discard_after",
    "group_evidence",
    "ledger_model",
    "metric_rows",
    "models_after",
    "outcomes",
    "pending_outcomes",
    "rebuild_ledger",
    "step_metrics",
    "tool_errors",
    "trajectory_rows",
    "verification_rows",
    "write_ledger",
    "write_step",
    "write_steps",
    "zero_variance_share",
]


def ledger_model(base_name: str, run_id: str, version: int) -> str:
    return f"{base_name}+{run_id}/v{version}"


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def trajectory_rows(
    groups, *, run_id: str, step: int, model: str, revision: str, version: int, spec
) -> list[dict]:
    rows = []
    sp = spec.to_json()
    for g in groups:
        for i, (s, tid) in enumerate(zip(g.samples, g.traj_ids)):
            rows.append(
                {
                    "traj_id": tid,
                    "task_id": g.task["task_id"],
                    "run_id": run_id,
                    "sample_idx": i,
                    "model": model,
                    "model_revision": revision,
                    "policy_version": version,
                    "params_hash": spec.params_hash,
                    "sampling_params": sp,
                    "seed": g.seed,
                    "prompt": g.task["prompt"],
                    **episode_columns(s, g.env),
                    "step": step,
                    "reward": float(g.rewards[i]),
                    "advantage": float(g.advantages[i]) if g.kept else 0.0,
                    "bucket": g.bucket,
                    "kept": g.kept,
                    "drop_reason": g.drop_reason,
                }
            )
    return rows


def verification_rows(groups, verifier_for, judge=None) -> list[dict]:
    rows = []
    for g in groups:
        vname, vversion = verifier_for(g.task["domain"])
        for tid, vs in zip(g.traj_ids, g.verdicts):
            rows += verdict_rows(g.task["task_id"], tid, vname, vversion, vs)
        if g.judge_verdicts is not None and judge is not None:
            rows += judge_rows(
                g.judge_verdicts,
                g.traj_ids,
                [g.task["task_id"]] * len(g.traj_ids),
                verifier=POINTWISE,
                version=judge.version,
            )
    return rows


def outcomes(groups, verifier_for) -> list[tuple[str, str, bool | None, str]]:
    """(task_id, verifier key, passed, environment key) per sample: what the ledger counts."""
    return [
        (
            g.task["task_id"],
            verifier_key(*verifier_for(g.task["domain"])),
            p,
            g.env.ledger_key if g.env is not None else "",
        )
        for g in groups
        for p in g.passed
    ]


def write_ledger(
    store: Store, ledger_outcomes: Sequence, *, model: str, params_hash: str, run_id: str
) -> None:
    """Upsert the ledger rows of one policy version from ALL its samples so far (complete counts)."""
    rows = rows_from_outcomes(ledger_outcomes, model=model, params_hash=params_hash, run_id=run_id)
    if rows:
        store.upsert("passrates", rows)


def write_step(
    store: Store,
    *,
    traj: list[dict],
    ver: list[dict],
    ledger_outcomes: Sequence,
    model: str,
    params_hash: str,
    run_id: str,
) -> None:
    """Commit a step's rollouts.  Order matters for resume: samples, their verifications, then the ledger
    (the caller appends the metrics last)."""
    write_steps(
        store, traj=traj, ver=ver, ledgers={model: ledger_outcomes}, params_hash=params_hash, run_id=run_id
    )


def write_steps(
    store: Store,
    *,
    traj: list[dict],
    ver: list[dict],
    ledgers: Mapping[str, Sequence],
    params_hash: str,
    run_id: str,
) -> None:
    """Commit the rollouts of one or more steps, one commit per table: samples, their verifications,
    then the ledger rows of every policy version in ``ledgers`` (model -> ALL its outcomes so far).
    The caller appends the metrics last."""
    store.append("trajectories", traj, dedupe=True)  # keyed: a second writer of the same step adds nothing
    store.append("verifications", ver, dedupe=True)
    rows = [
        r
        for model, outcomes in ledgers.items()
        for r in rows_from_outcomes(outcomes, model=model, params_hash=params_hash, run_id=run_id)
    ]
    if rows:
        store.upsert("passrates", rows)


def metric_rows(run_id: str, step: int, values: dict[str, float]) -> list[dict]:
    return [{"run_id": run_id, "step": step, "name": k, "value": float(v)} for k, v in values.items()]


def step_metrics(groups, stats: dict | None, times: dict[str, float]) -> dict[str, float]:
    """The step's numbers: rewards (overall and per bucket), groups kept/dropped, loss stats, lengths,
    throughput and the time split."""
    rewards = [r for g in groups for r in g.rewards]
    lengths = [s.completion_tokens for g in groups for s in g.samples]
    per_bucket: dict[str, list[float]] = defaultdict(list)
    for g in groups:
        per_bucket[g.bucket] += [float(r) for r in g.rewards]
    m = {
        "reward_mean": sum(rewards) / len(rewards),
        "groups_kept": sum(g.kept for g in groups),
        "groups_dropped": sum(not g.kept for g in groups),
        "reward_errors": sum(p is None for g in groups for p in g.passed),
        "resample_rounds": max(g.rnd for g in groups),
        "response_len_mean": sum(lengths) / len(lengths),
        "samples": len(rewards),
        "gen_tokens_per_s": sum(lengths) / max(times["generate"], 1e-9),
        "samples_per_s": len(rewards) / max(times["step"], 1e-9),
        # Measured waits: the learner side waiting for rollouts, the producer waiting on capacity (sync
        # mode: on every update) during this step.
        "learner_idle_frac": times.get("learner_idle", 0.0) / max(times["step"], 1e-9),
        "engine_idle_frac": min(times.get("engine_idle", 0.0) / max(times["step"], 1e-9), 1.0),
    }
    m |= {f"reward_mean/{b}": sum(v) / len(v) for b, v in sorted(per_bucket.items())}
    # Accuracy apart from reward: they differ once a reward spec mixes in a judge or a length penalty.
    passed = [1.0 if p else 0.0 for g in groups for p in g.passed]
    m["accuracy"] = sum(passed) / len(passed)
    m["zero_variance_share"] = zero_variance_share(groups)
    m |= {f"accuracy/{b}": v for b, v in sorted(bucket_accuracy(groups).items())}
    reasons = Counter(g.drop_reason or "unknown" for g in groups if not g.kept)
    m |= {f"groups_dropped/{r}": float(n) for r, n in sorted(reasons.items())}
    composed = [g.composed for g in groups if g.composed is not None]
    if composed:  # every reward component, per domain
        m |= reward_metrics(pl.concat(composed))
    episodes = [s for g in groups if g.env is not None for s in g.samples]
    if episodes:  # environment rollouts: how often the model used its tools, how episodes ended
        m["episode/tool_call_frac"] = sum(s.num_tool_calls > 0 for s in episodes) / len(episodes)
        m["episode/tool_calls_mean"] = sum(s.num_tool_calls for s in episodes) / len(episodes)
        m["episode/turns_mean"] = sum(s.num_turns for s in episodes) / len(episodes)
        m["episode/tool_errors_mean"] = sum(tool_errors(s.messages) for s in episodes) / len(episodes)
        ends = Counter(s.finish_reason for s in episodes)
        m |= {f"episode/finish/{r}": n / len(episodes) for r, n in sorted(ends.items())}
        called = [
            p for g in groups if g.env is not None for s, p in zip(g.samples, g.passed) if s.num_tool_calls
        ]
        if called:
            m["episode/accuracy_with_tool"] = sum(bool(p) for p in called) / len(called)
    if stats is not None:
        m |= {k: stats[k] for k in LEARNER_STATS}
        m["train_tokens"] = stats["tokens"]
    m |= {f"time/{k}": v for k, v in times.items()}
    return m


def tool_errors(messages) -> int:
    """Tool results in an episode that are errors (``error: ...``: a tool that raised, bad
    arguments, a call that did not parse, a server-side failure)."""
    return sum(
        1
        for m in messages or ()
        if m.get("role") == "tool" and str(m.get("content") or "").lstrip().startswith("error:")
    )


# The learners' stats in the metrics table: see rldata.trainer.loss for what each one measures.
LEARNER_STATS = (
    "loss",
    "kl",
    "clip_frac",
    "tis_frac",
    "clip_or_tis_frac",
    "entropy",
    "ratio_mean",
    "rho_mean",
    "rho_max",
    "mismatch_kl",
    "grad_norm",
)


def group_evidence(groups, version: int) -> list[tuple[str, int, int, int]]:
    """(task_id, version, passes, fails) per group, what live posteriors learn from (a verifier
    error counts as a fail, as in the rewards); stale-dropped groups included: they were verified."""
    out = []
    for g in groups:
        passes = sum(bool(p) for p in g.passed)
        out.append((g.task["task_id"], int(version), passes, len(g.passed) - passes))
    return out


def zero_variance_share(groups) -> float:
    """The share of groups whose verdicts all agree: rollouts that carry no GRPO signal."""
    flat = [len({bool(p) for p in g.passed}) <= 1 for g in groups]
    return sum(flat) / len(flat) if flat else 0.0


def bucket_accuracy(groups) -> dict[str, float]:
    """Per bucket, the fraction of this step's samples that passed (verifier errors count as failed)."""
    acc: dict[str, list[int]] = defaultdict(list)
    for g in groups:
        acc[g.bucket] += [1 if p else 0 for p in g.passed]
    return {b: sum(v) / len(v) for b, v in acc.items()}


def discard_after(store: Store, run_id: str, step: int, *, keep_versions_upto: int) -> dict[str, int]:
    """Delete a run's rows written after ``step`` (a resumed run redoes those steps).

    One delete per table: verifications (by the traj ids of the discarded trajectories), then
    trajectories, metrics, and the ledger rows of policy versions above ``keep_versions_upto``.
    """
    r = _sql_str(run_id)
    ids = [
        t
        for (t,) in store.sql(
            f"SELECT traj_id FROM trajectories WHERE run_id = {r} AND step > {int(step)}"
        ).fetchall()
    ]
    out = {"verifications": 0, "trajectories": 0, "metrics": 0, "passrates": 0}
    if ids:
        out["verifications"] = store.delete("verifications", f"traj_id IN ({', '.join(map(_sql_str, ids))})")
        out["trajectories"] = store.delete("trajectories", f"run_id = {r} AND step > {int(step)}")
    if store.sql(f"SELECT count(*) FROM metrics WHERE run_id = {r} AND step > {int(step)}").fetchall()[0][0]:
        out["metrics"] = store.delete("metrics", f"run_id = {r} AND step > {int(step)}")
    stale = [
        m
        for (m,) in store.sql(f"SELECT DISTINCT model FROM passrates WHERE run_id = {r}").fetchall()
        if _version_of(m, run_id) is not None and _version_of(m, run_id) > keep_versions_upto
    ]
    if stale:
        out["passrates"] = store.delete(
            "passrates", f"run_id = {r} AND model IN ({', '.join(map(_sql_str, stale))})"
        )
    return out


def models_after(store: Store, run_id: str, step: int) -> list[str]:
    """Ledger names of the policy versions that generated the run's rollouts after ``step``."""
    return [
        m
        for (m,) in store.sql(
            "SELECT DISTINCT model FROM trajectories WHERE run_id = $1 AND step > $2 ORDER BY model",
            params=[run_id, step],
        ).fetchall()
    ]


def rebuild_ledger(store: Store, run_id: str, models: Sequence[str], *, step: int, params_hash: str) -> None:
    """Recount the ledger rows of ``models`` from the run's stored samples up to ``step`` (a resume
    deleted later ones that these rows counted)."""
    if not models:
        return
    names = ", ".join(map(_sql_str, models))
    if store.sql(
        f"SELECT count(*) FROM passrates WHERE run_id = {_sql_str(run_id)} AND model IN ({names})"
    ).fetchall()[0][0]:
        store.delete("passrates", f"run_id = {_sql_str(run_id)} AND model IN ({names})")
    for m in models:
        write_ledger(
            store, pending_outcomes(store, run_id, m, step), model=m, params_hash=params_hash, run_id=run_id
        )


def _version_of(model: str, run_id: str) -> int | None:
    head, _, v = model.rpartition("/v")
    return int(v) if head.endswith(f"+{run_id}") and v.isdigit() else None


def pending_outcomes(
    store: Store, run_id: str, model: str, step: int
) -> list[tuple[str, str, bool | None, str]]:
    """Outcomes already stored for ``model`` (a policy version that generated more than one step,
    because an update was skipped) up to ``step``: the ledger row of that version counts them too."""
    rows = store.sql(
        "SELECT v.task_id, v.traj_id, v.verifier || '@' || v.verifier_version, "
        "       coalesce(t.env_id || '@' || t.env_version, ''), "
        "       bool_or(v.passed IS NULL OR v.error IS NOT NULL), bool_and(coalesce(v.passed, false)) "
        "FROM verifications v JOIN trajectories t USING (traj_id) "
        "WHERE t.run_id = $run AND t.model = $model AND t.step <= $step GROUP BY 1, 2, 3, 4",
        params={"run": run_id, "model": model, "step": step},
    ).fetchall()
    return [(task, vkey, None if err else bool(ok), ekey) for task, _, vkey, ekey, err, ok in rows]
