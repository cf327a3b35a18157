"""Difficulty filtering and bucketing: ``rldata filter`` and ``rldata stratify``.

A filter reads ONE pass-rate ledger slice, (model, params_hash, verifier_key), and decides
every task from integer counts, never from a float pass rate, so band edges are exact:

- inclusive band [lo, hi]: keep when ``ceil(lo*n) <= n_correct <= floor(hi*n)``
- exclusive band (lo, hi): keep when ``floor(lo*n) + 1 <= n_correct <= ceil(hi*n) - 1``

(``lo*n`` is computed in exact rationals: 0.1 means 1/10.)  With n=16 and [0.1, 0.9], 2..14
correct pass; 1/16 and 15/16 do not.  Reasons: ``in_band`` (keep), ``too_hard``, ``too_easy``,
``not_sampled`` (no pass-rate row for the slice) and ``insufficient_samples``.

Verifier errors are not samples of the pass rate (``n`` leaves them out) but they were drawn, so
``min_n`` is compared with the samples drawn, ``n + n_error``: one error among 16 samples must not
drop a task, which would quietly bias a selection against tasks with slow or flaky verification.
A task is ``insufficient_samples`` when fewer than ``min_n`` samples were drawn, or fewer than half
of ``min_n`` were verified (a pass rate from a few survivors is no estimate).

Rows that ``rldata sample --adaptive`` stopped early (fewer than ``n_max`` drawn) are decided by
their stopping rule instead of being ``insufficient_samples``: see :mod:`rldata.adaptive.filter`.

The result is a named selection: rows of the ``selections`` table, replaced in one Delta commit,
that record the passrates version and the parameters that produced them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field

import polars as pl

from rldata.adaptive.filter import ADAPTIVE_COLUMNS, decided_by_expr, default_n, redecide
from rldata.adaptive.prior import PREDICTED, stored_priors
from rldata.curriculum import Bucket, Curriculum, CurriculumError, check_buckets, default_phases
from rldata.curriculum.config import check_writable, dumps
from rldata.errors import ConfigError, RldataError
from rldata.names import check_name as safe_name
from rldata.results import Result
from rldata.schemas import SELECTIONS
from rldata.stats import Band, band_limits, decide, default_min_n
from rldata.store.outputs import check_output_path, staged_output
from rldata.store.read import first_match, read_where

__all__ = [
    "REASONS",
    "Band",
    "FilterResult",
    "StratifyResult",
    "assign_buckets",
    "band_limits",
    "bucket_counts",
    "bucket_tasks",
    "check_name",
    "decide",
    "default_min_n",
    "dominance_warnings",
    "filter_store",
    "leave_out_flagged",
    "parse_buckets",
    "quantile_buckets",
    "read_selection",
    "resolve_key",
    "selection_params",
    "selection_rules",
    "stratify_store",
]

REASONS = ("in_band", "too_hard", "too_easy", "insufficient_samples", "not_sampled")
KEY = ("model", "params_hash", "verifier_key")


def check_name(name: str) -> str:
    """A selection name: the one rule of :mod:`rldata.names` (no separators, no ``..``, bounded length)."""
    return safe_name(name, field="selection name")


def _choices(df: pl.DataFrame, col: str) -> str:
    return ", ".join(
        f"{v} ({c} tasks)" for v, c in df.group_by(col).agg(pl.col("len").sum()).sort(col).iter_rows()
    )


# A training run's own ledger names: its policy versions BASE+RUN/vV (rldata.trainer.writeback.ledger_model)
_POLICY_VERSION = re.compile(r"\+.+/v[0-9]+$")


def trained_models(store) -> set[str]:
    """The ledger names a training run wrote: its policy versions and the checkpoints its held-out
    evaluations sampled (the base model, evaluated at step 0, is not one of them)."""
    names = {m for (m,) in store.sql("SELECT DISTINCT model FROM passrates").fetchall() if m}
    out = {m for m in names if _POLICY_VERSION.search(m)}
    for (summary,) in store.sql("SELECT summary FROM runs WHERE kind = 'train'").fetchall():
        try:
            evals = json.loads(summary or "{}").get("evals") or []
        except (ValueError, AttributeError):
            continue
        out |= {e.get("model") for e in evals if isinstance(e, dict) and e.get("step")} & names
    return out


def resolve_key(
    passrates: pl.LazyFrame,
    *,
    model: str | None = None,
    params_hash: str | None = None,
    verifier_key: str | None = None,
    trained: Collection[str] = (),
) -> dict[str, str]:
    """Pick the one (model, params_hash, verifier_key) a filter reads; ambiguity is an error.

    Without ``model``, the ``trained`` models (:func:`trained_models`: a training run's policy
    versions and evaluated checkpoints) are left out when another model remains: after a run the
    model sampled before it (its base) is the one a filter means."""
    combos = passrates.group_by(list(KEY)).len().collect()
    if combos.height == 0:
        raise RldataError("the passrates table is empty: run `rldata sample` first")
    if model is None and trained:
        base = combos.filter(~pl.col("model").is_in(list(trained)))
        if base.height:
            combos = base
    given = {"model": model, "params_hash": params_hash, "verifier_key": verifier_key}
    for col, val in given.items():
        if val is None:
            continue
        sub = combos.filter(pl.col(col) == val)
        if sub.height == 0:
            raise ConfigError(f"no passrates for {col} {val!r}; {col}s: {_choices(combos, col)}", field=col)
        combos = sub
    out = {}
    for col in KEY:
        vals = combos[col].unique().to_list()
        if len(vals) > 1:
            raise ConfigError(
                f"passrates hold several {col}s, pick one by {col}: {_choices(combos, col)}", field=col
            )
        out[col] = vals[0]
    return out


@dataclass(frozen=True)
class FilterResult(Result):
    selection: str
    key: dict[str, str]
    band: Band
    min_n: int
    passrates_version: int
    selections_version: int | None  # None for a dry run
    counts: dict[str, int] = field(default_factory=dict)  # by reason
    total: int = 0
    decided_by: dict[str, int] = field(
        default_factory=dict
    )  # fixed | exact | sequential (rldata.adaptive.filter)
    warnings: tuple[str, ...] = ()
    # no model given: the training runs' policy versions and checkpoints the filter left out
    left_out: tuple[str, ...] = ()

    @property
    def kept(self) -> int:
        return self.counts.get("in_band", 0)


# ---- flagged tasks (rldata.ledger.flags: decontaminate, lint, dedup --near; issue 41) ----------
def leave_out_flagged(
    rows: pl.DataFrame, flagged: pl.DataFrame | None, versions: dict | None = None
) -> tuple[pl.DataFrame, dict]:
    """Kept rows whose task is in ``flagged`` (columns task_id, reason) become drops whose reason is
    the flag (``contaminated:PACK``, ``lint:RULE``, ``near_duplicate``).  Returns the rows and what the
    selection's ``params`` record under ``flags`` (``flagged`` None: nothing left out)."""
    if flagged is None:
        return rows, {"include_flagged": True}
    hit = rows.join(flagged.select("task_id", pl.col("reason").alias("__flag")), on="task_id", how="left")
    out = (pl.col("decision") == "keep") & pl.col("__flag").is_not_null()
    left = dict(hit.filter(out).group_by("__flag").len().sort("__flag").iter_rows())
    rows = hit.with_columns(
        pl.when(out).then(pl.lit("drop")).otherwise(pl.col("decision")).alias("decision"),
        pl.when(out).then(pl.col("__flag")).otherwise(pl.col("reason")).alias("reason"),
    ).drop("__flag")
    return rows, {"include_flagged": False, "versions": dict(versions or {}), "left_out": left}


