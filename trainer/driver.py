"""The GRPO driver: rollouts on vLLM engine actors, updates on DDP learner actors, sync or async.

Per step (sync mode; async mode runs the first line ahead in a producer thread, see below)::

    sampler.next_batch(P) -> engines generate G samples per prompt (with behaviour log-probs)
      -> verify on Ray -> rewards -> group advantages -> zero-variance groups dropped and replaced
         (up to max_resample rounds) -> collate kept groups -> LearnerGroup.step
      -> new weights into every engine in place (one flat buffer, copied into vLLM's parameters),
         policy_version += 1
      -> write-back (trajectories incl. dropped groups, verifications, ledger, metrics)
      -> sampler.observe(step, per-bucket accuracy) -> checkpoint every K steps and at the end
      -> held-out evaluation when due -> re-profile of the pool when it plateaued (live.reprofile_after)

Engines come from :func:`rldata.engine.actors.start_engines`, the same code as ``rldata sample``.
Rollouts come from a :class:`rldata.trainer.pipeline.Pipeline`: a producer thread generates step
after step, at most K = ``cfg.staleness_bound`` steps ahead of the learners (0 in sync mode, so it
waits for every update), and loads new weights into the engines between generate calls.  Every
rollout records the policy version that generated it and the step that consumed it.  Curriculum
observations reach the sampler through the producer (async), or directly when it waits (sync, and
checkpoints: a checkpoint is a hold step the producer does not draw past, so its sampler state is exact).

Resume: the newest checkpoint restores learners (model + optimizer), sampler state and RNG; the
run's rows written after the checkpoint's step are deleted, and the steps are redone with the same
ids and seeds, so the store ends exactly as after an uninterrupted run.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rldata.console import log, progress, stage
from rldata.engine.actors import RemoteEngine, ensure_ray, start_engines
from rldata.engine.pool import borrow
from rldata.errors import RldataError
from rldata.heavy import ray
from rldata.jobs.sample import override_verifier
from rldata.rewards.compose import RewardSpec
from rldata.rewards.judge import Judge
from rldata.rollout import EpisodeStats, Renderer
from rldata.runs.core import record_run
from rldata.runs.trackers import open_tracker
from rldata.store.core import Store
from rldata.trainer import writeback as wb
from rldata.trainer.checkpoint import checkpoint_dir, commit, save_trainer_state, staging_dir
from rldata.trainer.config import TrainCommand, TrainConfig, TrainRun
from rldata.trainer.evaluate import evaluate
from rldata.trainer.handoff import Observations, Weights
from rldata.trainer.learner import LearnerGroup
from rldata.trainer.pipeline import Pipeline, is_stale, staleness_metrics
from rldata.trainer.policy import collate
from rldata.trainer.reprofile import eval_history, reprofile, reprofile_now
from rldata.trainer.rollout import collect_step, load_reward
from rldata.trainer.state import RunState, TrainSummary, finished, plan_run, restore, run_dir
from rldata.trainer.writer import Writer
from rldata.verify import for_domain

__all__ = ["TrainSummary", "run_args", "run_dir", "train"]


@dataclass
class _Ctx:
    """What the rollout functions read (see rldata.trainer.rollout)."""

    cfg: TrainConfig
    run_id: str
    engines: list
    tasks: dict
    sampler: object
    spec: object
    verify_timeout_s: float
    reward: RewardSpec = field(default_factory=RewardSpec)  # how verifier (and judge) results become rewards
    judge: object = None  # a pointwise Judge, when the reward spec mixes one in
    bindings: dict = field(default_factory=dict)  # task_id -> rldata.rollout.EnvBinding | None
    renderer: object = None  # rldata.rollout.Renderer, when some task runs as an episode
    max_model_len: int = 64
    episode_stats: object = None  # rldata.rollout.EpisodeStats over the run's episode rounds
    _verifiers: dict = field(default_factory=dict)

    def verifier_for(self, domain: str) -> tuple[str, str]:
        """(name, version) of the verifier that scores ``domain``: the config's override, else the
        domain's; they key the verdicts and the ledger rows."""
        if domain not in self._verifiers:
            name = self.cfg.verify.verifier
            v = override_verifier(name) if name else for_domain(domain)
            self._verifiers[domain] = (v.name, v.version)
        return self._verifiers[domain]


