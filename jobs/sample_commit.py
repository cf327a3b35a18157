"""Verify, score and commit one batch of a sampling job's samples (the driver, the only writer).

Order matters for resume: samples, then their verifications, then (batched by time) the ledger.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from rldata.console import progress
from rldata.jobs.sample_stored import traj_id
from rldata.ledger.core import rows_from_outcomes, verifier_key
from rldata.rewards.compose import RewardTally, score_samples
from rldata.rewards.judge import POINTWISE, judge_rows
from rldata.rollout import episode_columns, unverifiable
from rldata.store.core import Store
from rldata.verify.base import all_passed, no_answer, verdict_rows
from rldata.verify.parallel import verify_on_ray

if TYPE_CHECKING:
    from rldata.configs.sampling import SampleConfig
    from rldata.jobs.sample import SampleSummary
    from rldata.rewards.compose import RewardSpec

__all__ = ["Ctx", "commit_batch"]


@dataclass
class Ctx:
    """A running job's state, shared by its draw loops and its commits."""

    store: Store
    cfg: SampleConfig
    reward: RewardSpec  # the job's reward composition (its reward_spec, read)
    run_id: str
    model: str
    revision: str
    verifiers: dict
    stored: dict
    summary: SampleSummary
    tally: RewardTally = field(default_factory=RewardTally)
    outcomes: list = field(default_factory=list)  # finished tasks' samples not yet in the ledger
    ledger_at: float = field(default_factory=time.monotonic)  # when the ledger was last written
    judge: object = None  # a pointwise Judge on the job's first engine, when the reward spec needs one
    bindings: dict = field(default_factory=dict)  # task_id -> rldata.rollout.EnvBinding | None
    max_model_len: int = 64  # the engines' context
    model_path: str = ""
    episodes: object = None  # rldata.rollout.EpisodeStats of the job's episode batches
    tool_episodes: tuple = (0, 0)  # (episodes that called a tool, episodes)
    adaptive: object = None  # the job's AdaptiveSpec when it samples in rounds
    counts: dict = field(default_factory=dict)  # adaptive: task_id -> [n verified, n_correct, n_error]
    first: dict = field(default_factory=dict)  # fixed N: task_id -> first sample index to draw (default 0)
    sampled: set = field(default_factory=set)  # task ids this run drew samples for
    too_long: set = field(default_factory=set)  # task ids whose prompt does not fit the context
    # engines the caller lent (running actors, an rldata.engine.pool.EnginePool or EnginePools): the
    # job neither starts nor kills them; ``lease``: the ones it borrowed (rldata.engine.pool.borrow)
    lent: object = None
    lease: object = None
    progress: Callable = progress  # the bar factory the draw loops advance (rldata.console.progress)
    ledger_every_s: float = 30.0  # upsert the finished tasks' ledger rows at most this often
    # the model's rldata.rollout.Renderer when plain tasks go through its chat template (the job's
    # sampling has chat_template on); None: plain prompts go as text
    renderer: object = None