def filter_store(
    store,
    *,
    name: str,
    band: Band,
    model: str | None = None,
    params_hash: str | None = None,
    verifier_key: str | None = None,
    min_n: int | None = None,
    domain: str | None = None,
    dry_run: bool = False,
    flagged: pl.DataFrame | None = None,
    flag_versions: dict | None = None,
) -> tuple[FilterResult, pl.DataFrame]:
    """Decide every task against one ledger slice and (unless ``dry_run``) write selection ``name``.

    The universe is the tasks table (restricted to ``domain`` if given) plus any task that has a
    pass-rate row for the slice; tasks without one get n=0 and ``not_sampled``.  A kept task in
    ``flagged`` (task_id, reason) is dropped with the flag as its reason (:func:`leave_out_flagged`).
    """
    check_name(name)
    pr_version = store.version("passrates")
    # one read of the pinned version (the version recorded is the one read); the key is picked in memory
    passrates = read_where(
        store,
        "passrates",
        version=pr_version,
        columns=["task_id", *KEY, "n", "n_correct", "n_error", *ADAPTIVE_COLUMNS, "run_id"],
    )
    trained = trained_models(store) if model is None else set()
    key = resolve_key(
        passrates.lazy(), model=model, params_hash=params_hash, verifier_key=verifier_key, trained=trained
    )
    left_out = sorted(m for m in trained if m != key["model"])
    rates = passrates.filter(*[pl.col(k) == v for k, v in key.items()]).select(
        "task_id",
        pl.col("n").cast(pl.Int64),
        pl.col("n_correct").cast(pl.Int64),
        pl.col("n_error").fill_null(0).cast(pl.Int64),
        *ADAPTIVE_COLUMNS,
        "run_id",
    )
    # rows a sequential rule stopped under a task's predicted prior: the prior the job stored
    priors = stored_priors(store, rates.filter(pl.col("stop_rule") == PREDICTED))
    rates = rates.drop("run_id")
    if rates["task_id"].is_duplicated().any():  # one row per env_version: never pool two environments
        raise RldataError(
            "passrates hold several environment versions for this slice; "
            "filtering by environment version is not supported yet"
        )
    del passrates
    task_ids = read_where(store, "tasks", columns=["task_id"], **({"domain": domain} if domain else {}))
    if domain is not None:
        if task_ids.height == 0:
            raise RldataError(f"no tasks with domain {domain!r} in the tasks table")
        rates = rates.join(task_ids, on="task_id", how="semi")
    # the union: rated tasks plus the never-sampled ones with n = 0 (an anti join costs half a full join)
    unrated = task_ids.join(rates, on="task_id", how="anti")
    df = pl.concat([rates, unrated], how="diagonal").with_columns(
        pl.col("n").fill_null(0), pl.col("n_correct").fill_null(0), pl.col("n_error").fill_null(0)
    )
    if min_n is None:
        min_n = default_min_n(default_n(rates))  # adaptive rows count as their N, not their early stop
    if min_n < 1:
        raise ConfigError(f"min_n must be >= 1, got {min_n}", field="min_n")
    # rows stopped early by rldata sample --adaptive are decided by their rule (rldata.adaptive.filter)
    decided, warnings = redecide(decide(df, band, min_n=min_n), band, min_n=min_n, priors=priors)
    decided, flags = leave_out_flagged(decided, flagged, flag_versions)
    decided_by = dict(decided.group_by("decided_by").len().sort("decided_by").iter_rows())
    params = {
        "band": [band.low, band.high],
        "inclusive": band.inclusive,
        "min_n": min_n,
        "domain": domain,
        **key,
        **({"decided_by": decided_by} if set(decided_by) - {"fixed"} else {}),
        "flags": flags,
    }
    rows = decided.select(
        pl.lit(name).alias("selection"),
        "task_id",
        "decision",
        "reason",
        "pass_rate",
        pl.col("n").cast(pl.Int32),
        pl.col("n_correct").cast(pl.Int32),
        *[pl.lit(v).alias(k) for k, v in key.items()],
        pl.lit(pr_version, dtype=pl.Int64).alias("passrates_version"),
        pl.lit(json.dumps(params, sort_keys=True)).alias("params"),
    )
    counts = {r: 0 for r in REASONS}
    counts.update(dict(decided.group_by("reason").len().iter_rows()))
    sel_version = None
    if not dry_run:
        # one commit replaces the selection's rows: readers see the old or the new selection, never a mix
        store.overwrite("selections", rows, predicate=f"selection = '{name}'")
        sel_version = store.version("selections")
    result = FilterResult(
        name,
        key,
        band,
        min_n,
        pr_version,
        sel_version,
        counts,
        decided.height,
        decided_by,
        tuple(warnings),
        tuple(left_out),
    )
    return result, rows


