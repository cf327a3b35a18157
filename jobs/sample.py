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
from dataclasses import asdict, dataclass, replace

import polars as pl
import pyarrow as pa

from rldata.adaptive.prior import PredictedPlan
from rldata.adaptive.rules import AdaptiveSpec, Decision, band_text, ledger_columns
from rldata.configs.sampling import SampleConfig
from rldata.console import log, progress, stage
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
from rldata.rewards.compose import RewardSpec, load_reward_spec, metrics_rows
from rldata.rollout import bind_envs, renderer_for, resolve_chat_template
from rldata.runs.core import record_run
from rldata.sql_guard import check_predicate
from rldata.store.core import Store
from rldata.verify import for_domain, get_verifier
from rldata.verify.run import resolve_verifier

__all__ = [
    "Plan",
    "SampleSummary",
    "load_reward",
    "override_verifier",
    "plan_sample",
    "predicted_plan",
    "run_sample",
    "select_tasks",
    "traj_id",
]


@dataclass(frozen=True)
class Plan:
    """What a :class:`SampleConfig` implies beyond its fields, checked before anything starts: the
    reward composition (``reward_spec`` read and checked against ``max_tokens``) and the stopping
    rule (``adaptive``, ``band``, ``alpha``, ``round``)."""

    reward: RewardSpec
    adaptive: AdaptiveSpec


def plan_sample(cfg: SampleConfig) -> Plan:
    """The checks of a sampling job that need more than its config's layer (the verifier's class,
    the reward spec's file, the band): run by :func:`run_sample`, and by ``rldata.sample`` before it
    opens the store."""
    if cfg.verify.verifier:  # an unknown name or a class that does not import fails before anything starts
        override_verifier(cfg.verify.verifier)
    reward = load_reward(cfg.reward_spec, cfg.sampling.max_tokens)
    band = cfg.band
    if band is not None and not isinstance(band, str):
        band = ",".join(str(x) for x in band)
    adaptive = AdaptiveSpec.parse(cfg.adaptive, band=band, alpha=cfg.alpha, round_size=cfg.round_size)
    if adaptive.rule != "fixed" and reward.needs_judge(["math", "code"]):
        raise RldataError(
            "adaptive sampling decides on the verifier's outcome: a reward spec with a judge "
            "is not supported with it",
            field="reward_spec",
        )
    return Plan(reward, adaptive)


def load_reward(reward, max_tokens: int) -> RewardSpec:
    """The reward spec ``reward`` names (a RewardSpec, or the path of its YAML; None: the verifier's
    score alone), checked against the completion cap."""
    if reward is None:
        return RewardSpec()
    spec = reward if isinstance(reward, RewardSpec) else load_reward_spec(reward)
    spec.check_max_tokens(max_tokens, where=None if isinstance(reward, RewardSpec) else str(reward))
    return spec


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
    try:
        return get_verifier(resolve_verifier(name))
    except KeyError as e:
        raise RldataError(str(e.args[0]), field="verifier") from None