def _ray_cpus_needed(cfg: TrainConfig) -> float:
    # An engine actor reserves one CPU, each learner its bundle, verification tasks one CPU.  Phases
    # alternate in synchronous mode, so these are scheduling slots, not cores that must all be busy at
    # once (async mode runs them at once: the same slots, sharing the cores).  Held-out evaluations
    # borrow the run's engines; the one a resumed run redoes before they start reuses their slot.
    return cfg.engine.engines + cfg.num_learners * cfg.cpus_per_learner + 1


def _start_ray(address: str | None, need: float) -> None:
    have = ensure_ray(address, num_cpus=max(os.cpu_count() or 1, math.ceil(need))).get("CPU", 0)
    if have < need:
        raise RldataError(
            f"the Ray cluster has {have:g} CPUs, this run needs {need:g} (engines + learners x "
            "cpus_per_learner + 1 for verification); start Ray with more "
            f"--num-cpus or lower engines / num_learners / cpus_per_learner"
        )


def _prompt_ids(tokenizer, cache: dict, prompt: str, expect: int) -> list[int]:
    ids = cache.get(prompt)
    if ids is None:
        ids = cache[prompt] = list(tokenizer(prompt)["input_ids"])
    if len(ids) != expect:
        raise RldataError(
            f"prompt {prompt!r}: the tokenizer gives {len(ids)} tokens, the engine saw {expect}"
        )
    return ids


def _batch(groups, tokenizer, cache: dict):
    """The kept groups as one padded batch.  An episode brings its own prompt ids and a mask: only the
    tokens the model generated enter the loss, never tool results or environment text."""
    prompts, completions, masks, old, adv = [], [], [], [], []
    for g in groups:
        if not g.kept:
            continue
        for s, a in zip(g.samples, g.advantages):
            if s.prompt_ids is not None and not s.prompt_ids:  # its environment failed before the first turn
                continue
            if s.logprobs is None:
                raise RldataError("the engine returned no log-probs")
            prompt = (
                list(s.prompt_ids)
                if s.prompt_ids is not None
                else _prompt_ids(tokenizer, cache, g.task["prompt"], s.prompt_tokens)
            )
            prompts.append(prompt)
            completions.append(list(s.token_ids))
            masks.append(list(s.mask) if s.mask is not None else None)
            old.append(list(s.logprobs))
            adv.append(float(a))
    if not prompts:
        return None
    return collate(
        prompts,
        completions,
        advantages=adv,
        old_logps=old,
        pad_id=tokenizer.pad_token_id or 0,
        completion_masks=masks if any(m is not None for m in masks) else None,
    )


def _save(learners, sampler, root: Path, *, step: int, version: int, extra: dict) -> Path:
    final = checkpoint_dir(root, step)
    tmp = staging_dir(final)
    learners.save(tmp)
    save_trainer_state(
        tmp, step=step, policy_version=version, curriculum_state=sampler.state_dict(), extra=extra
    )
    return commit(tmp, final)


