"""The verbs beside the pipeline's stages: the ledger, cost, the generative judge, environments.

Re-exported by :mod:`rldata.api` (``rldata.passrates``, ``rldata.cost``, ...): like the stage verbs,
each takes the store first (``cost`` only needs one to price stored runs), keywords after, checks
its parameters here (errors name the parameter; the CLI adds the flag) and returns a frozen
result with ``to_dict()``.  The ``rldata`` commands of the same names are thin calls to them.

>>> rldata.passrates(store, where="t.category = 'add'", k=(1, 4)).rows
>>> rldata.cost(params="7B", tokens="1e9", gpu="h100").gpu_hours
>>> rldata.judge(store, mode="pairwise", limit=100).added
>>> rldata.judge_export(store, out="prefs/").rows
>>> rldata.env_register(store, spec="calc.yaml").version
>>> rldata.env_list(store).rows
>>> rldata.rewards(store, run_id="r1", spec="rewards.yaml", write_metrics=0).metrics
>>> rldata.decontaminate(store, eval="math500.jsonl").flagged      # data quality: docs/quality.md
>>> rldata.lint(store).by_rule
>>> rldata.blast_radius(store, pack="math500").runs
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rldata.configs.fields import load
from rldata.console import log
from rldata.cost import (
    GEN_FLOPS_PER_PARAM_TOKEN,
    GEN_MFU,
    TRAIN_FLOPS_PER_PARAM_TOKEN,
    TRAIN_MFU,
    CostSpec,
    gpu_hours,
    looks_moe,
    parse_count,
    run_tokens,
)
from rldata.engine.pool import EnginePool
from rldata.envs.registration import EnvRegisterConfig
from rldata.errors import ConfigError
from rldata.interop.lineage import read_manifest
from rldata.jobs.judge import JudgeConfig, judge_store
from rldata.results import (
    CostResult,
    EnvResult,
    ExportResult,
    JudgeResult,
    PassratesResult,
    RewardsResult,
    TableResult,
    frozen,
)
from rldata.rewards.judge import PAIRWISE, POINTWISE, Judge
from rldata.sql_guard import check_predicate
from rldata.stats import pass_at_k_columns
from rldata.store.core import Store, open_store

__all__ = [
    "blast_radius",
    "cost",
    "decontaminate",
    "dedup",
    "env_list",
    "env_register",
    "env_show",
    "judge",
    "judge_export",
    "lint",
    "passrates",
    "rewards",
]

# A store, its root (a path or an s3:// URI), or a function ``(*, create) -> Store`` that opens it
# (the CLI's: a verb opens the store only once its parameters passed, so a refused call creates none).
StoreLike = Store | str | os.PathLike | Callable[..., Store]


def _open(store: StoreLike, *, create: bool) -> Store:
    if isinstance(store, Store):
        return store
    return store(create=create) if callable(store) else open_store(store, create=create)


# ---- the pass-rate ledger -----------------------------------------------------------------------
_LEDGER_COLUMNS = (
    "p.task_id, t.category, p.model, p.params_hash, p.verifier_key, p.n, p.n_correct, p.n_error, "
    "p.pass_rate, p.ci_low, p.ci_high, p.stop_rule, p.n_max, p.confidence"
)


def passrates(
    store: StoreLike,
    *,
    model: str | None = None,
    where: str | None = None,
    k: Sequence[int] = (1, 4, 16),
    limit: int | None = None,
) -> PassratesResult:
    """The pass-rate ledger, one row per (task, model, params, verifier): n, n_correct, pass rate,
    Wilson 95% interval, an unbiased ``pass@k`` column per ``k`` (null where k > n) and
    ``early_stop``.  ``model`` keeps one model's rows; ``where`` is a SQL predicate over the ledger
    columns (``p.*``) and the task's (``t.*``); ``limit`` caps the rows."""
    # start-up: `rldata tables` does not load rldata.adaptive
    from rldata.adaptive.filter import early_stop_expr

    ks = tuple(k)
    if not ks or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in ks):
        raise ConfigError(f"k must be positive integers, got {list(ks)}", field="k")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit must be an integer >= 0, got {limit!r}", field="limit")
    if where is not None:
        check_predicate(where)
    conds, params = [], []
    if model:
        conds.append("p.model = $1")
        params.append(model)
    if where is not None:
        conds.append(f"({where})")
    q = f"SELECT {_LEDGER_COLUMNS} FROM passrates p LEFT JOIN tasks t USING (task_id)"
    q += (" WHERE " + " AND ".join(conds) if conds else "") + " ORDER BY p.task_id, p.model"
    q += f" LIMIT {limit}" if limit is not None else ""
    df = _open(store, create=False).sql(q, params=params or None).pl()
    # early_stop: the pass rate comes from optional stopping (rldata sample --adaptive), a biased
    # estimate of p; the band decision is not (docs/adaptive.md)
    df = df.with_columns(early_stop_expr().alias("early_stop"))
    return PassratesResult(rows=pass_at_k_columns(df, ks=ks), k=ks)


