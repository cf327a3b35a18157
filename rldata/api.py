"""The public API: one verb per stage of the loop, each ``verb(store, *, ...) -> frozen result``.

>>> import rldata
>>> store = rldata.open_store("my-store")
>>> rldata.ingest(store, sample="arith").added
>>> rldata.sample(store, n=16).samples_per_s
>>> rldata.filter(store, band=(0.1, 0.9), name="band").kept
>>> rldata.stratify(store, selection="band", quantiles=3, curriculum="buckets.yaml").counts
>>> rldata.train(store, curriculum="buckets.yaml", steps=50).checkpoint
>>> rldata.export(store, selection="band", format="verl", out="export/").rows
>>> rldata.report(store, out="report/").html

Beside the stages (in :mod:`rldata.verbs`): ``passrates`` (the ledger), ``cost`` (GPU-hours),
``judge`` / ``judge_export`` (the generative judge, preference pairs), ``env_register`` /
``env_list`` / ``env_show`` (environments) and ``decontaminate`` / ``dedup`` / ``lint`` /
``blast_radius`` (data quality): one verb per ``rldata`` command that computes something.

``store`` is a :class:`~rldata.store.core.Store` or a store root (a path or an ``s3://`` URI); a verb
checks its parameters before it opens (or creates) the store.
Everything after it is keyword-only.  Every result is a frozen dataclass with ``to_dict()``, and
the CLI calls exactly these verbs (it adds logging, the flags and the output format).  Errors are
:class:`~rldata.errors.RldataError` subclasses naming the parameter; heavy dependencies (Ray,
vLLM, torch, matplotlib) load only when a verb that needs them runs.

Names: ``rldata.verify``, ``rldata.ingest`` and ``rldata.report`` are these verbs; the packages
of the same name are reached with ``from rldata.verify import ...`` (``import rldata.verify as x``
would bind the verb).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rldata.configs.fields import as_flat, load
from rldata.configs.sampling import SampleConfig
from rldata.configs.select import FilterConfig, StratifyConfig
from rldata.engine.pool import EnginePool
from rldata.errors import RldataError
from rldata.ingest import SAMPLES, sample_path
from rldata.ingest import ingest as ingest_file
from rldata.ingest import preset as get_preset
from rldata.ingest.options import IngestConfig
from rldata.interop.chat_export import export_conversations
from rldata.interop.export import export_selection
from rldata.interop.options import ExportConfig
from rldata.jobs.verify import VerifyJob, run_verify
from rldata.ledger.flags import flagged
from rldata.results import (
    CostResult,
    EnvResult,
    ExportResult,
    JudgeResult,
    PassratesResult,
    ReportResult,
    SampleResult,
    TableResult,
    TrainResult,
    VerifyResult,
    frozen,
)
from rldata.store.outputs import check_output_path
from rldata.verbs import (
    StoreLike,
    _open,
    blast_radius,
    cost,
    decontaminate,
    dedup,
    env_list,
    env_register,
    env_show,
    judge,
    judge_export,
    lint,
    passrates,
    rewards,
)

__all__ = [
    "CostResult",
    "EnginePool",
    "EnvResult",
    "ExportResult",
    "JudgeResult",
    "PassratesResult",
    "ReportResult",
    "SampleResult",
    "TableResult",
    "TrainResult",
    "VerifyResult",
    "blast_radius",
    "cost",
    "decontaminate",
    "dedup",
    "engines",
    "env_list",
    "env_register",
    "env_show",
    "export",
    "filter",
    "ingest",
    "judge",
    "judge_export",
    "lint",
    "passrates",
    "predict",
    "report",
    "rewards",
    "sample",
    "stratify",
    "train",
    "verify",
]


def _flags(store, include_flagged: bool, *, versions: dict | None = None):
    """The flagged tasks filter, stratify, train and export leave out (rldata.ledger.flags), read at
    ``versions`` of the flag tables (default: their current ones); None when ``include_flagged``."""
    if include_flagged:
        return None

    return flagged(store, versions=versions)


def _resumed_flags(store, command) -> dict | None:
    """A resumed run leaves out what it left out when it started: the flag tables' versions its
    arguments recorded (its sampler state names its tasks).  None when nothing was recorded."""
    import json

    from rldata.trainer.state import _resolve_run_id  # start-up: loads torch

    try:
        run_id = _resolve_run_id(command.train, True)
    except RldataError:
        return None  # the driver says why it cannot resume
    rows = store.sql("SELECT args FROM runs WHERE run_id = $1", params=[run_id]).fetchall()
    args = json.loads(rows[0][0] or "{}") if rows else {}
    return (args.get("flags") or {}).get("versions")


# ---- the verbs ----------------------------------------------------------------------------------
def ingest(
    store: StoreLike,
    *,
    spec=None,
    progress: bool = False,
    rejects_out: str | os.PathLike | None = None,
    **fields: Any,
):
    """Load tasks into ``tasks`` from one of: a file or dataset dir (``path``), a bundled sample
    (``sample``: arith, arith-heldout, gsm8k, gsm8k-test), a reasoning-gym dataset (``gym`` with
    ``n`` entries, its ``config`` and ``seed``) or an environment's own generator (``env`` with ``n``,
    ``seed``).  ``spec`` is a :class:`rldata.ingest.options.IngestConfig`, a mapping or the path of a
    YAML/TOML file of its fields; ``fields`` are its fields by name and win over it (``limits``: a
    :class:`rldata.ingest.Limits` or a mapping of bounds; docs/options.md lists them, the same as
    ``rldata ingest``'s options).  ``rejects_out``: a JSON-lines file for every reject, written
    before the commit (a path that cannot take it fails the ingest, the store as it was).  Returns
    :class:`rldata.ingest.IngestSummary`."""
    fields = {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in fields.items()}
    cfg = load(IngestConfig, spec, **fields)  # every check here, before the store is opened
    if cfg.env is not None:  # tasks from an environment's own reset (OpenEnv)
        from rldata.ingest.env import ingest_env  # start-up: `rldata tables` does not load rldata.ingest.env

        return ingest_env(_open(store, create=True), cfg.env, n=cfg.n, seed=cfg.seed, dry_run=cfg.dry_run)
    if cfg.gym is not None:
        # start-up: `rldata tables` does not load rldata.gym
        from rldata.ingest.gym import ingest_gym  # imports reasoning_gym only now

        st = _open(store, create=True)
        return ingest_gym(
            st, cfg.gym, n=cfg.n, config=dict(cfg.config or {}), seed=cfg.seed, dry_run=cfg.dry_run
        )
    path, preset = cfg.path, cfg.preset
    if cfg.sample is not None:
        path = sample_path(cfg.sample)
        preset = preset or SAMPLES[cfg.sample][1]
    fields_ = get_preset(preset).with_overrides(
        prompt=cfg.prompt_field,
        answer=cfg.answer_field,
        category=cfg.category_field,
        answer_format=cfg.answer_format,
    )
    return ingest_file(
        _open(store, create=True),
        path,
        fields=fields_,
        source=cfg.source,
        domain=cfg.domain,
        on_error=cfg.on_error,
        decontaminate=cfg.decontaminate,
        ngram=cfg.ngram,
        dry_run=cfg.dry_run,
        show_progress=progress,
        limits=cfg.limits,
        rejects_out=rejects_out,
    )


def sample(store: StoreLike, *, config=None, **overrides: Any) -> SampleResult:
    """Sample ``n`` answers per task with vLLM engines on Ray, verify them and update the pass-rate
    ledger.  ``config`` is a :class:`rldata.configs.sampling.SampleConfig`, a mapping or the path of a YAML/TOML
    file of its fields; ``overrides`` are its fields by name and win over it (``n=16``,
    ``temperature=0.7``, ``engines=2``, ``where=...``; docs/options.md lists them, the same as
    ``rldata sample``'s options).  ``reward_spec`` is a :class:`rldata.rewards.compose.RewardSpec`
    or the path of its YAML.  With ``adaptive`` exact|sequential (and ``band``) a task stops once its
    band decision is settled; with ``skip_predicted`` CONF (and ``band``) a task ``rldata.predict``
    places outside the band with probability >= CONF is not sampled (docs/predict.md).  A killed job
    resumes when called again; on finished work it is a no-op.  ``engines`` is how many engines to
    start, or a pool (:func:`engines`) to borrow them from."""
    # start-up: `rldata tables` does not load rldata.adaptive
    from rldata.jobs.sample import plan_sample, run_sample

    pool, overrides = _pool(overrides)
    cfg = load(SampleConfig, config, **overrides)  # every check of the fields runs here
    if pool is not None:  # engine settings left at their defaults are the pool's
        cfg = replace(cfg, engine=pool.follow(cfg.engine))
    plan_sample(cfg)  # and the verifier's class, the reward spec, the band: before the store is opened
    return run_sample(_open(store, create=True), cfg, engines=pool).result()


def engines(config=None, /, *, address: str | None = None, seed: int = 0, **settings: Any) -> EnginePool:
    """Start warm vLLM engines that ``sample``, ``judge`` and ``train`` (and its evaluations) borrow
    with ``engines=pool`` instead of starting their own; a context manager that stops them at the
    end of its block (or ``pool.close()``).  ``config`` is a
    :class:`rldata.configs.sampling.EngineConfig`, a mapping or a YAML/TOML file, and ``settings`` its
    fields by name (``model``, ``engines``, ``max_model_len``, ``dtype``, ``kv_cache_gib``,
    ``tensor_parallel_size``).  A job borrows only engines of its own model and settings (those it
    leaves at their defaults follow the pool's), and writes the rows fresh engines would write: see
    :class:`rldata.engine.pool.EnginePool`."""
    return EnginePool(config, address=address, seed=seed, **settings)


def _pool(overrides: dict) -> tuple[EnginePool | None, dict]:
    """``engines=`` names a pool to borrow from, or (a number) how many engines to start."""
    if isinstance(overrides.get("engines"), EnginePool):
        overrides = dict(overrides)
        return overrides.pop("engines"), overrides
    return None, overrides


def predict(store: StoreLike, *, config=None, **overrides: Any):
    """A pass rate per task before sampling it, as a Beta with a mean and an interval: fit on what the
    store holds for the model (or reuse a fit of the same cutoff) and write ``predictions``; with
    ``backtest=True`` score the predictor on held-out tasks and later policy versions against
    baselines instead.  ``config`` is a :class:`rldata.predict.PredictConfig`, a mapping or a YAML/TOML
    file of its fields; ``overrides`` are its fields by name (docs/options.md, docs/predict.md).
    Returns :class:`rldata.predict.PredictResult` or :class:`rldata.predict.BacktestResult`."""
    from rldata.predict import PredictConfig, backtest_store, predict_store  # start-up: loads scipy

    cfg = load(PredictConfig, config, **overrides)
    st = _open(store, create=False)
    return backtest_store(st, cfg) if cfg.backtest else predict_store(st, cfg)


def verify(store: StoreLike, *, config=None, **overrides: Any) -> VerifyResult:
    """Re-score stored trajectories under ``verifier`` (default: each task's domain default) and
    rebuild the ledger for it; resumable and idempotent, old verifier versions are kept.
    ``config`` (a :class:`rldata.jobs.verify.VerifyJob`, a mapping or a YAML/TOML file) and
    ``overrides`` are its fields by name: ``verifier``, ``run_id``, ``where``, ``batch``,
    ``timeout_s``, ``address`` (docs/options.md)."""
    return run_verify(_open(store, create=False), load(VerifyJob, config, **overrides)).result()


def filter(store: StoreLike, *, config=None, **overrides: Any):
    """Decide every task against one ledger slice: keep those whose pass rate lies in ``band``
    (``"0.1,0.9"`` or ``(0.1, 0.9)``), record every decision and its reason as selection ``name``.
    ``config`` (a :class:`rldata.configs.select.FilterConfig`, a mapping or a YAML/TOML file) and
    ``overrides`` are its fields by name (``band``, ``name``, ``model``, ``min_n``, ``dry_run``...;
    docs/options.md).  Returns :class:`rldata.ledger.select.FilterResult` (``kept``, ``counts`` by reason,
    the ledger key)."""
    from rldata.ledger.select import Band, filter_store  # start-up: loads yaml

    cfg = load(FilterConfig, config, **overrides)
    band = cfg.band
    if not isinstance(band, (str, Band)):
        band = ",".join(str(x) for x in band)
    b = band if isinstance(band, Band) else Band.parse(band, inclusive=cfg.inclusive)
    if cfg.from_run is not None:  # the run's live estimates (rldata.ledger.history.filter_from_run)
        from rldata.ledger.history import filter_from_run  # start-up: loads yaml

        if cfg.model or cfg.params_hash or cfg.verifier_key or cfg.domain:
            raise RldataError(
                "--from-run decides on the run's own estimates: drop --model, --params-hash, "
                "--verifier-key and --domain",
                field="from_run",
            )
        st = _open(store, create=True)
        flags = _flags(st, cfg.include_flagged)
        result, _ = filter_from_run(
            st,
            name=cfg.name,
            run_id=cfg.from_run,
            band=b,
            version=cfg.version,
            min_n=1 if cfg.min_n is None else cfg.min_n,
            dry_run=cfg.dry_run,
            flagged=None if flags is None else flags.tasks,
            flag_versions=None if flags is None else flags.versions,
        )
        return result
    if cfg.version is not None:
        raise RldataError("--version needs --from-run", field="version")
    st = _open(store, create=True)
    flags = _flags(st, cfg.include_flagged)
    result, _ = filter_store(
        st,
        flagged=None if flags is None else flags.tasks,
        flag_versions=None if flags is None else flags.versions,
        name=cfg.name,
        band=b,
        model=cfg.model,
        params_hash=cfg.params_hash,
        verifier_key=cfg.verifier_key,
        min_n=cfg.min_n,
        domain=cfg.domain,
        dry_run=cfg.dry_run,
    )
    return result


def stratify(store: StoreLike, *, config=None, **overrides: Any):
    """Bucket the kept tasks of ``selection`` by difficulty (``buckets`` as ``"easy:0.7-0.9,..."`` or
    a list of :class:`rldata.curriculum.Bucket`, or ``quantiles`` equal-count buckets) and write the
    trainer's curriculum file ``curriculum`` (default buckets.yaml; None: none).  ``config`` and
    ``overrides``: the fields of :class:`rldata.configs.select.StratifyConfig` (docs/options.md).
    Returns :class:`rldata.ledger.select.StratifyResult`."""
    from rldata.ledger.select import parse_buckets, stratify_store  # start-up: loads yaml

    cfg = load(StratifyConfig, config, **overrides)
    buckets = cfg.buckets
    parsed = (
        parse_buckets(buckets) if isinstance(buckets, str) else (None if buckets is None else list(buckets))
    )
    st = _open(store, create=True)
    flags = _flags(st, cfg.include_flagged)
    return stratify_store(
        st,
        flagged=None if flags is None else flags.tasks,
        flag_versions=None if flags is None else flags.versions,
        selection=cfg.selection,
        buckets=parsed,
        quantiles=cfg.quantiles,
        out=cfg.curriculum,
        seed=cfg.seed,
        phase_steps=None if cfg.phase_steps is None else list(cfg.phase_steps),
        dominance=cfg.dominance,
        window=cfg.window,
    )


def _quality_page(store, out) -> dict:
    """The data-quality page (rldata.report.quality) when the store holds a flag; else nothing."""
    from rldata.quality.blast import blast_radius_store, flags_by_source  # start-up: loads rensa
    from rldata.quality.config import BlastConfig  # start-up: loads rensa
    from rldata.report.quality import render_quality  # start-up: loads matplotlib

    by_source = flags_by_source(store)
    if not by_source.height:
        return {}
    return render_quality(by_source, blast_radius_store(store, BlastConfig()).runs, out)


def train(store: StoreLike, *, config=None, **settings: Any) -> TrainResult:
    """Curriculum-aware distributed GRPO on Ray; every rollout and metric lands in the store.

    ``config`` is a :class:`rldata.trainer.config.TrainConfig`, a mapping or the path of a YAML/TOML
    file of its fields; ``settings`` override it, by field name: the TrainConfig fields
    (``curriculum="buckets.yaml"``, ``steps=50``, ``mode="async"``...) and the
    :class:`rldata.trainer.config.TrainRun` ones (``where`` picks the tasks of a run without a
    curriculum; ``resume``, ``address``, ``tracker``...) and the held-out eval's, nested as ``eval``
    (``eval={"heldout": True, "n": 4}``: the bundled held-out split, 4 samples per task; the flat
    ``eval_heldout=``, ``eval_n=`` ... are deprecated and warn).  docs/options.md lists them, the same as
    ``rldata train``'s options; a setting given as None counts as not given.  ``engines=pool`` (an
    :func:`engines` pool of the run's model and settings) lends the rollout engines, which then also
    run the held-out evaluations.
    """
    from rldata.trainer.config import TrainCommand, TrainConfig  # start-up: loads yaml

    pool, settings = _pool(settings)
    settings = {k: v for k, v in settings.items() if v is not None}
    if isinstance(config, TrainCommand) and not settings:  # already built and checked (rldata train)
        return _train(store, config, engines=pool)
    if isinstance(config, TrainCommand):
        config = {**as_flat(config.train), **as_flat(config.run)}
    if isinstance(config, TrainConfig):
        config = as_flat(config)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in settings.items() if v is not None}
    return _train(store, load(TrainCommand, config, **settings), engines=pool)


def _train(store: StoreLike, command, *, engines: EnginePool | None = None) -> TrainResult:
    """Run a checked :class:`rldata.trainer.config.TrainCommand` (``rldata train`` calls this too)."""
    from rldata.trainer.driver import train as run_train  # start-up: loads ray, torch

    # every check (the config's, output paths) before the store is opened
    check_output_path(command.train.output_dir, store=store, name="output_dir")
    check_output_path(command.run.tracker_dir, store=store, name="tracker_dir")
    st = _open(store, create=True)
    run = command.run
    flags = _flags(st, run.include_flagged, versions=_resumed_flags(st, command) if run.resume else None)
    left_out = {}  # include_flagged: nothing left out
    if flags is not None:  # left out of the run's task pool (rldata.ledger.flags)
        info = {"versions": flags.versions, "flagged": flags.counts()}
        left_out = {"exclude": tuple(flags.ids), "exclude_info": info}
    return TrainResult.of(run_train(st, command, engines=engines, **left_out))


def export(store: StoreLike, *, config=None, **overrides: Any) -> ExportResult:
    """Export a selection's kept tasks (``selection``; ``format`` verl, trl, openrlhf, hf or jsonl;
    ``bucket``, ``split``, and ``options``, the format's own, e.g. ``options={"prompt_style":
    "messages"}``), or with ``rollouts=True`` stored trajectories as chat conversations (``format``
    jsonl or hf; ``run_id``, ``where``, ``correct_only``), to the directory ``out``.  ``config`` is
    a :class:`rldata.interop.options.ExportConfig`, a mapping or a YAML/TOML file of its fields;
    ``overrides`` are its fields by name and win over it (docs/options.md, the same as ``rldata
    export``'s options).  Writes a manifest beside the data, and swaps the directory into place only
    when complete.  Tasks flagged by ``decontaminate``, ``lint`` or ``dedup`` are left out of a
    selection export (counted in the manifest) unless ``include_flagged``."""
    overrides = {k: (os.fspath(v) if isinstance(v, os.PathLike) else v) for k, v in overrides.items()}
    cfg = load(ExportConfig, config, **overrides)  # every check before the store is opened
    st = _open(store, create=False)
    if cfg.rollouts:
        m = export_conversations(st, cfg)
    else:
        m = export_selection(st, cfg)
    files = tuple(f["path"] for f in m["files"])  # write_export_dir lists {path, bytes, sha256}
    return ExportResult(out=str(cfg.out), rows=int(m["rows"]), files=files, manifest=frozen(dict(m)))


def report(
    store: StoreLike,
    *,
    out: str | os.PathLike,
    selection: str | None = None,
    runs: Sequence[str] = (),
    group_by: str = "run",
    group_size: int | None = None,
    tokens_per_sample: float | None = None,
    audit_verifier: str | None = None,
    audit_against: str = "labels",
) -> ReportResult:
    """Write PNG plots and one self-contained HTML page: the selection's pass-rate histogram,
    buckets and savings, plus a training page for ``runs`` (overlaid, or grouped by ``group_by``),
    plus a verifier audit section with ``audit_verifier``, plus a data-quality page
    (``quality.html``: flags per source and rule, the runs that drew flagged tasks) when the store
    holds flags.  A store with no selection yet gets the
    training page only."""
    from rldata.report.overview import gather  # start-up: loads yaml
    from rldata.report.page import render  # start-up: loads matplotlib
    from rldata.report.training import GROUP_BY, render_training  # start-up: loads matplotlib

    if group_by not in GROUP_BY:
        raise RldataError(
            f"group_by must be one of {', '.join(GROUP_BY)}, got {group_by!r}", field="group_by"
        )
    st = _open(store, create=False)
    check_output_path(out, store=st, name="out")
    runs = list(runs or ())
    if runs and selection is None and st.scan("selections").select("selection").head(1).collect().height == 0:
        files = render_training(st, runs, out, group_by=group_by) | _quality_page(st, out)
        return ReportResult(
            out=str(out),
            html=str(files["training_html"]),
            files=frozen({k: str(v) for k, v in files.items()}),
            selection=None,
        )
    ov = gather(st, selection, group_size=group_size, tokens_per_sample=tokens_per_sample)
    audit = None
    if audit_verifier:  # computed before anything is written: a bad audit spec leaves no half report
        from rldata.audit import audit_store  # start-up: `rldata tables` does not load rldata.audit

        audit = audit_store(st, verifier=audit_verifier, against=audit_against)
    files = render(ov, out, store=st, runs=tuple(runs), group_by=group_by) | _quality_page(st, out)
    if audit is not None:
        from rldata.audit import add_to_report  # start-up: `rldata tables` does not load rldata.audit

        add_to_report(files["html"], audit)
    # start-up: `rldata tables` does not load rldata.predict.page
    from rldata.predict.page import add_to_report as add_predictions  # the newest predict --backtest

    add_predictions(files["html"], st, out)
    return ReportResult(
        out=str(out),
        html=str(files["html"]),
        files=frozen({k: str(v) for k, v in files.items()}),
        selection=ov.selection,
    )