def train(
    store: Store,
    command: TrainCommand,
    *,
    engines=None,
    writeback_interval_s: float = 2.0,
    exclude: Sequence[str] = (),
    exclude_info: Mapping[str, Any] | None = None,
) -> TrainSummary:
    """Run (or resume) the GRPO training run ``command`` describes (its ``train`` config and how its
    ``run`` starts); returns its summary.

    ``engines``, not a setting of the run: an :class:`rldata.engine.pool.EnginePool` (or
    ``EnginePools``) of the run's model and engine settings to borrow the rollout engines from
    instead of starting them (the run syncs its weights into them; the pool reloads the model's own
    before its next loan).

    ``writeback_interval_s``, not a setting of the run: steps' rows are committed together at most
    this often (rldata.trainer.writer): a commit costs about the same for one step's rows as for
    ten, and on a small machine it competes with the engine and the learner for the cores.
    Checkpoints (and the end) always commit at once.

    ``exclude``, not a setting of the run but what the store's flag tables hold: task ids never
    drawn, the flagged ones (rldata.ledger.flags, read by :func:`rldata.api.train` unless
    ``run.include_flagged``); ``exclude_info`` (the flag tables' versions, the flags per reason) goes
    into the run's arguments beside how many (``flags``)."""
    if writeback_interval_s < 0:
        raise RldataError(f"writeback_interval_s must be >= 0, got {writeback_interval_s}")
    run_opts = command.run
    cfg, state = plan_run(store, command.train, run_opts, exclude=exclude, exclude_info=exclude_info)
    if run_opts.resume and (done := finished(store, cfg, state)) is not None:
        log(f"run {state.run_id} is already done (step {done.last_step} of {cfg.steps}): nothing to do")
        return done
    log(run_header(cfg, run_opts, state))
    _start_ray(run_opts.address, _ray_cpus_needed(cfg))
    restore(store, cfg, state, resume=run_opts.resume)

    args = run_args(cfg, run_opts, state)
    tracker_dir = run_opts.tracker_dir or run_dir(cfg, state.run_id) / run_opts.tracker
    with (
        record_run(store, "train", args, run_id=state.run_id) as run,
        open_tracker(run_opts.tracker, tracker_dir, run_id=state.run_id, config=args) as tracker,
    ):
        state.tracker = tracker
        _loop(store, cfg, run_opts, state, writeback_interval_s, engines)
        run.summary = state.summary.to_dict()
    return state.summary


def run_args(cfg: TrainConfig, run: TrainRun, state: RunState) -> dict:
    """What the runs row (and a tracker) records of a run: its config, its sections nested, every
    run option as rldata train took it, the flagged tasks it left out (how many, the flag tables'
    versions, per reason), the base model and the step it started from."""
    return {
        "config": cfg.to_dict(),
        "run": asdict(run),
        "flags": state.flags,
        "base_model": state.base.path,
        "start_step": state.start,
    }


def run_header(cfg: TrainConfig, run: TrainRun, state: RunState) -> str:
    """The effective setup of a run, on one line: what it trains, on what, how."""
    plural = lambda n, word: f"{n} {word}{'s' if n != 1 else ''}"
    k = cfg.staleness_bound
    mode = f"async (max staleness {k})" if k else "sync"
    learners = f"{plural(cfg.num_learners, 'learner')} {cfg.strategy} {cfg.mixed_precision}"
    learners += f" LoRA r={cfg.lora.get('r')}" if cfg.lora else ""
    learners += " gradient checkpointing" if cfg.gradient_checkpointing else ""
    if cfg.curriculum:
        tasks = f"curriculum {cfg.curriculum} (sampler {state.sampler.sampler})"
    elif run.selection:
        tasks = f"selection {run.selection!r} uniform"
    else:
        tasks = "every task uniform" + (f" where {run.where}" if run.where else "")
    ev = cfg.eval
    evals = (
        f"held-out {len(state.eval_ids)} tasks x {cfg.eval_spec().n} "
        + (f"every {ev.every} steps" if ev.every else "before and after")
        if state.eval_ids
        else "no held-out eval (--eval-heldout)"
    )
    resume = f" (resuming after step {state.start})" if state.start else ""
    return (
        f"train {state.run_id}: {state.base.name}, {plural(cfg.steps, 'step')} x "
        f"{plural(cfg.prompts_per_step, 'prompt')} x {plural(cfg.rollout.n, 'sample')}{resume}, {mode}; "
        f"{learners}; {plural(cfg.engine.engines, 'engine')}; {plural(len(state.tasks), 'task')}: {tasks}; "
        f"{evals}"
    )