# ---- cost ---------------------------------------------------------------------------------------
KINDS = ("train", "generate")


def cost(
    store: StoreLike | None = None,
    *,
    params: str | float,
    active_params: str | float | None = None,
    name: str | None = None,
    tokens: str | float | None = None,
    kind: str = "train",
    tflops: float | None = None,
    gpu: str | None = None,
    mfu: float | None = None,
    gpus: int | None = None,
    run_id: str | None = None,
    model: str | None = None,
    scale_tasks: str | float | None = None,
) -> CostResult:
    """GPU-hours ~= k * N_active * N_tokens / (GPU_FLOPS * MFU * 3600); k = 6 training, 2 generation.

    Prices ``tokens`` (as ``kind`` train or generate), and/or the measured tokens of stored runs
    (``run_id``: a sampling run's generation, or a training run's rollouts and updates; or every
    sampling run of ``model``; they need ``store``), optionally scaled to
    ``scale_tasks`` tasks.  ``params`` is the total parameter count (``7e9`` or ``"7B"``);
    ``active_params`` the count a token passes through in a mixture of experts.  The hardware is a
    ``gpu`` preset or ``tflops``; ``mfu`` defaults to 0.4 training, 0.1 generation (decoding is
    memory-bound).  ``gpus`` adds wall-clock hours.  ``name`` (a model name or directory) is checked
    for mixture of experts: without ``active_params`` such a model gets a warning."""
    import polars as pl

    total = parse_count(params, what="params")
    active = parse_count(active_params, what="active_params") if active_params is not None else total
    if active > total:
        raise ConfigError(
            f"active_params ({active:g}) cannot exceed params ({total:g})", field="active_params"
        )
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}", field="kind")
    if tokens is None and run_id is None and model is None:
        raise ConfigError("give tokens, run_id or model (what to price)", field="tokens")
    if gpus is not None and gpus < 1:
        raise ConfigError(f"gpus must be >= 1, got {gpus}", field="gpus")
    target = parse_count(scale_tasks, what="scale_tasks") if scale_tasks is not None else None
    specs = {
        k: CostSpec.from_gpu(gpu, tflops=tflops, mfu=mfu if mfu is not None else d)
        for k, d in ((TRAIN_FLOPS_PER_PARAM_TOKEN, TRAIN_MFU), (GEN_FLOPS_PER_PARAM_TOKEN, GEN_MFU))
    }
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []

    def moe_check(model_name: str | None) -> None:
        w = (
            f"{model_name} looks like a mixture of experts but active_params was not given: "
            "priced with all params active per token, an overestimate"
        )
        if model_name and active_params is None and w not in warnings and looks_moe(model_name):
            warnings.append(w)

    def add(scenario: str, n_tokens: float, k: float, **extra) -> None:
        spec = specs[k]
        hours = gpu_hours(active, n_tokens, spec, flops_per_param_token=k)
        row = {
            "scenario": scenario,
            "active_params": active,
            "tokens": n_tokens,
            "flops": k * active * n_tokens,
            "tflops": spec.tflops,
            "mfu": spec.mfu,
            "gpu_hours": hours,
            **extra,
        }
        if gpus:
            row["wall_hours"] = hours / gpus
        rows.append(row)

    moe_check(name)
    if tokens is not None:
        k = TRAIN_FLOPS_PER_PARAM_TOKEN if kind == "train" else GEN_FLOPS_PER_PARAM_TOKEN
        add(kind, parse_count(tokens, what="tokens"), k)
    if run_id is not None or model is not None:
        if store is None:
            raise ConfigError("pricing stored runs (run_id, model) needs the store", field="store")
        measured_runs = run_tokens(_open(store, create=False), run_id=run_id, model=model)
        for r in measured_runs.iter_rows(named=True):
            moe_check(r["model"])
            measured = float(r["prompt_tokens"] + r["completion_tokens"])
            info = {"tasks": r["tasks"], "samples": r["samples"], "completion_tokens": r["completion_tokens"]}
            add(f"run {r['run_id']}", measured, GEN_FLOPS_PER_PARAM_TOKEN, **info)
            if r["steps"]:  # a training run: its updates too, over the rollouts it learned from
                add(f"run {r['run_id']} updates", float(r["trained_tokens"]), TRAIN_FLOPS_PER_PARAM_TOKEN)
            if target is not None and r["tasks"]:
                f = target / r["tasks"]
                add(
                    f"run {r['run_id']} x{f:g} ({target:g} tasks)",
                    measured * f,
                    GEN_FLOPS_PER_PARAM_TOKEN,
                    tasks=int(target),
                    samples=int(r["samples"] * f),
                    completion_tokens=int(r["completion_tokens"] * f),
                )
    return CostResult(rows=pl.DataFrame(rows), warnings=tuple(warnings))


