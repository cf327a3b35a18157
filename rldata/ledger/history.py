"""Pass-rate history of a training run: one row per task x run x policy version, and what it says.

Two sources give the same rows (tests/ledger/test_pass_history.py checks that they agree):

- ``ledger``: the ``passrates`` rows the trainer writes for every policy version it samples with
  (model ``BASE+RUN/vV``, rldata.trainer.writeback), read back with the version parsed from the name;
- ``trajectories``: a recount from the stored samples and their verifications (:data:`HISTORY_SQL`,
  the ledger's own counting rule, grouped by ``policy_version``).

The ledger is the default: one small table read instead of a join over every sample (benchmarks/
RESULTS.md, "Pass-rate history").  Counts follow the ledger: ``n`` excludes verifier errors
(``n_error``).

On top of the history: the run's live estimates, replayed through the same Beta posterior as the
``live:*`` samplers (rldata.curriculum.live) with the run's ``live`` settings, per version; tasks
learned / forgotten / never learned / never drawn; and ``rldata filter --from-run``, the band filter
re-run on those estimates.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from rldata.configs.sampling import HELDOUT_WHERE
from rldata.curriculum import load
from rldata.curriculum.live import LiveConfig, LiveState
from rldata.errors import ConfigError, RldataError
from rldata.ledger.core import counts_sql
from rldata.ledger.select import REASONS, FilterResult, check_name, leave_out_flagged
from rldata.sql_guard import check_predicate
from rldata.store.core import Store

__all__ = [
    "HISTORY_SQL",
    "LEARNED",
    "RunInfo",
    "classify",
    "estimates",
    "filter_from_run",
    "history",
    "live_state",
    "run_info",
    "run_pool",
    "stored_run",
]

LEARNED = (0.2, 0.8)  # a task is learned when its estimate crosses from below 0.2 to above 0.8
_VERSION = r"\+(.*)/v([0-9]+)$"  # ledger name BASE@REV+RUN/vV (rldata.trainer.writeback.ledger_model)

# The recount from the samples: the ledger's counting rule, one row per task x version x verifier.
HISTORY_SQL = f"""
SELECT task_id, $run AS run_id,
       CAST(regexp_extract(model, '/v([0-9]+)$', 1) AS BIGINT) AS policy_version,
       vkey AS verifier_key, n, n_correct, n_error
FROM ({counts_sql(where="t.run_id = $run AND t.policy_version IS NOT NULL")})
"""


def history(store: Store, run_id: str, *, source: str = "ledger") -> pl.DataFrame:
    """task_id, run_id, policy_version, verifier_key, n, n_correct, n_error, pass_rate, sorted."""
    if source == "ledger":
        q = (
            "SELECT task_id, run_id, CAST(regexp_extract(model, $pat, 2) AS BIGINT) AS policy_version, "
            "verifier_key, n, n_correct, n_error FROM passrates "
            "WHERE run_id = $run AND regexp_extract(model, $pat, 1) = $run"
        )
        df = store.sql(q, params={"run": run_id, "pat": _VERSION}).pl()
    elif source == "trajectories":
        df = store.sql(HISTORY_SQL, params={"run": run_id}).pl()
    else:
        raise ConfigError(f"source must be ledger or trajectories, got {source!r}", field="source")
    return (
        df.with_columns(
            pl.col("policy_version").cast(pl.Int64),
            *(pl.col(c).cast(pl.Int64) for c in ("n", "n_correct", "n_error")),
        )
        .with_columns((pl.col("n_correct") / pl.col("n")).alias("pass_rate"))
        .sort("task_id", "policy_version", "verifier_key")
    )


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    base: str | None  # the base model's ledger name (prefix of the run's ledger names)
    live: LiveConfig  # the run's live settings (defaults for a run that had none)
    sampler: str | None
    args: dict


def run_info(store: Store, run_id: str) -> RunInfo:
    """The run's base model ledger name and live settings, from its runs row and ledger names."""
    rows = store.sql("SELECT args FROM runs WHERE run_id = $1 AND kind = 'train'", params=[run_id]).fetchall()
    models = store.sql(
        "SELECT DISTINCT model FROM passrates WHERE run_id = $1 AND regexp_extract(model, $2, 1) = $1",
        params=[run_id, _VERSION],
    ).fetchall()
    if not rows and not models:
        raise RldataError(f"run {run_id!r}: not a training run in this store (see rldata runs)", field="run")
    args = json.loads(rows[0][0] or "{}") if rows else {}
    cfg = args.get("config") or {}
    live = cfg.get("live")
    try:
        live = dict(live) if isinstance(live, dict) else {}
        # a run stored before `age` existed aged its posteriors by policy version
        live.setdefault("age", "version")
        live_cfg = LiveConfig.from_dict(live)
    except ConfigError:
        live_cfg = LiveConfig()
    base = models[0][0].rsplit(f"+{run_id}/v", 1)[0] if models else None
    return RunInfo(run_id, base, live_cfg, stored_run(args).get("sampler"), args)