# ---- stratify ----------------------------------------------------------------------------------
def parse_buckets(text: str) -> list[Bucket]:
    """'easy:0.7-0.9,medium:0.4-0.7,hard:0.1-0.4' -> buckets (validated: names unique, no overlap)."""
    out = []
    for i, part in enumerate(p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"([^:]+):\s*([0-9.eE+-]+)\s*-\s*([0-9.eE+-]+)", part)
        if not m:
            raise ConfigError(
                f"buckets item {i + 1} {part!r}: expected NAME:LOW-HIGH, e.g. easy:0.7-0.9", field="buckets"
            )
        try:
            out.append(Bucket(m.group(1).strip(), float(m.group(2)), float(m.group(3))))
        except (CurriculumError, ValueError) as e:
            raise ConfigError(f"buckets item {i + 1} {part!r}: {e}", field="buckets") from None
    try:
        check_buckets(out)
    except CurriculumError as e:
        raise ConfigError(f"buckets: {e.reason}", field="buckets") from None
    return out


def quantile_buckets(pass_rates: pl.Series, q: int) -> list[Bucket]:
    """About equal-count buckets by pass rate; ties at a cut go up, so fewer buckets may come back."""
    if q < 1:
        raise ConfigError(f"quantiles must be >= 1, got {q}", field="quantiles")
    pr = pass_rates.drop_nulls().sort()
    if pr.len() == 0:
        raise RldataError("no kept tasks to cut into quantiles")
    lo, hi = float(pr[0]), float(pr[-1])
    cuts = sorted({float(pr.quantile(i / q, interpolation="lower")) for i in range(1, q)} - {lo})
    edges = [lo, *[c for c in cuts if c < hi], hi]
    if edges[-1] == edges[0]:  # every kept task has the same pass rate
        edges = [lo, min(1.0, hi + 1e-9)] if hi < 1.0 else [max(0.0, lo - 1e-9), hi]
    m = len(edges) - 1
    names = {1: ["all"], 2: ["hard", "easy"], 3: ["hard", "medium", "easy"]}.get(
        m, [f"q{i + 1}" for i in range(m)]
    )
    return [Bucket(names[i], edges[i], edges[i + 1]) for i in reversed(range(m))]  # easiest first