# ---- reward composition -------------------------------------------------------------------------
def rewards(
    store: StoreLike,
    *,
    run_id: str,
    spec: str | os.PathLike | None = None,
    verifier: str | None = None,
    write_metrics: int | None = None,
) -> RewardsResult:
    """Compose the rewards of run ``run_id``'s trajectories from a reward ``spec`` (its YAML; default:
    alpha 1, no normalization): R_total = alpha * R_VR + (1 - alpha) * R_GenRM - length penalty,
    z-scored per domain if the spec asks.  ``verifier``: only this verifier's rows make R_VR.
    ``write_metrics``: also upsert the means into ``metrics`` at this step of the run (the same rows
    a sampling or training run writes for its rewards)."""
    from rldata.rewards.compose import (
        RewardSpec,
        load_reward_spec,
        metrics_rows,
        reward_metrics,
        rewards_for_run,
    )  # start-up: `rldata tables` does not load rldata.rewards.compose

    reward_spec = load_reward_spec(spec) if spec is not None else RewardSpec()  # checked before the store
    st = _open(store, create=write_metrics is not None)
    composed = rewards_for_run(st, run_id, reward_spec, verifier=verifier)
    metrics = reward_metrics(composed)
    written = 0
    if write_metrics is not None:
        written = st.upsert("metrics", metrics_rows(run_id, write_metrics, metrics))
    return RewardsResult(rows=composed, metrics=frozen(dict(metrics)), written=written)


# ---- the generative judge -----------------------------------------------------------------------
def judge(
    store: StoreLike, *, config=None, engines: EnginePool | None = None, **overrides: Any
) -> JudgeResult:
    """Judge stored trajectories with an LLM (``model``: a directory or name; default the bundled
    model) and store each verdict and rationale in ``verifications``: ``pointwise`` (VERDICT: 1/0) or
    ``pairwise`` (VERDICT: A/B between consecutive samples of a task, judged in both orders unless
    ``swap`` is False).  Already judged trajectories are skipped; ``limit`` caps how many (pairs).
    ``config`` (a :class:`rldata.jobs.judge.JudgeConfig`, a mapping or a YAML/TOML file) and
    ``overrides`` are its fields by name (docs/options.md, the same as ``rldata judge run``'s).
    ``engines``: a pool (:func:`rldata.engines`) to borrow the judge's engine from instead of starting
    one; the engine settings left at their defaults (``model``, ``max_model_len``, ``dtype``...) are
    the pool's."""
    from rldata.engine.core import Engine  # start-up: `rldata tables` does not load rldata.engine.core

    cfg = load(JudgeConfig, config, **overrides)  # every check before the store or an engine
    mode, run_id, limit, swap = cfg.mode, cfg.run_id, cfg.limit, cfg.swap
    st = _open(store, create=True)
    eng = cfg.engine
    if engines is not None:
        lease = engines.lend(**_judge_on(engines, eng), engines=1)
        engine = lease.remote(0)
    else:
        lease = engine = Engine(
            eng.model,
            max_model_len=eng.max_model_len,
            tensor_parallel_size=eng.vllm.tensor_parallel_size,
            **eng.vllm.engine_kwargs(),
        )
    try:
        judge_ = Judge(engine, sampling=cfg.sampling, swap=swap)
        added = judge_store(st, judge_, mode=mode, run_id=run_id, limit=limit)
    finally:
        lease.close()
    verifier = POINTWISE if mode == "pointwise" else PAIRWISE
    verdicts = st.sql(
        "SELECT passed, count(*) AS n, count(error) AS errors FROM verifications WHERE verifier = $v "
        "GROUP BY passed ORDER BY passed",
        params={"v": verifier},
    ).pl()
    return JudgeResult(mode=mode, verifier=verifier, judge=judge_.version, added=added, verdicts=verdicts)