def _loop(
    store: Store, cfg: TrainConfig, run_opts: TrainRun, state: RunState, writeback_s: float, lent=None
) -> None:
    from transformers import AutoTokenizer  # loaded when a run starts (a third-party import)

    run_id, base_path, ckpt_path, summary = state.run_id, state.base.path, state.ckpt_path, state.summary
    t_run = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(base_path)

    def run_eval(step: int, model_dir, engines: list | None = None) -> None:
        res = evaluate(store, model_dir, cfg, state.eval_ids, address=run_opts.address, engines=engines)
        summary.evals.append(
            {
                "step": step,
                "model": res.model,
                "accuracy": res.accuracy,
                "tasks": res.tasks,
                "ci": [res.ci_low, res.ci_high],
            }
        )
        history.append((step, res.accuracy))
        # upsert: a resumed run may redo an evaluation whose rows already landed
        evals = {
            "eval/accuracy": res.accuracy,
            "eval/errors": res.errors,
            "eval/ci_low": res.ci_low,
            "eval/ci_high": res.ci_high,
        }
        store.upsert("metrics", wb.metric_rows(run_id, step, evals))
        state.tracker.log(step, evals)
        log(
            f"eval step {step}: held-out accuracy {res.accuracy:.4f} (95% CI {res.ci_low:.3f}-{res.ci_high:.3f}) "
            f"over {res.tasks} tasks x {cfg.eval_spec().n} "
            f"(ledger model {res.model})"
        )

    history = eval_history(store, run_id, state.start) if cfg.live.reprofile_after else []

    def maybe_reprofile(step: int, model_dir, engines: list) -> None:
        """After the evaluation of ``step``: re-profile the pool when held-out accuracy plateaued."""
        if not reprofile_now(cfg, history, step):
            return
        r = reprofile(
            store,
            cfg,
            state.sampler,
            model_dir,
            version=state.version,
            engines=engines,
            address=run_opts.address,
        )
        values = {"reprofile/tasks": r.tasks, "reprofile/pass_rate": r.pass_rate}
        store.upsert("metrics", wb.metric_rows(run_id, step, values))
        state.tracker.log(step, values)
        log(
            f"re-profile after step {step}: held-out accuracy flat for {cfg.live.reprofile_after} "
            f"evaluation(s); {r.tasks} tasks x {cfg.live.reprofile_n} at {r.model}: mean pass rate {r.pass_rate:.4f}"
        )

    def eval_due(step: int) -> bool:
        return bool(state.eval_ids) and (
            step == cfg.steps or (cfg.eval.every > 0 and step % cfg.eval.every == 0)
        )

    if (
        ckpt_path is not None
        and eval_due(state.start)
        and not store.sql(
            "SELECT count(*) FROM metrics WHERE run_id = $1 AND step = $2 AND name = 'eval/accuracy'",
            params=[run_id, state.start],
        ).fetchall()[0][0]
    ):
        run_eval(state.start, ckpt_path)  # the run was killed during this checkpoint's evaluation
    if state.start >= cfg.steps:
        log(f"run {run_id} is already at step {state.start} of {cfg.steps}: nothing to train")
        summary.checkpoint = str(ckpt_path) if ckpt_path else None
        return

    model_now = str(ckpt_path or base_path)
    reward = load_reward(cfg)
    w = cfg.num_learners
    with stage(f"starting {w} learner{'s' if w != 1 else ''} ({cfg.strategy}, {cfg.mixed_precision})"):
        learners = LearnerGroup(model_now, cfg, ref_path=base_path, resume=ckpt_path is not None)
    engines, lease = [], None
    writer = Writer(
        partial(
            _commit,
            store,
            total=cfg.steps,
            summary=summary,
            tracker=state.tracker,
            params_hash=cfg.rollout.params_hash,
            run_id=run_id,
        ),
        interval_s=writeback_s,
    )
    try:
        # a pool holds the base model: a resumed run loads its checkpoint's weights into what it borrows
        lease = borrow(
            lent, model=base_path, max_model_len=cfg.engine.max_model_len, vllm=cfg.engine.vllm,
            engines=cfg.engine.engines, seed=cfg.rollout.seed, address=run_opts.address, name_as=model_now,
        )  # fmt: skip
        if lease is not None:
            engines = lease.actors
            if ckpt_path is not None:
                ray.get([e.load_weights_from.remote(str(ckpt_path)) for e in engines])
        else:
            engines = start_engines(
                cfg.engine.engines,
                model_now,
                seed=cfg.rollout.seed,
                name_prefix=f"rldata-train-{run_id}",
                tensor_parallel_size=cfg.engine.vllm.tensor_parallel_size,
                engine_kwargs={"max_model_len": cfg.engine.max_model_len, **cfg.engine.vllm.engine_kwargs()},
            )
        if state.eval_ids and ckpt_path is None:
            # Before the first step, on the run's own engines: they hold the base model's weights, and
            # an evaluation's engines of its own would cost an engine start (and a model load) each.
            with stage(
                f"held-out evaluation of the base model ({len(state.eval_ids)} tasks x {cfg.eval_spec().n})"
            ):
                run_eval(0, base_path, engines)
        elif ckpt_path is not None:  # the checkpoint predates its step's re-profile: redo it (draws nothing)
            maybe_reprofile(state.start, ckpt_path, engines)
        episodic = any(b is not None and not b.fast_single_turn for b in state.bindings.values())
        templated = cfg.rollout.chat_template == "on"  # plain prompts through the chat template (resolved)
        ctx = _Ctx(
            cfg=cfg,
            run_id=run_id,
            engines=engines,
            tasks=state.tasks,
            sampler=state.sampler,
            spec=cfg.rollout,
            verify_timeout_s=cfg.verify.timeout_s,
            reward=reward,
            bindings=state.bindings,
            renderer=Renderer(tokenizer) if episodic or templated else None,
            max_model_len=cfg.engine.max_model_len,
            episode_stats=EpisodeStats(),
        )
        if reward.needs_judge({t["domain"] for t in state.tasks.values()}):
            # judges with the current policy's engine
            ctx.judge = Judge(lease.remote(0) if lease is not None else RemoteEngine(engines[0]))
        _train_steps(
            store,
            cfg,
            ctx,
            learners,
            writer,
            tokenizer,
            state,
            save=lambda step, v: _save(
                learners, state.sampler, state.ckpt_root, step=step, version=v, extra=state.checkpoint_extra
            ),
            run_eval=run_eval,
            eval_due=eval_due,
            after_eval=maybe_reprofile,
        )
    finally:
        try:
            with stage("writing the last steps' rows"):
                writer.close()  # the steps done so far land even when a later one failed
        finally:
            if lease is not None:
                lease.close()
            else:
                for e in engines:
                    ray.kill(e)
            learners.shutdown()
            summary.seconds = time.monotonic() - t_run