def assign_buckets(df: pl.DataFrame, buckets: list[Bucket]) -> pl.DataFrame:
    """Set ``bucket`` for kept rows by pass rate: [low, high), the top bucket also takes == high."""
    top = max(b.high for b in buckets)
    expr = pl.lit(None, dtype=pl.String)
    pr = pl.col("pass_rate")
    for b in buckets:
        inside = (pr >= b.low) & ((pr < b.high) | ((pr == b.high) & pl.lit(b.high == top)))
        expr = pl.when(inside).then(pl.lit(b.name)).otherwise(expr)
    return df.with_columns(pl.when(pl.col("decision") == "keep").then(expr).otherwise(None).alias("bucket"))


def bucket_counts(df: pl.DataFrame) -> pl.DataFrame:
    """Kept tasks per (bucket, domain, category), with each category's share of its bucket."""
    kept = df.filter(pl.col("decision") == "keep").with_columns(
        pl.col("bucket").fill_null("(none)"),
        pl.col("domain").fill_null("(none)"),
        pl.col("category").fill_null("(none)"),
    )
    out = kept.group_by("bucket", "domain", "category").len("count")
    return out.with_columns((pl.col("count") / pl.col("count").sum().over("bucket")).alias("share")).sort(
        ["bucket", "count"], descending=[False, True]
    )