def _judge_on(pool: EnginePool, eng) -> dict[str, Any]:
    """The judge's engine settings (``eng``, its JudgeConfig's ``engine``) on ``pool``: those left at
    JudgeConfig's defaults are the pool's."""
    default = JudgeConfig().engine
    return {
        "model": pool.config.model if eng.model == default.model else eng.model,
        "max_model_len": pool.key.max_model_len
        if eng.max_model_len == default.max_model_len
        else eng.max_model_len,
        "vllm": pool.config.vllm if eng.vllm == default.vllm else eng.vllm,
    }


def judge_export(
    store: StoreLike,
    *,
    out: str | os.PathLike,
    format: str = "jsonl",
    kinds: Sequence[str] = ("pairwise", "pointwise"),
    split: str = "train",
) -> ExportResult:
    """Write (prompt, chosen, rejected) preference pairs from the judge's verdicts (``kinds``:
    pairwise and/or pointwise rows) to the directory ``out`` as ``<split>.jsonl`` or
    ``<split>.parquet`` (``format``), with a manifest beside them."""
    # start-up: `rldata tables` does not load rldata.interop.preferences
    from rldata.interop.preferences import export_preferences

    if isinstance(kinds, str):
        kinds = (kinds,)
    rows = export_preferences(_open(store, create=False), out, kinds=tuple(kinds), fmt=format, split=split)
    m = read_manifest(Path(out).absolute())
    files = tuple(f["path"] for f in m["files"])
    return ExportResult(out=str(out), rows=int(rows), files=files, manifest=frozen(dict(m)))


# ---- environments -------------------------------------------------------------------------------
def env_register(store: StoreLike, *, spec: Any = None, config: Any = None, **settings: Any) -> EnvResult:
    """Validate an environment spec (a YAML/JSON file, or its mapping: fields, limits, that the
    class imports and accepts its config) and add it to ``environments`` as a new version; the same
    spec again adds nothing (``new`` is False).  See docs/environments.md.

    ``settings`` are the :class:`rldata.envs.registration.EnvRegisterConfig` fields, the options of
    ``rldata env register`` (``config``: that config, a mapping or a YAML/TOML file of them): with
    ``openenv=URL``, ``openenv_image=IMAGE`` (run with docker or podman while it registers) or
    ``verifiers=MODULE``, ``spec`` is the environment's NAME.  Every check runs, and a container
    is healthy, before the store is opened."""
    import contextlib

    from rldata.envs.catalog import load_spec_file, register_env  # start-up: loads yaml

    if spec is not None:
        settings["spec"] = os.fspath(spec) if isinstance(spec, os.PathLike) else spec
    cfg = (
        config
        if isinstance(config, EnvRegisterConfig) and not settings
        else load(EnvRegisterConfig, config, **settings)
    )
    container, url = contextlib.nullcontext(), None
    if cfg.openenv_image is not None:
        # start-up: `rldata tables` does not load rldata.envs.openenv
        from rldata.envs.openenv_container import OpenEnvContainer, container_runtime

        # the arguments are checked, then the runtime looked for, before anything runs or the
        # store is opened: each says so in one line
        container = OpenEnvContainer(cfg.openenv_image, cfg.port)
        container.runtime = container_runtime()
        log(f"starting {cfg.openenv_image} on {container.url} ...")
        container.started(cfg.start_timeout_s)
        url = container.url
    with container:
        data = cfg.spec_data(url)
        if data is None:
            data = load_spec_file(cfg.spec)
        row, new = register_env(_open(store, create=True), data)
    return EnvResult(
        env_id=row["env_id"], version=row["version"], kind=row["kind"], spec=row["spec"], new=bool(new)
    )