def stored_run(args: dict) -> dict:
    """How a stored train run started: its ``run`` options (TrainRun's fields, ``sampler`` the one
    that overrode the curriculum's), from this release's ``args.run`` or an earlier one's
    ``args.options`` (where ``where`` was ``tasks_where``)."""
    run = args.get("run")
    if isinstance(run, dict):
        return {**run, "sampler": "uniform" if run.get("uniform") else run.get("sampler")}
    opts = args.get("options") or {}
    return {**opts, "where": opts.get("tasks_where")}


def _prior(store: Store, base: str | None, live: LiveConfig) -> dict[str, tuple[int, int]]:
    if base is None or live.prior != "ledger":
        return {}
    rows = store.sql(
        "SELECT task_id, arg_max(n_correct, (n, verifier_key)), max(n) FROM passrates WHERE model = $1 GROUP BY 1",
        params=[base],
    ).fetchall()
    return {t: (int(k), int(n) - int(k)) for t, k, n in rows}


def estimates(
    hist: pl.DataFrame, *, live: LiveConfig, prior: dict[str, tuple[int, int]] | None = None
) -> pl.DataFrame:
    """task_id, policy_version, mean (posterior mean after that version's groups), n_seen: the run's
    history replayed in version order through :class:`rldata.curriculum.live.LiveState` (verifier
    errors count as fails, as in training).  Version -1 is the prior, for tasks that have one."""
    state = LiveState(live, prior=prior)
    rows = [
        (t, -1, state.mean(t)) for t in sorted(prior or {}) if prior[t] != (0, 0) and live.prior == "ledger"
    ]
    per_version = (
        hist.group_by("task_id", "policy_version")
        .agg(
            pl.col("n_correct").sum(),
            (pl.col("n") - pl.col("n_correct") + pl.col("n_error")).sum().alias("fails"),
        )
        .sort("policy_version", "task_id")
    )
    for (v,), d in per_version.group_by("policy_version", maintain_order=True):
        state.set_version(v)
        for t, k, f in d.select("task_id", "n_correct", "fails").iter_rows():
            state.update(t, version=v, passes=int(k), fails=int(f))
        rows += [(t, v, state.mean(t)) for t in d["task_id"].to_list()]
    return pl.DataFrame(
        rows, schema={"task_id": pl.String, "policy_version": pl.Int64, "mean": pl.Float64}, orient="row"
    )