def dominance_warnings(counts: pl.DataFrame, *, threshold: float = 0.6, min_tasks: int = 5) -> list[str]:
    """One line per bucket where a single category holds more than ``threshold`` of the tasks.

    Silent when the selection has only one category (nothing to balance) or the bucket is tiny.
    """
    if counts["category"].n_unique() < 2:
        return []
    sizes = counts.group_by("bucket").agg(pl.col("count").sum().alias("size"))
    top = counts.sort("count", descending=True).group_by("bucket", maintain_order=True).first()
    top = top.join(sizes, on="bucket").filter((pl.col("share") > threshold) & (pl.col("size") >= min_tasks))
    return [
        f"bucket {b!r}: category {c!r} holds {s:.0%} of its {n} tasks (> {threshold:.0%}): "
        "few reasoning patterns; consider rebalancing"
        for b, c, s, n in top.select("bucket", "category", "share", "size").sort("bucket").iter_rows()
    ]


@dataclass(frozen=True)
class StratifyResult(Result):
    selection: str
    curriculum: Curriculum
    counts: pl.DataFrame  # kept tasks per (bucket, domain, category)
    warnings: list[str]
    unbucketed: int  # kept tasks whose pass rate falls in no bucket (the sampler never draws them)
    selections_version: int
    buckets: tuple[Bucket, ...] = ()  # the edges that assigned the buckets, with their sizes


def read_selection(store, name: str, *, columns: list[str] | None = None) -> pl.DataFrame:
    """Rows of selection ``name``; an unknown name is an error listing the known ones."""
    check_name(name)
    df = read_where(store, "selections", columns=columns, selection=name)
    if df.height == 0:
        known = read_where(store, "selections", columns=["selection"])["selection"].unique().sort().to_list()
        raise RldataError(
            f"no selection {name!r}; selections: {', '.join(known) or '(none: run rldata filter)'}"
        )
    return df


def selection_params(store, name: str) -> dict:
    """The JSON ``params`` of a selection (one value per selection: read from its first row only)."""
    got = first_match(store, "selections", "params", key="selection", value=name)
    return json.loads(got) if got else {}


def selection_rules(store, name: str) -> pl.DataFrame:
    """(task_id, reason, decided_by) of a stored selection: each row's rule, read from the ledger
    at the passrates version the selection recorded."""
    sel = read_selection(
        store,
        name,
        columns=["task_id", "reason", "model", "params_hash", "verifier_key", "passrates_version"],
    )
    version = int(sel["passrates_version"][0])
    key = {k: sel[k][0] for k in ("model", "params_hash", "verifier_key")}
    rates = read_where(
        store,
        "passrates",
        version=version,
        columns=["task_id", "n", "n_error", *ADAPTIVE_COLUMNS, *key],
        **key,
    )
    rates = rates.select("task_id", decided_by_expr().alias("decided_by"))
    return (
        sel.select("task_id", "reason")
        .join(rates, on="task_id", how="left")
        .with_columns(pl.col("decided_by").fill_null("fixed"))
    )


# the columns worth reading: ``params`` repeats one JSON string on every row
_SELECTION_COLUMNS = [c for c in SELECTIONS.columns if c != "params"]


def bucket_tasks(store, selection: str) -> dict[str, list[str]]:
    """{bucket: [task_id, ...]} of a stratified selection: what CurriculumSampler draws from."""
    df = read_selection(store, selection, columns=["task_id", "bucket"]).filter(
        pl.col("bucket").is_not_null()
    )
    return {b: g["task_id"].sort().to_list() for (b,), g in df.group_by("bucket")}


