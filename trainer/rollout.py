"""One step's rollouts: draw prompts, generate G samples each on the engine actors, verify, reward,
compute group advantages, and drop-and-replace zero-variance groups (dynamic sampling).

Every id and seed is a pure function of (run, step, round, slot, task), so a resumed run regenerates
exactly the rollouts an uninterrupted run would have: ``round`` is the dynamic-sampling round (0 =
the step's first draw, 1.. = replacements), ``slot`` the prompt's position in its round (a task
drawn twice in one round gets two different groups).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from rldata.console import log
from rldata.curriculum import (
    SAMPLERS,
    Bucket,
    Curriculum,
    CurriculumSampler,
    Phase,
    empty_selection_reason,
    late_phases,
    selection_buckets,
)
from rldata.curriculum import load as load_curriculum
from rldata.curriculum.live import LiveState, predicted_priors
from rldata.curriculum.sampler import uses_live
from rldata.errors import RldataError
from rldata.rewards.compose import RewardSpec, load_reward_spec, score_samples
from rldata.rollout import generate, verify_rollouts
from rldata.sql_guard import check_predicate
from rldata.store.core import Store
from rldata.trainer.advantages import compute_advantages, zero_variance_groups
from rldata.trainer.config import TrainConfig
from rldata.verify.base import all_passed, no_answer

__all__ = [
    "UNIFORM_BUCKET",
    "Group",
    "RoundTimes",
    "build_sampler",
    "collect_step",
    "ledger_prior",
    "load_reward",
    "request_seed",
    "rollout_id",
    "set_advantages",
    "verify_groups",
]

UNIFORM_BUCKET = "all"  # the one bucket of a run without a curriculum
_TASK_COLS = "task_id, domain, prompt, messages, answer, tests, metadata, env_id, env_version"


def request_seed(seed: int, step: int, rnd: int, slot: int, task_id: str) -> int:
    """The engine seed of one prompt's G samples (vLLM seeds sample i with seed + i: keep headroom)."""
    h = hashlib.sha256(f"{seed}|{step}|{rnd}|{slot}|{task_id}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x3FFFFFFF


def rollout_id(run_id: str, step: int, rnd: int, slot: int, task_id: str, sample_idx: int) -> str:
    """``traj_id`` of a training rollout: a resumed run writes the same ids, never duplicates."""
    return hashlib.sha256(f"train|{run_id}|{step}|{rnd}|{slot}|{task_id}|{sample_idx}".encode()).hexdigest()[
        :32
    ]


@dataclass
class Group:
    """One prompt's G samples, their verdicts, rewards and advantages."""

    task: Mapping[str, Any]  # task_id, domain, prompt, answer, tests, env_id, env_version, ...
    bucket: str
    rnd: int
    slot: int
    seed: int
    samples: list = field(default_factory=list)  # [G] rldata.rollout.Rollout (a completion or an episode)
    verdicts: list = field(default_factory=list)  # [G] list[Verdict]
    passed: list = field(default_factory=list)  # [G] bool | None (None = verifier error)
    rewards: np.ndarray | None = None  # [G]
    advantages: np.ndarray | None = None  # [G]
    traj_ids: list[str] = field(default_factory=list)
    kept: bool = True
    drop_reason: str | None = None
    composed: Any = None  # [G] rows of reward components (rldata.rewards.compose.compose_rewards)
    judge_verdicts: list | None = None  # [G] pointwise judge verdicts, when the reward spec uses a judge
    env: Any = None  # the rldata.rollout.EnvBinding the task ran in; None = a plain prompt


@dataclass
class RoundTimes:
    generate: float = 0.0
    reward: float = 0.0
    rounds: int = 0
    live: dict = field(default_factory=dict)  # the live sampler's draw statistics (rldata.curriculum.live)


# ---- task source ---------------------------------------------------------------------------------
def _uniform_curriculum(seed: int) -> Curriculum:
    return Curriculum(
        buckets=(Bucket(UNIFORM_BUCKET, 0.0, 1.0),),
        phases=(Phase(UNIFORM_BUCKET, {UNIFORM_BUCKET: 1.0}),),
        seed=seed,
        sampler="uniform",
    )


def build_sampler(
    store: Store,
    cfg: TrainConfig,
    *,
    sampler: str | None = None,
    tasks_where: str | None = None,
    tasks_selection: str | None = None,
    exclude: Sequence[str] = (),
    prior_model: str | None = None,
) -> tuple[CurriculumSampler, dict[str, dict]]:
    """The step sampler and the task rows it draws from.

    With ``cfg.curriculum``: the buckets of its selection (``selections.bucket`` of the kept rows, the
    one source of membership: edges an old curriculum file carries are not read; the file's bucket
    names are the ones its phases weigh, and the sampler refuses tasks in a bucket it does not name).
    Without: every task (matching ``tasks_where``, or kept by selection ``tasks_selection``) in one
    bucket, drawn uniformly.  ``exclude`` (the
    held-out tasks) is never trained on.  The sampler is seeded by the run's seed.  A ``live:*``
    sampler's posteriors start from ``prior_model``'s ledger rows (the base model's offline counts,
    see :func:`ledger_prior`) unless ``cfg.live.prior`` is flat; ``gaussian`` also reads those rows'
    rates for tasks the run has no evidence of, the tasks' domains, and the run's length.
    """
    skip = set(exclude)
    if cfg.curriculum:
        cur = load_curriculum(cfg.curriculum)
        found = selection_buckets(store, cur, cfg.curriculum)
        late = late_phases(cur, cfg.steps)
        if late:
            log(
                f"warning: {cfg.curriculum}: phase(s) {', '.join(late)} start after step {cfg.steps} unless a "
                "promotion rule fires first: this run may never train on them (more steps, or "
                "until_step values below the run's steps, e.g. rldata stratify --phase-steps)"
            )
        buckets = {b: [t for t in ts if t not in skip] for b, ts in found.items()}
        buckets = {b: ts for b, ts in buckets.items() if ts}
    elif tasks_selection is not None:
        cur = _uniform_curriculum(cfg.rollout.seed)
        rows = store.sql(
            "SELECT task_id FROM selections WHERE selection = $1 AND decision = 'keep' ORDER BY task_id",
            params=[tasks_selection],
        ).fetchall()
        if not rows:
            raise RldataError(empty_selection_reason(store, tasks_selection), field="selection")
        buckets = {UNIFORM_BUCKET: [t for (t,) in rows if t not in skip]}
    else:
        cur = _uniform_curriculum(cfg.rollout.seed)
        if tasks_where is not None:
            check_predicate(tasks_where, field="where")
        q = (
            "SELECT task_id FROM tasks"
            + (f" WHERE {tasks_where}" if tasks_where else "")
            + " ORDER BY task_id"
        )
        buckets = {UNIFORM_BUCKET: [t for (t,) in store.sql(q).fetchall() if t not in skip]}
    ids = sorted({t for ts in buckets.values() for t in ts})
    if not ids:
        raise RldataError(
            "no training tasks"
            + (f" matching {tasks_where!r}" if tasks_where else "")
            + (" once the held-out tasks are left out" if skip else "")
        )
    tbl = store.sql(
        f"SELECT {_TASK_COLS} FROM tasks JOIN _ids USING (task_id)",
        extra={"_ids": pa.table({"task_id": pa.array(ids, pa.string())})},
    ).pl()
    tasks = {r["task_id"]: r for r in tbl.iter_rows(named=True)}
    missing = [t for t in ids if t not in tasks]
    if missing:
        raise RldataError(f"{len(missing)} training task(s) are not in the tasks table, e.g. {missing[0]}")
    live, name = None, sampler or cur.sampler
    if uses_live(name):
        live_cfg = cfg.live
        # the posteriors' prior (prior: ledger), and the offline rates gaussian reads in any case
        prior = (
            ledger_prior(store, prior_model, ids, params_hash=cfg.rollout.params_hash)
            if prior_model and (live_cfg.prior == "ledger" or name == "gaussian")
            else None
        )
        # a task with no ledger counts starts from its stored prediction (rldata predict), if any
        predicted = predicted_priors(store, prior_model, ids) if prior_model and live_cfg.predicted else None
        live = LiveState(live_cfg, prior=prior, predicted=predicted)
    s = CurriculumSampler(
        cur,
        buckets,
        seed=cfg.rollout.seed,
        sampler=sampler,
        live=live,
        domains={t: r["domain"] for t, r in tasks.items()},
        total_steps=cfg.steps,
    )
    return s, tasks


def ledger_prior(
    store: Store, model: str, task_ids: Sequence[str], *, params_hash: str | None = None
) -> dict[str, tuple[int, int]]:
    """task_id -> (passes, fails) of ``model``'s offline ledger row per task: the row under the run's
    sampling params hash when there is one, else the one with the most samples (never several pooled:
    two verifiers' rows count the same samples twice)."""
    rows = store.sql(
        "SELECT task_id, arg_max(n_correct, (CASE WHEN params_hash = $ph THEN 1 ELSE 0 END, n, verifier_key)), "
        "       arg_max(n, (CASE WHEN params_hash = $ph THEN 1 ELSE 0 END, n, verifier_key)) "
        "FROM passrates JOIN _ids USING (task_id) WHERE model = $model GROUP BY task_id",
        params={"model": model, "ph": params_hash or ""},
        extra={"_ids": pa.table({"task_id": pa.array(sorted(set(task_ids)), pa.string())})},
    ).fetchall()
    return {t: (int(k), int(n) - int(k)) for t, k, n in rows}


def extra_draws(sampler: CurriculumSampler, k: int) -> list[tuple[str, str]]:
    """k more draws from the current phase WITHOUT counting a step (replacements for dropped groups)."""
    return SAMPLERS[sampler.sampler](sampler, k)


# ---- generate, verify, reward ----------------------------------------------------------------------
def verify_groups(
    groups: list[Group], verifier_for, *, timeout_s: float | None, max_model_len: int = 64
) -> None:
    """Set each group's ``verdicts`` and ``passed``.  Every result is looked up by the sample's own
    traj id, never by position, so a check that fails or times out mid-batch cannot shift the
    verdicts (and rewards) of the samples after it.  An episode whose environment failed gets an
    error verdict (scored as a wrong answer)."""
    keys = [tid for g in groups for tid in g.traj_ids]
    tasks = [g.task for g in groups for _ in g.samples]
    verdicts = verify_rollouts(
        keys,
        tasks,
        [s for g in groups for s in g.samples],
        verifier_for,
        timeout_s=timeout_s,
        max_model_len=max_model_len,
    )
    for g in groups:
        g.verdicts = [verdicts[t] for t in g.traj_ids]
        g.passed = [all_passed(v) for v in g.verdicts]


def _run_round(ctx, step: int, rnd: int, draws: list[tuple[str, str]], times: RoundTimes) -> list[Group]:
    cfg = ctx.cfg
    groups = []

    for slot, (task_id, bucket) in enumerate(draws):
        seed = request_seed(cfg.rollout.seed, step, rnd, slot, task_id)
        groups.append(
            Group(
                task=ctx.tasks[task_id],
                bucket=bucket,
                rnd=rnd,
                slot=slot,
                seed=seed,
                env=ctx.bindings.get(task_id),
            )
        )
    t0 = time.monotonic()
    outs = generate(
        ctx.engines,
        [g.task for g in groups],
        [g.seed for g in groups],
        ctx.spec,
        bindings=[g.env for g in groups],
        renderer=ctx.renderer,
        max_model_len=ctx.max_model_len,
        stats=ctx.episode_stats,
    )
    times.generate += time.monotonic() - t0

    t0 = time.monotonic()
    for g, samples in zip(groups, outs):
        g.samples = list(samples)
        g.traj_ids = [
            rollout_id(ctx.run_id, step, rnd, g.slot, g.task["task_id"], i) for i in range(len(samples))
        ]
    verify_groups(groups, ctx.verifier_for, timeout_s=ctx.verify_timeout_s, max_model_len=ctx.max_model_len)
    rewards = _rewards(ctx, groups)  # [groups, G]
    adv = compute_advantages(rewards, estimator=cfg.advantage, eps=cfg.adv_eps)  # [groups, G]
    set_advantages(groups, rewards, adv, dynamic_sampling=cfg.dynamic_sampling)
    times.reward += time.monotonic() - t0
    times.rounds += 1
    return groups


def set_advantages(
    groups: list[Group], rewards: np.ndarray, adv: np.ndarray, *, dynamic_sampling: bool
) -> None:
    """Store each group's rewards and advantages; with dynamic sampling, mark the groups without
    signal as dropped.  Keep or drop is decided on the spread of correctness (``r_mix``: the reward
    before the length penalty), never on the penalty's: an all-wrong group with rewards
    ``[0 x7, -0.01]`` has no signal, yet the std division would blow the penalty spread up into
    full-size advantages (+0.35/-2.47).  Kept groups' advantages use the composed reward."""
    flat = zero_variance_groups(
        np.array([g.composed["r_mix"].to_list() for g in groups]), tol=1e-12
    )  # [groups]
    for i, g in enumerate(groups):
        g.rewards, g.advantages = rewards[i], adv[i]
        if dynamic_sampling and flat[i]:
            g.kept, g.drop_reason = False, "zero_variance"


def load_reward(cfg: TrainConfig) -> RewardSpec:
    """The run's reward spec (``cfg.reward_spec``), checked against the run's ``max_tokens``, or the
    default: the verifier's 1/0."""
    if not cfg.reward_spec:
        return RewardSpec()
    return load_reward_spec(cfg.reward_spec).check_max_tokens(cfg.rollout.max_tokens, where=cfg.reward_spec)


def _rewards(ctx, groups: list[Group]) -> np.ndarray:
    """Compose the round's rewards from the reward spec (the round is the z-score batch); with the
    default spec a sample's reward is 1 when every verification layer passed, else 0.  A verifier
    error counts as a wrong answer before the z-score (rldata.rewards.compose) and in the metrics."""
    samples = [(g, i) for g in groups for i in range(len(g.samples))]
    verdicts = None
    if ctx.judge is not None:
        verdicts = ctx.judge.pointwise(
            [g.task["prompt"] for g, _ in samples],
            [g.samples[i].text for g, i in samples],
            [g.task["answer"] for g, _ in samples],
        )
    composed = score_samples(
        [g.task["domain"] for g, _ in samples],
        [g.passed[i] for g, i in samples],
        [g.samples[i].completion_tokens for g, i in samples],
        ctx.reward,
        judge=verdicts,
        no_answer=[bool(g.verdicts) and no_answer(g.verdicts[i]) for g, i in samples],
    )
    start = 0
    for g in groups:
        g.composed = composed.slice(start, len(g.samples))
        if verdicts is not None:
            g.judge_verdicts = verdicts[start : start + len(g.samples)]
        start += len(g.samples)
    return np.array([g.composed["total"].to_list() for g in groups])  # [groups, G]


def collect_step(ctx, step: int) -> tuple[list[Group], RoundTimes]:
    """All groups of a step: the first draw plus up to ``max_resample`` rounds of replacements."""
    cfg = ctx.cfg
    times = RoundTimes()
    draws = ctx.sampler.next_batch(cfg.prompts_per_step)
    groups: list[Group] = []
    for rnd in range(1 + (cfg.max_resample if cfg.dynamic_sampling else 0)):
        new = _run_round(ctx, step, rnd, draws, times)
        groups += new
        missing = sum(not g.kept for g in new)
        if missing == 0 or rnd == cfg.max_resample or not cfg.dynamic_sampling:
            break
        draws = extra_draws(ctx.sampler, missing)
    if ctx.sampler.live is not None:
        times.live = ctx.sampler.live.pop_draw_stats()
    return groups, times