def _train_steps(
    store, cfg, ctx, learners, writer, tokenizer, state: RunState, *, save, run_eval, eval_due, after_eval
) -> None:
    """Steps start+1..cfg.steps: rollouts from the pipeline (K = 0 in sync mode), updates, write-back;
    ``state.version`` follows the learners' updates."""
    k = cfg.staleness_bound
    run_id, start, summary = state.run_id, state.start, state.summary
    base_name, revision = state.base.name, state.base.revision
    weights, observations = Weights(state.version), Observations(ctx.sampler)

    def hold(step: int) -> bool:  # a checkpoint: the producer waits for it (its sampler state is exact)
        return (
            step == cfg.steps
            or eval_due(step)
            or bool(cfg.checkpoint_every and step % cfg.checkpoint_every == 0)
        )

    sync_s: dict[int, float] = {}  # step -> seconds its weight load took (in the producer)

    def prepare(step: int) -> int:  # producer thread, between generate calls
        sync_s[step] = sync_s.get(step, 0.0) + weights.load(ctx.engines)
        observations.apply()
        if ctx.sampler.live is not None:  # live posteriors are read at the version that will generate
            ctx.sampler.live.set_version(weights.engine_version)
        return weights.engine_version

    pipe = Pipeline(
        partial(collect_step, ctx),
        prepare=prepare,
        first=start + 1,
        last=cfg.steps,
        max_staleness=k,
        hold=hold,
    )
    prompt_cache: dict = {}
    ledger_version, ledger = state.version, list(state.pending)  # every outcome of the version now generating
    engine_idle, promotions = 0.0, 0
    pipe.start()
    try:
        with progress("training", total=cfg.steps - start, unit="steps") as bar:
            for step in range(start + 1, cfg.steps + 1):
                t0, idle0 = time.monotonic(), pipe.learner_idle
                item = pipe.get()
                (groups, rt), gen_version = item.payload, item.version
                gap = state.version - gen_version
                if is_stale(
                    state.version, gen_version, k
                ):  # impossible under capacity control; kept as a defence
                    for g in groups:
                        if g.kept:
                            g.kept, g.drop_reason = False, "stale"
                batch = _batch(groups, tokenizer, prompt_cache)
                stats, t_update = None, 0.0
                if batch is not None:
                    t1 = time.monotonic()
                    stats = learners.step(batch)
                    t_update = time.monotonic() - t1
                    state.version += 1
                    # The ref resolves to the weights after this update (the actor runs calls in order);
                    # the producer loads them before its next generate call.
                    weights.publish(state.version, learners.flat_weights_ref())
                # The ledger row of a policy version counts all its samples: one step's, or several when the
                # same version generated more than one (async mode, or an update skipped for want of a kept group).
                if gen_version != ledger_version:
                    ledger_version, ledger = gen_version, []
                ledger = [*ledger, *wb.outcomes(groups, ctx.verifier_for)]
                observations.push(step, wb.bucket_accuracy(groups), wb.group_evidence(groups, gen_version))
                if k == 0 or hold(step):
                    observations.apply()  # the producer is waiting for this step: the sampler is ours
                if not hold(step):
                    # The next generation needs only the published weights and the observations: let it
                    # start now, while this step's metrics are built (sync mode: off the critical path).
                    pipe.consumed(step)
                idle_now = pipe.engine_idle()
                times = {
                    "generate": rt.generate,
                    "reward": rt.reward,
                    "update": t_update,
                    "sync": sync_s.pop(step, 0.0),
                    "learner_idle": pipe.learner_idle - idle0,
                    "engine_idle": idle_now - engine_idle,
                    "step": time.monotonic() - t0,
                }
                engine_idle = idle_now
                metrics = wb.step_metrics(groups, stats, times)
                metrics |= staleness_metrics(gap, metrics["samples"], k)
                metrics |= (
                    rt.live
                )  # live:* samplers: posterior variance of the drawn tasks, skipped, re-probed
                metrics |= {
                    "policy_version": state.version,
                    "generated_by": gen_version,
                    "phase": ctx.sampler.phase_index,
                    "promoted": observations.promotions - promotions,
                    "stale_dropped": sum(g.drop_reason == "stale" for g in groups),
                }
                promotions = observations.promotions
                model = wb.ledger_model(base_name, run_id, gen_version)
                # Rows are built in the writer thread too: off the learners' critical path.
                rows = partial(
                    _rows,
                    groups,
                    ctx,
                    run_id=run_id,
                    step=step,
                    model=model,
                    revision=revision,
                    version=gen_version,
                )
                writer.submit(_StepRows(step, dict(metrics), rows, model, ledger))
                _accumulate(summary, metrics, groups)
                summary.last_step, summary.policy_version = step, state.version
                bar.advance(1, reward=f"{metrics['reward_mean']:.3f}", v=state.version)
                if hold(step):
                    writer.flush()  # a checkpoint promises that its steps' rows are in the store
                    path = save(step, state.version)
                    summary.checkpoint = str(path)
                    if eval_due(step):
                        # The producer waits for this hold, so the engines are idle: give them the weights
                        # just saved (the next step's sync, done early) and evaluate on them.
                        sync_s[step + 1] = weights.load(ctx.engines)
                        run_eval(step, path, ctx.engines)
                        after_eval(step, path, ctx.engines)  # the producer waits: the sampler is ours
                    pipe.consumed(step)  # only now may the producer draw past the checkpoint
    finally:
        pipe.close(timeout=120)