def stratify_store(
    store,
    *,
    selection: str,
    buckets: list[Bucket] | None = None,
    quantiles: int | None = None,
    out=None,
    seed: int = 0,
    phase_steps: list[int] | None = None,
    dominance: float = 0.6,
    window: int = 10,
    flagged: pl.DataFrame | None = None,
    flag_versions: dict | None = None,
) -> StratifyResult:
    """Bucket the kept tasks of ``selection`` (one commit) and write the curriculum file ``out``.
    A kept task flagged since the filter (``flagged``) is dropped first, with the flag as its reason."""
    if (buckets is None) == (quantiles is None):
        raise ConfigError("give exactly one of buckets and quantiles", field="buckets")
    if out is not None:  # before the commit below: a bad path must not leave buckets half-done
        check_output_path(out, store=store, name="curriculum")
        check_writable(out)
    sel = read_selection(store, selection, columns=_SELECTION_COLUMNS)
    sel, flags = leave_out_flagged(sel, flagged, flag_versions)
    kept = sel.filter(pl.col("decision") == "keep")
    if kept.height == 0:
        raise RldataError(
            f"selection {selection!r} keeps no tasks ({sel.height} dropped, see rldata stats --selection "
            f"{selection}): nothing to bucket. Filter again with a wider band (rldata filter --band "
            f"0.05,0.95 --name {selection}) or sample more; rldata train without --curriculum draws every task"
        )
    if buckets is None:
        buckets = quantile_buckets(kept["pass_rate"], quantiles)
    assigned = assign_buckets(sel, buckets)
    tasks = store.scan("tasks").select("task_id", "domain", "category").collect()
    counts = bucket_counts(
        assigned.filter(pl.col("decision") == "keep").join(tasks, on="task_id", how="left")
    )
    sizes = dict(assigned.filter(pl.col("bucket").is_not_null()).group_by("bucket").len().iter_rows())
    unbucketed = kept.height - sum(sizes.values())
    warnings = dominance_warnings(counts.filter(pl.col("bucket") != "(none)"), threshold=dominance)
    if unbucketed:
        warnings.append(
            f"{unbucketed} kept task(s) have a pass rate outside every bucket: the sampler never draws them"
        )
    warnings += [f"bucket {b.name!r} is empty" for b in buckets if not sizes.get(b.name)]
    early = {
        k: v for k, v in selection_params(store, selection).get("decided_by", {}).items() if k != "fixed"
    }
    if early:  # optional stopping biases k/n toward the band's middle (docs/adaptive.md)
        warnings.append(
            f"{sum(early.values())} task(s) were sampled adaptively ({', '.join(sorted(early))}): their pass "
            "rates are biased toward the middle, so buckets may shift; re-sample kept tasks with a fixed N "
            "for unbiased rates (docs/adaptive.md)"
        )
    counted = [Bucket(b.name, b.low, b.high, int(sizes.get(b.name, 0))) for b in buckets]
    # build (and so validate) the curriculum before committing anything.  Its buckets are names only:
    # membership is the `bucket` column committed below, the edges are recorded in the params.
    curriculum = Curriculum(
        buckets=tuple(Bucket(b.name, count=b.count) for b in counted),
        phases=default_phases(counted, phase_steps=phase_steps, window=window),
        selection=selection,
        seed=seed,
    )
    merged = {
        **selection_params(store, selection),
        "stratify": {
            "buckets": [[b.name, b.low, b.high] for b in buckets],
            "quantiles": quantiles,
            "flags": flags,
        },
    }
    assigned = assigned.with_columns(pl.lit(json.dumps(merged, sort_keys=True)).alias("params"))
    # the curriculum is written in full before the commit and published after it: a path that cannot
    # take it (a full disk, /dev/full) fails the command with the selection as it was
    with staged_output(out, dumps(curriculum), name="curriculum"):
        store.overwrite("selections", assigned, predicate=f"selection = '{selection}'")
    return StratifyResult(
        selection, curriculum, counts, warnings, unbucketed, store.version("selections"), tuple(counted)
    )