def classify(
    est: pl.DataFrame, pool: Sequence[str] = (), *, edges: tuple[float, float] = LEARNED
) -> dict[str, list[str]]:
    """learned (an estimate below edges[0], a later one above edges[1]), forgotten (the reverse; a task
    that did both is classified by its last crossing), never_learned (drawn, never above edges[1]),
    never_drawn (in ``pool``, no group in the run)."""
    lo, hi = edges
    out: dict[str, list[str]] = {"learned": [], "forgotten": [], "never_learned": [], "never_drawn": []}
    drawn = set(est.filter(pl.col("policy_version") >= 0)["task_id"].to_list())
    for (t,), d in est.sort("task_id", "policy_version").group_by("task_id", maintain_order=True):
        if t not in drawn:
            continue
        last, was = None, None  # last crossing, and the side the estimate was last seen on
        for m in d["mean"].to_list():
            side = "low" if m < lo else "high" if m > hi else None
            if side == "high" and was == "low":
                last = "learned"
            elif side == "low" and was == "high":
                last = "forgotten"
            was = side or was
        if last is not None:
            out[last].append(t)
        if d["mean"].max() <= hi:
            out["never_learned"].append(t)
    out["never_drawn"] = sorted(set(pool) - drawn)
    return out


def live_state(store: Store, run_id: str, *, version: int | None = None) -> tuple[LiveState, int, RunInfo]:
    """The run's posteriors after the groups of policy versions <= ``version`` (default: its last),
    read at that version: what a ``live:*`` sampler of the run would have drawn from next."""
    info = run_info(store, run_id)
    hist = history(store, run_id)
    if hist.height == 0:
        raise RldataError(f"run {run_id!r} has no pass-rate history yet (no step written)", field="run")
    last = int(hist["policy_version"].max())
    if version is None:
        version = last
    if not 0 <= version <= last:
        raise ConfigError(f"version must be in [0, {last}] for run {run_id}, got {version}", field="version")
    state = LiveState(info.live, prior=_prior(store, info.base, info.live))
    per_version = (
        hist.filter(pl.col("policy_version") <= version)
        .group_by("task_id", "policy_version")
        .agg(
            pl.col("n_correct").sum(),
            (pl.col("n") - pl.col("n_correct") + pl.col("n_error")).sum().alias("f"),
        )
        .sort("policy_version", "task_id")
    )
    for t, v, k, f in per_version.select("task_id", "policy_version", "n_correct", "f").iter_rows():
        state.update(t, version=v, passes=int(k), fails=int(f))
    state.set_version(version)
    return state, version, info


def filter_from_run(
    store: Store,
    *,
    name: str,
    run_id: str,
    band,
    version: int | None = None,
    min_n: float = 1.0,
    dry_run: bool = False,
    flagged=None,
    flag_versions: dict | None = None,
):
    """The band filter on a run's live estimates at ``version``: each task's discounted counts
    (``s``, ``f``: its posterior without the flat pseudo-counts) give ``pass_rate = s / (s + f)``,
    decided against ``band``; fewer than ``min_n`` effective samples is ``insufficient_samples``,
    none at all ``not_sampled``.  Writes selection ``name`` in one commit unless ``dry_run``.
    A kept task in ``flagged`` (task_id, reason) is dropped with the flag as its reason.
    Returns (rldata.ledger.select.FilterResult, the selection rows)."""
    check_name(name)
    if min_n <= 0:
        raise ConfigError(f"min_n must be > 0, got {min_n}", field="min_n")
    state, version, info = live_state(store, run_id, version=version)
    pr_version = store.version("passrates")
    ids = sorted({t for (t,) in store.sql("SELECT task_id FROM tasks").fetchall()} | set(state.known()))
    lo, hi = band.low, band.high
    rows = []
    for t in ids:
        a, b = state.posterior(t)
        s, f = a - 1.0, b - 1.0
        n = s + f
        rate = s / n if n > 0 else None
        if n <= 0:
            reason = "not_sampled"
        elif n < min_n:
            reason = "insufficient_samples"
        elif rate < lo or (not band.inclusive and rate == lo):
            reason = "too_hard"
        elif rate > hi or (not band.inclusive and rate == hi):
            reason = "too_easy"
        else:
            reason = "in_band"
        rows.append((t, "keep" if reason == "in_band" else "drop", reason, rate, round(n), round(s)))
    params = {
        "from_run": run_id,
        "version": version,
        "band": [lo, hi],
        "inclusive": band.inclusive,
        "min_n": min_n,
        "decay": info.live.decay,
        "prior": info.live.prior,
    }
    df = pl.DataFrame(
        rows,
        schema={
            "task_id": pl.String,
            "decision": pl.String,
            "reason": pl.String,
            "pass_rate": pl.Float64,
            "n": pl.Int32,
            "n_correct": pl.Int32,
        },
        orient="row",
    )
    df, params["flags"] = leave_out_flagged(df, flagged, flag_versions)
    out = df.select(
        pl.lit(name).alias("selection"),
        "task_id",
        "decision",
        "reason",
        "pass_rate",
        "n",
        "n_correct",
        pl.lit(f"{info.base}+{run_id}/v{version}" if info.base else None, dtype=pl.String).alias("model"),
        pl.lit(None, dtype=pl.String).alias("params_hash"),
        pl.lit(None, dtype=pl.String).alias("verifier_key"),
        pl.lit(pr_version, dtype=pl.Int64).alias("passrates_version"),
        pl.lit(json.dumps(params, sort_keys=True)).alias("params"),
    )
    counts = {r: 0 for r in REASONS} | dict(df.group_by("reason").len().iter_rows())
    sel_version = None
    if not dry_run:
        store.overwrite("selections", out, predicate=f"selection = '{name}'")
        sel_version = store.version("selections")
    key = {"from_run": run_id, "version": str(version), "model": f"{info.base}+{run_id}/v{version}"}
    result = FilterResult(name, key, band, min_n, pr_version, sel_version, counts, df.height)
    return result, out