def env_list(store: StoreLike) -> TableResult:
    """Every registered environment version: env_id, version, kind, created_at."""
    from rldata.envs.catalog import list_envs  # start-up: loads yaml

    return TableResult(rows=list_envs(_open(store, create=False)))


def env_show(store: StoreLike, *, name: str) -> TableResult:
    """Every version of environment ``name``, oldest first, with its spec (JSON)."""
    from rldata.envs.catalog import get_env  # start-up: loads yaml

    return TableResult(rows=get_env(_open(store, create=False), name))


# ---- data quality (rldata.quality, docs/quality.md) ----------------------------------------------
def decontaminate(store: StoreLike, *, config=None, progress: bool = False, **overrides: Any):
    """Match every task (or those ``where`` picks) against an eval pack and record each match in
    ``contamination`` with its detector, score and span: the pack is ``eval`` (a file or directory,
    stored under ``name`` as versioned ``eval_items``), a bundled ``eval_sample``, or the stored pack
    ``name``.  ``action`` flag (default: filter, stratify, train and export then leave the tasks out)
    or drop (delete them from tasks).  ``config`` (a :class:`rldata.quality.DecontaminateConfig`, a
    mapping or a YAML/TOML file) and ``overrides`` are its fields by name (docs/options.md).  Returns
    :class:`rldata.quality.decontaminate.DecontaminateResult`."""
    from rldata.quality.config import DecontaminateConfig  # start-up: loads rensa
    from rldata.quality.decontaminate import decontaminate_store  # start-up: loads rensa

    cfg = load(DecontaminateConfig, config, **overrides)
    return decontaminate_store(_open(store, create=False), cfg, show_progress=progress)


def dedup(store: StoreLike, *, config=None, **overrides: Any):
    """``near=True``: cluster near-duplicate tasks (MinHash over token bigrams, ``jaccard`` threshold)
    into ``near_duplicates`` and keep one per cluster by the stated rule (``source_priority``, then the
    oldest); the others are flagged (``action`` flag) or deleted (drop).  Fields of
    :class:`rldata.quality.DedupConfig`.  Returns :class:`rldata.quality.neardup.DedupResult`."""
    from rldata.quality.config import DedupConfig  # start-up: loads rensa
    from rldata.quality.neardup import dedup_store  # start-up: loads rensa

    cfg = load(DedupConfig, config, **overrides)
    return dedup_store(_open(store, create=False), cfg)


def lint(store: StoreLike, *, config=None, **overrides: Any):
    """Run the lint rules (``rules``: names or prefixes; default all) over the tasks ``where`` picks:
    format rules, verifier rules (the task's verifier on its gold answer, on no-op answers, twice) and
    ``suspect_key`` (sampled answers that agree against the key).  Findings go to ``lint_findings``;
    a rerun replaces them.  Fields of :class:`rldata.quality.LintConfig`.  Returns
    :class:`rldata.quality.lint.LintResult`."""
    from rldata.quality.config import LintConfig  # start-up: loads rensa
    from rldata.quality.lint import lint_store  # start-up: loads rensa

    cfg = load(LintConfig, config, **overrides)
    return lint_store(_open(store, create=False), cfg)


def blast_radius(store: StoreLike, *, config=None, **overrides: Any):
    """The runs (rollouts, tokens, steps, checkpoints) and exports that touched the tasks an eval
    ``pack`` flagged, a lint ``rule`` found, or (neither) every flagged task.  Fields of
    :class:`rldata.quality.BlastConfig`.  Returns :class:`rldata.quality.blast.BlastResult`."""
    from rldata.quality.blast import blast_radius_store  # start-up: loads rensa
    from rldata.quality.config import BlastConfig  # start-up: loads rensa

    cfg = load(BlastConfig, config, **overrides)
    return blast_radius_store(_open(store, create=False), cfg)
