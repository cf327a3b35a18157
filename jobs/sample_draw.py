"""Draw a sampling job's samples on its engines: plain prompts pipelined, episodes batch by batch,
adaptive jobs in rounds.  Each batch goes to :func:`rldata.jobs.sample_commit.commit_batch`."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from pathlib import Path

import polars as pl

from rldata.console import log
from rldata.engine.actors import RemoteEngine, ensure_ray, start_engines
from rldata.engine.pool import borrow
from rldata.heavy import ray
from rldata.jobs.sample_commit import Ctx, commit_batch
from rldata.jobs.sample_stored import decide_counts
from rldata.rewards.judge import Judge
from rldata.rollout import EpisodeStats, generate, renderer_for
from rldata.rollout.plain import plain_rollouts, submit_plain
from rldata.verify.parallel import warm_driver_verifiers

__all__ = ["generate_and_verify"]


def generate_and_verify(ctx: Ctx, todo: pl.DataFrame) -> None:
    spec, cfg = ctx.cfg.sampling, ctx.cfg
    ensure_ray(cfg.address)
    warm_driver_verifiers([name for name, _ in ctx.verifiers.values()])  # beside the engines' load
    t_start = time.monotonic()
    engine = cfg.engine
    # the directory model_identity resolved (a hub id's cached snapshot), so the engines load the
    # very weights whose revision the ledger records; None keeps the bundled model's own id
    model = None if engine.model is None else str(Path(ctx.model_path).resolve())
    batches = -(-todo.height // cfg.batch_tasks)
    ctx.lease = borrow(
        ctx.lent, model=model, max_model_len=ctx.max_model_len, vllm=engine.vllm, engines=engine.engines,
        batches=batches, seed=spec.seed or 0, address=cfg.address,
    )  # fmt: skip
    if ctx.lease is not None:
        engines = ctx.lease.actors
    else:
        engines = start_engines(
            engine.engines,
            model,
            seed=spec.seed or 0,
            tensor_parallel_size=engine.vllm.tensor_parallel_size,
            engine_kwargs={"max_model_len": ctx.max_model_len, **engine.vllm.engine_kwargs()},
            name_prefix=f"rldata-engine-{ctx.run_id}",  # named, so operators (and tests) can find them
            batches=batches,
        )
    ctx.summary.time_engine_start_s = round(time.monotonic() - t_start, 3)
    ctx.summary.engines = len(engines)
    try:
        if ctx.reward.needs_judge(todo["domain"].unique().to_list()):
            ctx.judge = Judge(ctx.lease.remote(0) if ctx.lease is not None else RemoteEngine(engines[0]))
        busy0 = _busy(engines) if ctx.lease is not None else 0.0  # lent engines' clocks ran before this job
    except BaseException:
        _release(ctx, engines)
        raise
    if ctx.adaptive is not None:  # rounds of draws, plain prompts and episodes alike
        try:
            t0 = time.monotonic()
            with ctx.progress("sampling", total=todo.height, unit="tasks") as bar:
                _adaptive_rounds(ctx, engines, todo, bar)
            _engine_time(ctx, engines, t0, busy0)
        finally:
            _release(ctx, engines)
        return
    # Plain prompts (no environment, or a plain single-turn one) go to the engines as text with n=N,
    # pipelined: two batches per engine in flight while the driver verifies and commits.  Episodes
    # run after them, batch by batch, each turn of a batch in one generate call per engine.
    plain = [
        t
        for t in todo["task_id"].to_list()
        if ctx.bindings.get(t) is None or ctx.bindings[t].fast_single_turn
    ]
    text_tasks = todo.filter(pl.col("task_id").is_in(plain))
    env_tasks = todo.filter(~pl.col("task_id").is_in(plain))
    batches = deque(_batches(text_tasks, ctx.first, cfg.batch_tasks))
    inflight: dict = {}
    load = [0] * len(engines)

    def submit() -> None:
        while batches and min(load) < 2:  # two batches per engine: one running, one queued
            i = load.index(min(load))
            b, f = batches.popleft()
            # samples f..N-1 of an N-request are the children of a request for N-f with seed + f
            seeds = [_shift(spec.request_seed(t), f) for t in b["task_id"].to_list()]
            ref, ids = submit_plain(
                engines[i], b.to_dicts(), replace(spec, n=spec.n - f), seeds, ctx.renderer
            )
            inflight[ref] = (b, i, f, ids)
            load[i] += 1

    try:
        t0 = time.monotonic()
        with ctx.progress("sampling", total=todo.height, unit="tasks") as bar:
            submit()
            while inflight:
                ready, _ = ray.wait(list(inflight), num_returns=1)
                b, i, f, ids = inflight.pop(ready[0])
                load[i] -= 1
                samples = ray.get(ready[0])
                submit()  # engines keep generating while this batch is verified and committed
                commit_batch(ctx, b, plain_rollouts(samples, ids, spec.n - f), offsets=[f] * b.height)
                rate = ctx.summary.samples / max(time.monotonic() - t0, 1e-9)
                bar.advance(b.height, samples_per_s=f"{rate:.0f}")
            if env_tasks.height:
                _run_episode_batches(ctx, engines, env_tasks, bar, t0)
        _engine_time(ctx, engines, t0, busy0)
    finally:
        _release(ctx, engines)


def _release(ctx: Ctx, engines) -> None:
    """Stop the engines the job started; lent ones go back to their owner running."""
    if ctx.lease is not None:
        ctx.lease.close()
    else:
        for a in engines:
            ray.kill(a)


def _busy(engines) -> float:
    return sum(ray.get([a.busy.remote() for a in engines]))


def _engine_time(ctx: Ctx, engines, t0: float, busy0: float = 0.0) -> None:
    """The sampling phase's wall time and the engines' busy share of it (their own clocks)."""
    s = ctx.summary
    s.time_sampling_s = round(time.monotonic() - t0, 3)
    busy = _busy(engines) - busy0
    if s.time_sampling_s > 0:
        s.engine_busy_frac = round(min(1.0, busy / (s.time_sampling_s * len(engines))), 4)


def _run_episode_batches(ctx: Ctx, engines, todo: pl.DataFrame, bar, t0: float) -> None:
    spec, cfg = ctx.cfg.sampling, ctx.cfg
    renderer = ctx.renderer or renderer_for(ctx.model_path)
    ctx.episodes = EpisodeStats()
    for b, f in _batches(todo, ctx.first, cfg.batch_tasks):
        rows = b.to_dicts()
        seeds = [spec.request_seed(r["task_id"]) for r in rows]
        rollouts = generate(
            engines,
            rows,
            seeds,
            replace(spec, n=spec.n - f),
            bindings=[ctx.bindings[r["task_id"]] for r in rows],
            renderer=renderer,
            max_model_len=ctx.max_model_len,
            stats=ctx.episodes,
            first_index=[f] * len(rows),
        )
        flat = [r for g in rollouts for r in g]
        ctx.tool_episodes = (
            ctx.tool_episodes[0] + sum(r.num_tool_calls > 0 for r in flat),
            ctx.tool_episodes[1] + len(flat),
        )
        commit_batch(ctx, b, rollouts, offsets=[f] * b.height)
        rate = ctx.summary.samples / max(time.monotonic() - t0, 1e-9)
        bar.advance(b.height, samples_per_s=f"{rate:.0f}")
    es = ctx.episodes
    ctx.summary.episode_rounds = es.rounds
    if ctx.tool_episodes[1]:
        ctx.summary.tool_call_frac = ctx.tool_episodes[0] / ctx.tool_episodes[1]
    log(
        f"episodes: {es.requests} turns in {es.rounds} generate calls; engines had work "
        f"{es.engine_busy_frac:.0%} of the episode time (generate {es.generate_s:.1f}s, environments "
        f"{es.env_s:.1f}s, overlapping); the prefix "
        f"cache held {es.cache_hit_frac:.0%} of the turns' prompt tokens"
    )


def _batches(todo: pl.DataFrame, first: dict, size: int):
    """(batch, f) of at most ``size`` tasks that all start at sample index f (0 unless a task has
    samples stored: a larger N tops it up), in task order within each f."""
    f = todo.select(pl.col("task_id").replace_strict(first, default=0, return_dtype=pl.Int64).alias("f"))
    for (k,), part in todo.with_columns(f).group_by("f", maintain_order=True):
        part = part.drop("f")
        for i in range(0, part.height, size):
            yield part.slice(i, size), int(k)


def _shift(seed: int | None, f: int) -> int | None:
    return None if seed is None else seed + f


def _adaptive_rounds(ctx: Ctx, engines, todo: pl.DataFrame, bar) -> None:
    """Draw in rounds: after each, every unsettled task gets its next draws (rldata.adaptive), until
    none is left.  Task i's round starts at sample index n_drawn, with the per-sample seeds a single
    N-sample draw would use, so exact stopping agrees with fixed N on the very same samples.

    Within a round the batches are pipelined: a batch is verified and committed in a worker thread
    while the engines generate the next one (at most one commit in flight, in order).  A round's
    decisions wait for all of its commits: they read the counts those commits add."""
    from concurrent.futures import Future, ThreadPoolExecutor

    spec, cfg = ctx.cfg.sampling, ctx.cfg
    rows = {r["task_id"]: r for r in todo.iter_rows(named=True)}
    episodic = any(ctx.bindings.get(t) is not None and not ctx.bindings[t].fast_single_turn for t in rows)
    renderer = ctx.renderer or (renderer_for(ctx.model_path) if episodic else None)
    ctx.episodes = EpisodeStats()
    active = len(rows)
    pending: Future | None = None

    def settle() -> None:  # wait for the commit in flight; its error is this job's error
        nonlocal pending
        if pending is not None:
            done, pending = pending, None
            done.result()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rldata-commit") as pool:
        try:
            while True:
                settle()
                frame = decide_counts({t: ctx.counts[t] for t in rows}, ctx.adaptive, n_max=spec.n)
                nxt = frame.filter(pl.col("next_draws") > 0)
                bar.advance(active - nxt.height)
                active = nxt.height
                if not active:
                    break
                ctx.summary.adaptive_rounds += 1
                for (k,), part in nxt.group_by("next_draws", maintain_order=True):
                    ids, drawn = part["task_id"].to_list(), part["n_drawn"].to_list()
                    for i in range(0, len(ids), cfg.batch_tasks):
                        bid, offsets = ids[i : i + cfg.batch_tasks], drawn[i : i + cfg.batch_tasks]
                        brows = [rows[t] for t in bid]
                        out = generate(
                            engines,
                            brows,
                            [spec.request_seed(t) for t in bid],
                            replace(spec, n=int(k)),
                            bindings=[ctx.bindings.get(t) for t in bid],
                            renderer=renderer,
                            max_model_len=ctx.max_model_len,
                            stats=ctx.episodes,
                            first_index=offsets,
                        )
                        settle()  # the previous batch's commit, overlapped with this generate
                        batch = pl.DataFrame(brows, schema=todo.schema)
                        pending = pool.submit(commit_batch, ctx, batch, out, offsets=offsets)
        finally:
            settle()