def commit_batch(
    ctx: Ctx, batch: pl.DataFrame, samples: Sequence[Sequence], offsets: Sequence[int] | None = None
) -> None:
    spec, s = ctx.cfg.sampling, ctx.summary
    traj_rows, items, meta, fresh, too_long = [], [], {}, {}, {}
    not_generated: set[str] = set()  # samples whose prompt did not fit: never generated, never verified
    for b_i, (row, group) in enumerate(zip(batch.iter_rows(named=True), samples)):
        task_id = row["task_id"]
        vname, _ = ctx.verifiers[row["domain"]]
        have = ctx.stored.get(task_id, {})
        binding = ctx.bindings.get(task_id)
        ekey = binding.ledger_key if binding is not None else ""
        first = offsets[b_i] if offsets is not None else 0
        for idx, smp in enumerate(group, start=first):
            if idx in have:  # stored by an earlier (killed, or smaller-N) job: keep what is stored
                tid = have[idx][0]  # its own id: an upgraded store's old samples keep theirs
                completion, verified = have[idx][1], have[idx][2]
            else:
                tid = traj_id(ctx.model, spec.params_hash, spec.seed, task_id, idx, ekey)
                completion, verified = smp.text, False
                traj_rows.append(
                    {
                        "traj_id": tid,
                        "task_id": task_id,
                        "run_id": ctx.run_id,
                        "sample_idx": idx,
                        "model": ctx.model,
                        "model_revision": ctx.revision,
                        "policy_version": 0,
                        "params_hash": spec.params_hash,
                        "sampling_params": spec.to_json(),
                        "seed": spec.seed,
                        "prompt": row["prompt"],
                        **episode_columns(smp, binding),
                    }
                )
            bad = unverifiable(smp, max_model_len=ctx.max_model_len) if idx not in have else None
            if bad is not None:  # nothing to verify: an error verdict, never a pass or a fail
                too_long[tid] = bad
                meta[tid] = (task_id, row["domain"])
                fresh[tid] = (row, smp)
                if smp.finish_reason == "prompt_too_long":  # a task, once, whatever index it starts at
                    ctx.too_long.add(task_id)
                    s.prompt_too_long = len(ctx.too_long)
                    s.not_generated += 1
                    not_generated.add(tid)
                s.env_errors += int(smp.finish_reason == "env_error")
            elif not verified:
                items.append(
                    {
                        "key": tid,
                        "verifier": vname,
                        "domain": row["domain"],
                        "completion": completion,
                        "answer": row["answer"],
                        "tests": row["tests"],
                        "metadata": row.get("metadata"),
                        "prompt": row.get("prompt"),
                    }
                )
                meta[tid] = (task_id, row["domain"])
                if idx not in have:  # a new sample: its reward is composed below
                    fresh[tid] = (row, smp)
    t_verify = time.monotonic()
    verdicts = verify_on_ray(items, timeout_s=ctx.cfg.verify.timeout_s) if items else {}
    t_rows = time.monotonic()
    s.time_verify_s += t_rows - t_verify
    verdicts.update(too_long)  # a verifier-style error: counted in n_error, never as a pass or a fail
    ver_rows, outcomes, tallies = [], [], {}
    for tid, (task_id, domain) in meta.items():
        vname, vversion = ctx.verifiers[domain]
        vs = verdicts[tid]
        ver_rows.extend(verdict_rows(task_id, tid, vname, vversion, vs))
        ok = all_passed(vs)
        tallies[tid] = (ok, no_answer(vs))
        if ctx.adaptive is not None:  # the round loop decides on these counts
            c = ctx.counts[task_id]
            c[0] += int(ok is not None)
            c[1] += int(bool(ok))
            c[2] += int(ok is None)
        elif task_id not in ctx.stored:  # fresh task: this batch holds all its samples
            b = ctx.bindings.get(task_id)
            outcomes.append(
                (task_id, verifier_key(vname, vversion), ok, b.ledger_key if b is not None else "")
            )
    ver_rows += _compose_rewards(ctx, traj_rows, fresh, verdicts)
    # Order matters for resume: samples, then their verifications, then the ledger.  Keyed writes
    # (insert-if-absent): a concurrent job over the same tasks writes the same traj_ids, and each row
    # must land once.  What the other job wrote first is kept, with its own verifications.
    added = ctx.store.append("trajectories", traj_rows, dedupe=True)
    theirs: set = set()
    if added < len(traj_rows):
        ours = _written_by(ctx, [r["traj_id"] for r in traj_rows])
        theirs = {r["traj_id"] for r in traj_rows} - ours
        s.samples_skipped += len(theirs)
        ver_rows = [r for r in ver_rows if r["traj_id"] in ours or r["traj_id"] not in fresh]
        traj_rows = [r for r in traj_rows if r["traj_id"] in ours]
    ctx.store.append("verifications", ver_rows, dedupe=True)
    # the run's counts are of the verdicts it wrote: a sample another job wrote first counts there
    for tid, (ok, none) in tallies.items():
        if tid not in theirs:
            s.correct += int(bool(ok))
            # an error verdict of a sample that was never generated (its prompt did not fit) is no
            # verifier error: it is counted in not_generated (the ledger counts both in n_error)
            s.errors += int(ok is None and tid not in not_generated)
            s.no_answer += int(none)
    # The ledger is a merge over the whole passrates table: batched by time, not per commit.  The job
    # rebuilds every task's row from the stored samples at the end, so a kill loses nothing.
    ctx.outcomes += outcomes
    if ctx.outcomes and time.monotonic() - ctx.ledger_at >= ctx.ledger_every_s:
        ctx.store.upsert(
            "passrates",
            rows_from_outcomes(
                ctx.outcomes, model=ctx.model, params_hash=spec.params_hash, run_id=ctx.run_id
            ),
        )
        ctx.outcomes, ctx.ledger_at = [], time.monotonic()
    ctx.sampled.update(batch["task_id"].to_list())
    s.tasks_sampled = len(ctx.sampled)
    s.samples += len(traj_rows)
    s.time_commit_s += time.monotonic() - t_rows


def _written_by(ctx: Ctx, traj_ids: list[str]) -> set[str]:
    """Which of ``traj_ids`` this run wrote (the rest were written first by a concurrent job)."""
    rel = ctx.store.sql(
        "SELECT traj_id FROM trajectories JOIN _ids USING (traj_id) WHERE run_id = $1",
        params=[ctx.run_id],
        extra={"_ids": pa.table({"traj_id": pa.array(traj_ids, pa.string())})},
    )
    return {r[0] for r in rel.fetchall()}


def _compose_rewards(ctx: Ctx, traj_rows: list[dict], fresh: dict, verdicts: dict) -> list[dict]:
    """Compose the new samples' rewards (this batch is the z-score batch), set ``reward`` on their
    trajectory rows, tally every component, and return the judge's verification rows, if it ran."""
    if not fresh:
        return []
    tids = list(fresh)
    rows = [fresh[t][0] for t in tids]
    completions = [fresh[t][1].text for t in tids]
    judge_rows_, jv = [], None
    if ctx.judge is not None:
        jv = ctx.judge.pointwise([r["prompt"] for r in rows], completions, [r["answer"] for r in rows])
        judge_rows_ = judge_rows(
            jv, tids, [r["task_id"] for r in rows], verifier=POINTWISE, version=ctx.judge.version
        )
    composed = score_samples(
        [r["domain"] for r in rows],
        [all_passed(verdicts[t]) for t in tids],
        [fresh[t][1].completion_tokens for t in tids],
        ctx.reward,
        judge=jv,
        no_answer=[no_answer(verdicts[t]) for t in tids],
    )
    ctx.tally.add(composed)
    total = dict(zip(tids, composed["total"].to_list()))
    for r in traj_rows:
        r["reward"] = total.get(r["traj_id"])
    return judge_rows_