def _stored_eval(cfg: dict, opts: dict) -> dict:
    """The held-out eval of a stored train config: ``size``, ``selection`` and the predicate as
    ``where``.  This release stores ``config.eval`` (``heldout`` for the bundled split); the
    previous one stored flat ``config.eval_size``/``eval_selection`` and ``options.eval_where``."""
    ev = cfg.get("eval")
    if isinstance(ev, dict):
        return {**ev, "where": HELDOUT_WHERE if ev.get("heldout") else ev.get("where")}
    return {
        "size": cfg.get("eval_size"),
        "selection": cfg.get("eval_selection"),
        "where": opts.get("eval_where"),
    }


def run_pool(store: Store, info: RunInfo) -> list[str] | None:
    """The tasks the run drew from, rebuilt from its recorded arguments as rldata train built them
    (the curriculum's selection, or the tasks matching ``tasks_where``, minus the held-out tasks);
    None when the arguments no longer resolve (a curriculum file gone, an older run's record)."""
    cfg, opts = info.args.get("config") or {}, info.args.get("options") or {}
    run = stored_run(info.args)
    try:
        if cfg.get("curriculum"):
            sel = load(cfg["curriculum"]).selection
            rows = store.sql(
                "SELECT task_id FROM selections WHERE selection = $1 AND decision = 'keep' "
                "AND bucket IS NOT NULL",
                params=[sel],
            ).fetchall()
        else:
            where = run.get("where")
            if where:
                check_predicate(where, field="where")  # read back from the store: spliced into SQL
            rows = store.sql("SELECT task_id FROM tasks" + (f" WHERE {where}" if where else "")).fetchall()
        ev = _stored_eval(cfg, opts)
        size = int(ev.get("size") or 200)
        held: list = []
        if ev.get("where"):
            check_predicate(ev["where"], field="eval.where")  # read back from the store: spliced into SQL
            held = store.sql(
                f"SELECT task_id FROM tasks WHERE {ev['where']} ORDER BY task_id LIMIT {size}"
            ).fetchall()
        elif ev.get("selection"):
            held = store.sql(
                "SELECT task_id FROM selections WHERE selection = $1 AND decision = 'keep' "
                "ORDER BY task_id LIMIT $2",
                params=[ev["selection"], size],
            ).fetchall()
    except Exception:  # noqa: BLE001 - best effort: the page says the pool is unknown
        return None
    skip = {t for (t,) in held}
    return sorted({t for (t,) in rows} - skip)