def run_sample(
    store: Store,
    cfg: SampleConfig,
    *,
    engines=None,
    progress=progress,
    ledger_every_s: float = 30.0,
) -> SampleSummary:
    """Run (or resume) the sampling job ``cfg`` describes; return what it did.

    Not settings of the job, so not fields of its config: ``engines``, an
    :class:`rldata.engine.pool.EnginePool` (or ``EnginePools``) to borrow the job's engines from, or
    running engine actors that hold ``cfg.engine.model``'s weights (a training run's, for its held-out
    evaluations): the job draws on them instead of starting its own, and leaves them running (borrowed
    engines write the rows fresh ones would);
    ``progress``, the bar the draw loop advances (:func:`rldata.console.progress`'s signature);
    ``ledger_every_s``, how often the finished tasks' ledger rows are upserted (a merge costs)."""
    plan = plan_sample(cfg)
    given, verifier = cfg, cfg.verify.verifier
    ident = model_identity(cfg.engine.model)
    path, model, revision = ident.path, ident.name, ident.revision
    # auto becomes on or off for this model before anything is keyed: the params hash (and the JSON
    # stored with every sample) says how plain tasks were sent, so templated and raw never pool
    renderer = None
    if cfg.sampling.chat_template != "off":
        cfg = replace(cfg, sampling=resolve_chat_template(cfg.sampling, path))
        if cfg.sampling.chat_template == "on":
            renderer = renderer_for(path)
    spec = cfg.sampling
    ph = spec.params_hash
    tasks = select_tasks(store, where=cfg.where, selection=cfg.selection)
    if tasks.height == 0:
        raise RldataError(
            "no tasks to sample: the store has none" + (f" matching {cfg.where!r}" if cfg.where else "")
        )
    verifiers = {}
    for domain in tasks["domain"].unique().to_list():
        v = override_verifier(verifier) if verifier else for_domain(domain)
        verifiers[domain] = (v.name, v.version)
    vkeys = {verifier_key(*nv) for nv in verifiers.values()}
    task_ids = tasks["task_id"].to_list()
    bindings = bind_envs(
        store, tasks.select("task_id", "env_id", "env_version").iter_rows(named=True), env=cfg.env
    )
    ekeys = {t: b.ledger_key for t, b in bindings.items() if b is not None}
    if verifier and ekeys:
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
    stopping, predicted = plan.adaptive, None
    if cfg.skip_predicted is not None:  # rldata.predict: the skips, and the sequential rule's priors
        predicted, stopping = predicted_plan(store, cfg, task_ids, stopping)
    adaptive = stopping if stopping.rule != "fixed" else None
    counts = None
    if adaptive is not None:  # evidence already in the store (any run, any seed) counts toward the decision
        counts = job_counts(store, task_ids, model=model, params_hash=ph, vkeys=vkeys, ekeys=ekeys)
        frame = decide_counts(counts, adaptive, n_max=spec.n)
        done = set(frame.filter(pl.col("next_draws") == 0)["task_id"].to_list())
    else:
        done = set(status.filter((pl.col("k") >= spec.n) & (pl.col("kv") >= spec.n))["task_id"].to_list())
    partial = set(status["task_id"].to_list()) - done
    skips = _predicted_skips(
        store, predicted, task_ids, done, counts, model=model, ph=ph, vkeys=vkeys, ekeys=ekeys
    )
    todo = tasks.filter(~pl.col("task_id").is_in(list(done | set(skips))))
    summary = SampleSummary(
        None,
        model,
        ph,
        tasks.height,
        len(done),
        stop_rule=adaptive.rule if adaptive is not None else "fixed",
        chat_template=spec.chat_template,
    )
    summary.skipped_predicted = len(skips)
    ledger = store.sql(
        "SELECT count(DISTINCT task_id) FROM passrates p JOIN _ids USING (task_id) "
        "WHERE p.model = $1 AND p.params_hash = $2",
        params=[model, ph],
        extra={"_ids": pa.table({"task_id": pa.array(task_ids, pa.string())})},
    ).fetchall()[0][0]
    if todo.height == 0 and ledger >= tasks.height - len(skips):
        summary.noop = True
        log(
            f"nothing to do: all {tasks.height} tasks already have {spec.n} verified samples from {model} "
            f"(params {ph}, seed {spec.seed}) and ledger rows"
        )
        return summary

    # the runs row: the config as given (its sections nested), and what it resolved to
    args = {
        "config": {k: v for k, v in asdict(given).items() if k != "reward_spec"},
        "model": path,
        "spec": spec.to_dict(),  # chat_template resolved
        "reward": asdict(plan.reward),
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
    if predicted is not None:
        args["skip_predicted"] = {
            "confidence": predicted.conf,
            "band": predicted.band,
            "fit_id": predicted.fit_id,
            "skipped": len(skips),
        }
    with record_run(store, "sample", args) as run:
        summary.run_id = run.run_id
        if predicted is not None:  # the decisions taken on the prediction, before any draw
            rows = _prediction_rows(predicted, stopping, run.run_id, task_ids, skips, model, ph)
            store.upsert("sample_predictions", rows)
            log(
                f"skipped {len(skips)} tasks predicted outside band {predicted.band} with probability "
                f">= {predicted.conf:g}"
            )
        t0 = time.monotonic()
        if todo.height:
            stored = stored_samples(
                store, sorted(partial), model=model, params_hash=ph, seed=spec.seed, vkeys=vkeys, ekeys=ekeys
            )
            first = {t: f for t, have in stored.items() if 0 < (f := first_missing(have, spec.n)) < spec.n}
            log(
                f"sampling {todo.height} tasks x {spec.n} with {model}"
                + (" (plain prompts through its chat template)" if spec.chat_template == "on" else "")
                + f" ({len(done)} already done"
                + (f", {len(first)} topped up from the samples stored" if first and adaptive is None else "")
                + ")"
            )
            ctx = Ctx(
                store,
                cfg,
                plan.reward,
                run.run_id,
                model,
                revision,
                verifiers,
                stored,
                summary,
                bindings=bindings,
                max_model_len=cfg.engine.max_model_len or model_context(path),
                model_path=path,
                adaptive=adaptive,
                counts=counts or {},
                first=first,
                lent=engines,
                progress=progress,
                ledger_every_s=ledger_every_s,
                renderer=renderer,
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
                f"(--max-model-len {cfg.engine.max_model_len or model_context(path)}); recorded with finish_reason "
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
        with stage(f"updating the pass-rate ledger of {len(task_ids)} tasks"):
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


# ---- rldata sample --skip-predicted (rldata.adaptive.prior, rldata.predict.plan) ------------------
def predicted_plan(
    store: Store, cfg: SampleConfig, task_ids: list[str], stopping: AdaptiveSpec
) -> tuple[PredictedPlan, AdaptiveSpec]:
    """``skip_predicted``: the prediction of the job's tasks for its model (a stored fit of the same
    cutoff is reused) with the tasks it puts outside ``band`` with probability >= ``skip_predicted``,
    and the stopping rule with each task's predicted prior (the sequential rule's; others unchanged)."""
    # lazy: rldata.predict loads scipy.stats and the fit (seconds), which a job without
    # skip_predicted never needs
    from rldata.predict.plan import sample_plan, with_priors  # start-up: loads scipy

    plan = sample_plan(
        store,
        model=cfg.engine.model,
        task_ids=task_ids,
        params_hash=cfg.sampling.params_hash,
        band=stopping.band,  # SampleConfig's rule makes band required with skip_predicted
        conf=cfg.skip_predicted,
    )
    return plan, with_priors(stopping, plan)


def _predicted_skips(store, plan, task_ids, done, counts, *, model, ph, vkeys, ekeys) -> dict:
    """The plan's skips among the tasks not done that have no sample under this job's key."""
    if plan is None or not plan.skips:
        return {}
    if counts is None:
        counts = job_counts(store, task_ids, model=model, params_hash=ph, vkeys=vkeys, ekeys=ekeys)
    return {t: why for t, why in plan.skips.items() if t in counts and t not in done and sum(counts[t]) == 0}


def _prediction_rows(plan, stopping, run_id, task_ids, skips, model, ph) -> list[dict]:
    """One sample_predictions row per task of the job: skip (with its reason) or sample (with the
    prior its stopping rule used, which rldata filter re-decides a ``predicted`` row with)."""
    priors = stopping.priors or {}
    rows = []
    for t in task_ids:
        a, b = priors.get(t, (None, None))
        rows.append(
            {
                "run_id": run_id,
                "task_id": t,
                "decision": "skip" if t in skips else "sample",
                "reason": skips[t][0] if t in skips else None,
                "p_mean": plan.p_mean.get(t),
                "p_out": plan.p_out.get(t),
                "confidence": plan.conf,
                "band": plan.band,
                "prior_alpha": a,
                "prior_beta": b,
                "fit_id": plan.fit_id,
                "model": model,
                "params_hash": ph,
            }
        )
    return rows
