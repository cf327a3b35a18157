"""What a selection looks like, as frames: what ``rldata stats`` prints and ``rldata report`` plots.

Generation compute the filter saves: a task outside the band (too easy or too hard) gives GRPO
groups with (nearly) zero reward variance, hence no gradient.  Training on the unfiltered set
would still generate ``G`` completions for it every epoch.  So, per epoch over the tasks,

    saved_tokens = G * sum over dropped (too_easy, too_hard) tasks of mean completion tokens

where a task's mean completion tokens is measured from its stored sampling trajectories (same
model and sampling params as the selection), else the mean over the measured tasks, else the
``tokens_per_sample`` a user gives.  ``G`` defaults to the selection's ``min_n`` (the N of the
pass-rate job).  Tasks dropped for insufficient samples are not counted: nothing is known of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pyarrow.dataset as pads

from rldata.errors import ConfigError, RldataError
from rldata.ledger.select import _SELECTION_COLUMNS, dominance_warnings, read_selection, selection_params
from rldata.store.read import read_where
from rldata.store.rehash import current_hash

__all__ = ["Overview", "Savings", "gather", "histogram", "pick_selection"]

_EXACT_BINS_MAX_N = 64  # with one N up to this, the histogram has one bar per n_correct value


@dataclass(frozen=True)
class Savings:
    group_size: int
    dropped_tasks: int  # too_easy + too_hard
    measured_tasks: int  # dropped tasks with measured completion tokens
    tokens_per_sample: float | None  # mean over dropped tasks (measured or estimated)
    saved_tokens: float | None  # per epoch over the task set
    kept_tokens: float | None
    source: str  # measured | estimated | none

    @property
    def saved_fraction(self) -> float | None:
        if self.saved_tokens is None or self.kept_tokens is None or self.saved_tokens + self.kept_tokens == 0:
            return None
        return self.saved_tokens / (self.saved_tokens + self.kept_tokens)


@dataclass(frozen=True)
class Overview:
    selection: str
    params: dict  # the filter's (and stratify's) parameters, from the selection rows
    key: dict  # model, params_hash, verifier_key
    passrates_version: int | None
    total: int
    kept: int
    histogram: pl.DataFrame  # label, low, high, tasks, kept
    reasons: pl.DataFrame  # decision, reason, tasks
    buckets: pl.DataFrame  # bucket, low, high, tasks (kept tasks only)
    bucket_categories: pl.DataFrame  # bucket, category, tasks
    categories: pl.DataFrame  # domain, category, tasks, kept, mean_pass_rate
    savings: Savings
    warnings: tuple[str, ...] = ()  # category dominance, kept tasks outside every bucket

    @property
    def retained_fraction(self) -> float:
        return self.kept / self.total if self.total else 0.0

    def summary(self) -> dict:
        s = self.savings
        return {
            "selection": self.selection,
            **self.key,
            "passrates_version": self.passrates_version,
            "params": self.params,
            "tasks": self.total,
            "kept": self.kept,
            "retained_fraction": self.retained_fraction,
            "reasons": {r: int(c) for _, r, c in self.reasons.iter_rows()},
            "buckets": {b: int(c) for b, _, _, c in self.buckets.iter_rows()},
            "histogram": self.histogram.to_dicts(),
            "warnings": list(self.warnings),
            "savings": {
                "group_size": s.group_size,
                "dropped_tasks": s.dropped_tasks,
                "measured_tasks": s.measured_tasks,
                "tokens_per_sample": s.tokens_per_sample,
                "saved_tokens": s.saved_tokens,
                "kept_tokens": s.kept_tokens,
                "saved_fraction": s.saved_fraction,
                "source": s.source,
            },
        }


def pick_selection(store, name: str | None) -> str:
    """``name``, or the only selection in the store; several is an error listing them."""
    if name is not None:
        return name
    names = store.scan("selections").select("selection").unique().collect()["selection"].sort().to_list()
    if not names:
        raise RldataError("no selections in the store: run `rldata filter --band LO,HI --name NAME` first")
    if len(names) > 1:
        raise ConfigError(f"several selections, pick one by selection: {', '.join(names)}", field="selection")
    return names[0]


def histogram(sel: pl.DataFrame) -> pl.DataFrame:
    """Tasks (and kept tasks) per pass-rate bin; one bin per k/N when every task has the same N."""
    rated = sel.filter(pl.col("n") > 0)
    ns = rated["n"].unique().to_list()
    keep = (pl.col("decision") == "keep").cast(pl.Int64)
    if len(ns) == 1 and ns[0] <= _EXACT_BINS_MAX_N:
        n = int(ns[0])
        got = rated.group_by("n_correct").agg(pl.len().alias("tasks"), keep.sum().alias("kept"))
        bins = pl.DataFrame({"n_correct": list(range(n + 1))}, schema={"n_correct": pl.Int32})
        out = bins.join(got.with_columns(pl.col("n_correct").cast(pl.Int32)), on="n_correct", how="left")
        return out.select(
            pl.format("{}/{}", "n_correct", pl.lit(n)).alias("label"),
            (pl.col("n_correct") / n).alias("low"),
            (pl.col("n_correct") / n).alias("high"),
            pl.col("tasks").fill_null(0).cast(pl.Int64),
            pl.col("kept").fill_null(0).cast(pl.Int64),
        )
    width = 0.05
    idx = (
        (pl.col("pass_rate") / width).floor().cast(pl.Int32).clip(0, int(1 / width) - 1)
    )  # 1.0 joins the top bin
    got = rated.group_by(idx.alias("i")).agg(pl.len().alias("tasks"), keep.sum().alias("kept"))
    bins = pl.DataFrame({"i": list(range(int(1 / width)))}, schema={"i": pl.Int32})
    out = bins.join(got, on="i", how="left")
    return out.select(
        pl.format("{}-{}", (pl.col("i") * width).round(2), ((pl.col("i") + 1) * width).round(2)).alias(
            "label"
        ),
        (pl.col("i") * width).alias("low"),
        ((pl.col("i") + 1) * width).alias("high"),
        pl.col("tasks").fill_null(0).cast(pl.Int64),
        pl.col("kept").fill_null(0).cast(pl.Int64),
    )


def _savings(
    store, sel: pl.DataFrame, key: dict, group_size: int, tokens_per_sample: float | None
) -> Savings:
    rated = sel.filter(pl.col("reason").is_in(["too_easy", "too_hard", "in_band"]))
    # a selection made before the params hash left N out keeps the old hash; its samples have the new one
    ph = key.get("params_hash") and current_hash(store, key["params_hash"])
    traj = read_where(
        store,
        "trajectories",
        columns=["task_id", "completion_tokens"],
        where=pads.field("step").is_null(),
        model=key.get("model"),
        params_hash=ph,
    )
    per_task = (
        traj.group_by("task_id")
        .agg(pl.col("completion_tokens").cast(pl.Float64).mean().alias("tok"))
        .filter(pl.col("tok").is_not_null())
    )
    df = rated.select("task_id", "reason").join(per_task, on="task_id", how="left")
    measured_mean = per_task["tok"].mean() if per_task.height else None
    fallback = measured_mean if measured_mean is not None else tokens_per_sample
    source = (
        "measured"
        if measured_mean is not None
        else ("estimated" if tokens_per_sample is not None else "none")
    )
    dropped = df.filter(pl.col("reason") != "in_band")
    measured = int(dropped["tok"].is_not_null().sum())
    if fallback is None:
        return Savings(group_size, dropped.height, measured, None, None, None, source)
    df = df.with_columns(pl.col("tok").fill_null(float(fallback)))
    saved = float(df.filter(pl.col("reason") != "in_band")["tok"].sum()) * group_size
    kept = float(df.filter(pl.col("reason") == "in_band")["tok"].sum()) * group_size
    per_sample = saved / (group_size * dropped.height) if dropped.height else float(fallback)
    return Savings(group_size, dropped.height, measured, per_sample, saved, kept, source)


def gather(
    store,
    selection: str | None = None,
    *,
    group_size: int | None = None,
    tokens_per_sample: float | None = None,
) -> Overview:
    """Everything ``stats`` and ``report`` show about one selection."""
    name = pick_selection(store, selection)
    sel = read_selection(store, name, columns=_SELECTION_COLUMNS)
    tasks = store.scan("tasks").select("task_id", "domain", "category").collect()
    sel = sel.join(tasks, on="task_id", how="left").with_columns(
        pl.col("domain").fill_null("(none)"), pl.col("category").fill_null("(none)")
    )
    params = selection_params(store, name)
    key = {k: sel[k][0] for k in ("model", "params_hash", "verifier_key")}
    kept_rows = sel.filter(pl.col("decision") == "keep")
    reasons = sel.group_by("decision", "reason").agg(pl.len().alias("tasks")).sort("tasks", descending=True)
    edges = pl.DataFrame(
        params.get("stratify", {}).get("buckets", []),
        orient="row",
        schema={"bucket": pl.String, "low": pl.Float64, "high": pl.Float64},
    )
    counts = kept_rows.filter(pl.col("bucket").is_not_null()).group_by("bucket").agg(pl.len().alias("tasks"))
    buckets = (
        edges.join(counts, on="bucket", how="full", coalesce=True)  # empty buckets show as 0
        .with_columns(pl.col("tasks").fill_null(0).cast(pl.Int64))
        .select("bucket", "low", "high", "tasks")
        .sort("low", descending=True, nulls_last=True)
    )
    bucket_categories = (
        kept_rows.filter(pl.col("bucket").is_not_null())
        .group_by("bucket", "category")
        .agg(pl.len().alias("tasks"))
        .sort("bucket", "tasks", descending=[False, True])
    )
    categories = (
        sel.group_by("domain", "category")
        .agg(
            pl.len().alias("tasks"),
            (pl.col("decision") == "keep").sum().alias("kept"),
            pl.col("pass_rate").mean().alias("mean_pass_rate"),
        )
        .sort("tasks", descending=True)
    )
    if group_size is None:
        group_size = int(params.get("min_n") or 16)
    savings = _savings(store, sel, key, group_size, tokens_per_sample)
    warnings = []
    if bucket_categories.height:
        shares = bucket_categories.rename({"tasks": "count"}).with_columns(
            (pl.col("count") / pl.col("count").sum().over("bucket")).alias("share")
        )
        warnings += dominance_warnings(shares)
        outside = kept_rows.filter(pl.col("bucket").is_null()).height
        if outside:
            warnings.append(f"{outside} kept task(s) are in no bucket: the sampler never draws them")
    return Overview(
        selection=name,
        params=params,
        key=key,
        passrates_version=sel["passrates_version"][0],
        total=sel.height,
        kept=kept_rows.height,
        histogram=histogram(sel),
        reasons=reasons,
        buckets=buckets,
        bucket_categories=bucket_categories,
        categories=categories,
        savings=savings,
        warnings=tuple(warnings),
    )