def _rows(groups, ctx, *, run_id, step, model, revision, version) -> tuple[list[dict], list[dict]]:
    traj = wb.trajectory_rows(
        groups, run_id=run_id, step=step, model=model, revision=revision, version=version, spec=ctx.spec
    )
    return traj, wb.verification_rows(groups, ctx.verifier_for, ctx.judge)


@dataclass(frozen=True)
class _StepRows:
    """One step's write-back, waiting in the writer's queue."""

    step: int
    metrics: dict
    rows: Callable[[], tuple[list[dict], list[dict]]]  # (trajectories, verifications), built in the writer
    model: str  # the ledger name of the policy version that generated the step
    ledger: list  # ALL outcomes of that version so far (its ledger rows are recounted whole)


def _commit(
    store,
    items: list[_StepRows],
    *,
    total: int,
    summary: TrainSummary,
    tracker,
    params_hash: str,
    run_id: str,
) -> None:
    """The write-back of one or more steps (in the writer thread), one commit per table: rollouts,
    verifications, ledger (each version's latest counts), then the metrics, last, so a step whose
    metrics landed has all its rows.  Each step's ``time/writeback`` is its share of the commit."""
    t0 = time.monotonic()
    traj, ver, ledgers = [], [], {}
    for it in items:
        t, v = it.rows()
        traj += t
        ver += v
        ledgers[it.model] = it.ledger  # a later step of the same version counts all of its samples
    wb.write_steps(store, traj=traj, ver=ver, ledgers=ledgers, params_hash=params_hash, run_id=run_id)
    share = (time.monotonic() - t0) / len(items)
    for it in items:
        it.metrics["time/writeback"] = share
    store.append("metrics", [r for it in items for r in wb.metric_rows(run_id, it.step, it.metrics)])
    for it in items:
        tracker.log(it.step, it.metrics)  # after the store: the tracker mirrors rows that landed
        summary.time["writeback"] = summary.time.get("writeback", 0.0) + share
        _log_step(it.step, total, it.metrics)


