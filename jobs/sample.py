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

import time
from dataclasses import asdict, dataclass, field

import polars as pl
import pyarrow as pa

from rldata.adaptive.rules import Decision, band_text, ledger_columns
from rldata.configs.sampling import SamplingSpec, VllmConfig
from rldata.console import log
from rldata.engine.core import model_context, model_identity
from rldata.errors import ConfigError, RldataError
from rldata.jobs.sample_commit import Ctx
from rldata.jobs.sample_draw import generate_and_verify
from rldata.jobs.sample_env_errors import drop_env_errors
from rldata.jobs.sample_stored import (
    decide_counts,
    first_missing,
    job_counts,
    stored_samples,
    stored_status,
    traj_id,
)
from rldata.ledger.core import recompute_passrates, verifier_key
from rldata.results import SampleResult, accumulator
from rldata.rewards.compose import RewardSpec, metrics_rows
from rldata.runs.core import record_run
from rldata.sql_guard import check_predicate
from rldata.store.core import Store

__all__ = ["SampleJob", "SampleSummary", "override_verifier", "run_sample", "select_tasks", "traj_id"]


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
    # a verifier for every task instead of each domain's (registry name or module:Class); its name
    # and version key the verdicts and the ledger rows, as rldata verify's override does
    verifier: str | None = None
    max_model_len: int | None = None  # engine context (prompt + completion tokens); None = the model's
    env: str | None = (
        None  # run every task in this environment (NAME or NAME@VERSION); None = each task's own
    )
    adaptive: object = (
        None  # rldata.adaptive.AdaptiveSpec: sample in rounds, stop a task once its band decision is settled
    )
    vllm: VllmConfig = field(default_factory=VllmConfig)  # dtype, tensor parallelism, KV cache
    reward: RewardSpec = field(default_factory=RewardSpec)  # reward composition; default = verifier score
    ledger_every_s: float = 30.0  # upsert the finished tasks' ledger rows at most this often (a merge costs)

    def __post_init__(self):
        if self.where and self.selection:
            raise ConfigError("give where or selection, not both", field="selection")
        if self.where:  # spliced into SQL: one predicate, checked before the store is touched
            check_predicate(self.where, field="where")
        # checked here, before Ray or an engine starts (engines=0 used to divide by zero later)
        for name in ("engines", "batch_tasks", "max_model_len"):
            value = getattr(self, name)
            if value is None and name != "batch_tasks":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}", field=name)
        self.reward.check_max_tokens(self.spec.max_tokens)
        if self.verifier:  # an unknown name or a class that does not import fails before anything starts
            override_verifier(self.verifier)
        if (
            self.adaptive is not None
            and self.adaptive.rule != "fixed"
            and self.reward.needs_judge(["math", "code"])
        ):
            raise RldataError(
                "adaptive sampling decides on the verifier's outcome: a reward spec with a judge "
                "is not supported with it"
            )


# What the job fills in while it runs; its ``result()`` is the frozen rldata.results.SampleResult.
# One field list, SampleResult's: a field is added there (with its default and comment) only.
SampleSummary = accumulator(SampleResult, "SampleSummary", module=__name__)


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


def override_verifier(name: str):
    """The verifier ``name`` (registry name or module:Class) names; one line naming `verifier` when none."""
    from rldata.verify import get_verifier
    from rldata.verify.run import resolve_verifier

    try:
        return get_verifier(resolve_verifier(name))
    except KeyError as e:
        raise RldataError(str(e.args[0]), field="verifier") from None


def run_sample(store: Store, job: SampleJob, *, engines: list | None = None) -> SampleSummary:
    """Run (or resume) a sampling job; return what it did.

    ``engines``: running engine actors that hold ``job.model``'s weights (a training run's, for its
    held-out evaluations): the job draws on them instead of starting its own, and leaves them running."""
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
        v = override_verifier(job.verifier) if job.verifier else for_domain(domain)
        verifiers[domain] = (v.name, v.version)
    vkeys = {verifier_key(*nv) for nv in verifiers.values()}
    task_ids = tasks["task_id"].to_list()
    from rldata.rollout import bind_envs

    bindings = bind_envs(
        store, tasks.select("task_id", "env_id", "env_version").iter_rows(named=True), env=job.env
    )
    ekeys = {t: b.ledger_key for t, b in bindings.items() if b is not None}
    if job.verifier and ekeys:
        # an episode's verdict may be its environment's reward, recorded under the task's verifier:
        # an override would put another verifier's name on it
        raise ConfigError(
            f"verifier: an override applies to single-turn tasks; {len(ekeys)} of these tasks run as "
            "episodes (give where or selection without them, or no verifier)",
            field="verifier",
        )
    drop_env_errors(store, task_ids, model=model, params_hash=ph, seed=spec.seed, ekeys=ekeys)

    status = stored_status(
        store, task_ids, model=model, params_hash=ph, seed=spec.seed, n=spec.n, vkeys=vkeys, ekeys=ekeys
    )
    adaptive = job.adaptive if job.adaptive is not None and job.adaptive.rule != "fixed" else None
    counts = None
    if adaptive is not None:  # evidence already in the store (any run, any seed) counts toward the decision
        counts = job_counts(store, task_ids, model=model, params_hash=ph, vkeys=vkeys, ekeys=ekeys)
        frame = decide_counts(counts, adaptive, n_max=spec.n)
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
        "vllm": asdict(job.vllm),
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
            stored = stored_samples(
                store, sorted(partial), model=model, params_hash=ph, seed=spec.seed, vkeys=vkeys, ekeys=ekeys
            )
            first = {t: f for t, have in stored.items() if 0 < (f := first_missing(have, spec.n)) < spec.n}
            log(
                f"sampling {todo.height} tasks x {spec.n} with {model} ({len(done)} already done"
                + (f", {len(first)} topped up from the samples stored" if first and adaptive is None else "")
                + ")"
            )
            ctx = Ctx(
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
                lent=engines,
            )
            generate_and_verify(ctx, todo)
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
            final = job_counts(store, task_ids, model=model, params_hash=ph, vkeys=vkeys, ekeys=ekeys)
            frame = decide_counts(final, adaptive, n_max=spec.n)
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