def _accumulate(summary: TrainSummary, m: dict, groups) -> None:
    summary.steps += 1
    summary.samples += int(m["samples"])
    summary.groups_kept += int(m["groups_kept"])
    summary.groups_dropped += int(m["groups_dropped"])
    for k, v in m.items():
        if k.startswith("time/"):
            summary.time[k[5:]] = summary.time.get(k[5:], 0.0) + float(v)


def _log_step(step: int, total: int, m: dict) -> None:
    loss = (
        f" kl {m['kl']:.4f} clip {m['clip_frac']:.3f} tis {m['tis_frac']:.3f} ent {m['entropy']:.3f} "
        f"rho {m['rho_mean']:.4f} mismatch {m['mismatch_kl']:.2e}"
        if "kl" in m
        else " (no kept group: update skipped)"
    )
    log(
        f"step {step}/{total} v{int(m['policy_version'])} (rollouts of v{int(m['generated_by'])}) "
        f"reward {m['reward_mean']:.3f} kept {int(m['groups_kept'])} dropped {int(m['groups_dropped'])}{loss} "
        f"len {m['response_len_mean']:.1f} | gen {m['time/generate']:.2f}s reward {m['time/reward']:.2f}s "
        f"update {m['time/update']:.2f}s sync {m['time/sync']:.2f}s write {m['time/writeback']:.2f}s "
        f"idle learner {m['learner_idle_frac']:.0%} engine {m['engine_idle_frac']:.0%}"
    )
