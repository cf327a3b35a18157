"""The report's task-history page of a training run (``rldata report --run RUN_ID``): what the run
learned and forgot, task by task, from its pass-rate history (rldata.ledger.history).

Sections: counts and lists of tasks learned (live estimate from < 0.2 to > 0.8), forgotten (the
reverse), never learned, never drawn; pass rate by policy version of the tasks that moved most (a
plot and a table); drift of the live estimate from the offline one (the base model's ledger row),
per bucket.  ``history-RUN_ID.html`` embeds its plot, like the other pages.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import polars as pl

from rldata.ledger import history as ph
from rldata.store.core import Store

__all__ = ["history_summary", "render_history"]

MOVERS = 8  # tasks drawn in the plot
LIST_MAX = 50  # task ids listed per class (the counts are complete)


def history_summary(store: Store, run_id: str) -> dict:
    """Everything the page shows, as data: ``classes`` (name -> task ids), ``movers`` (task ids),
    ``by_version`` (the movers' history rows), ``drift`` (per bucket), ``estimates``."""
    info = ph.run_info(store, run_id)
    hist = ph.history(store, run_id)
    prior = ph._prior(store, info.base, info.live)
    est = ph.estimates(hist, live=info.live, prior=prior)
    pool = ph.run_pool(store, info)
    classes = ph.classify(est, pool or ())
    first_last = (  # drawn tasks only: a prior alone does not move
        est.filter(pl.col("task_id").is_in(hist["task_id"].unique().implode()))
        .sort("policy_version")
        .group_by("task_id")
        .agg(pl.col("mean").first().alias("first"), pl.col("mean").last().alias("last"))
        .with_columns((pl.col("last") - pl.col("first")).alias("moved"))
        .sort(pl.col("moved").abs(), "task_id", descending=[True, False])
    )
    movers = first_last.head(MOVERS)["task_id"].to_list()
    buckets = store.sql(
        "SELECT task_id, arg_max(bucket, step) AS bucket FROM trajectories WHERE run_id = $1 GROUP BY 1",
        params=[run_id],
    ).pl()
    offline = pl.DataFrame(
        [(t, k / (k + f)) for t, (k, f) in prior.items() if k + f],
        schema={"task_id": pl.String, "offline": pl.Float64},
        orient="row",
    )
    drift = (
        first_last.join(buckets, on="task_id")
        .join(offline, on="task_id", how="left")
        .group_by("bucket")
        .agg(
            pl.len().alias("tasks"),
            pl.col("offline").mean().alias("offline_mean"),
            pl.col("last").mean().alias("live_mean"),
            (pl.col("last") - pl.col("offline")).mean().alias("drift"),
        )
        .sort("bucket")
    )
    return {
        "info": info,
        "pool_known": pool is not None,
        "classes": classes,
        "movers": movers,
        "by_version": hist.filter(pl.col("task_id").is_in(movers)),
        "drift": drift,
        "estimates": est,
    }


def _plot(s: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    rows = (
        s["by_version"]
        .group_by("task_id", "policy_version")
        .agg(pl.col("n_correct").sum(), pl.col("n").sum())
    )
    for t in s["movers"]:
        d = rows.filter(pl.col("task_id") == t).sort("policy_version")
        if d.height:
            ax.plot(d["policy_version"], d["n_correct"] / d["n"], marker="o", lw=1.2, label=t[:24])
    if not s["movers"]:
        ax.text(
            0.5, 0.5, "no data: the run drew no task yet", ha="center", va="center", transform=ax.transAxes
        )
    ax.set_xlabel("policy version")
    ax.set_ylabel("pass rate (the version's groups)")
    ax.set_ylim(-0.05, 1.05)
    if s["movers"]:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    cell = lambda v: f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in r) + "</tr>" for r in df.iter_rows()
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render_history(store: Store, run_id: str, out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write ``history-RUN_ID.png`` and ``history-RUN_ID.html`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = history_summary(store, run_id)
    png = _plot(s, out / f"history-{run_id}.png")
    lo, hi = ph.LEARNED
    desc = {
        "learned": f"live estimate crossed from below {lo} to above {hi}",
        "forgotten": f"from above {hi} to below {lo}",
        "never_learned": f"drawn, estimate never above {hi}",
        "never_drawn": "in the run's task pool, no group"
        + ("" if s["pool_known"] else " (pool unknown: the run's curriculum or record no longer resolves)"),
    }
    classes = "".join(
        f"<tr><td>{k.replace('_', ' ')}</td><td>{len(v)}</td><td>{html.escape(desc[k])}</td>"
        f"<td><code>{html.escape(', '.join(v[:LIST_MAX]))}{' ...' if len(v) > LIST_MAX else ''}</code></td></tr>"
        for k, v in s["classes"].items()
    )
    pivot = (
        s["by_version"]
        .group_by("task_id", "policy_version")
        .agg((pl.col("n_correct").sum() / pl.col("n").sum()).alias("pass_rate"))
        .sort("policy_version")
        .pivot(on="policy_version", index="task_id", values="pass_rate")
        if s["by_version"].height
        else pl.DataFrame({"task_id": []})
    )
    info = s["info"]
    img = base64.b64encode(png.read_bytes()).decode()
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rldata report: task history of {
        html.escape(run_id)
    }</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #212529; }}
table {{ border-collapse: collapse; margin: .5rem 0 1.5rem; }}
th, td {{ border-bottom: 1px solid #dee2e6; padding: .25rem .75rem; text-align: left; font-size: .85rem; }}
code {{ font-size: .75rem; }}
</style></head><body>
<h1>Task history: {html.escape(run_id)}</h1>
<p>Live estimates: the Beta posterior of rldata.curriculum.live replayed over the run's pass-rate
history (decay {info.live.decay} per policy version, prior {html.escape(info.live.prior)}{
        f" from {html.escape(info.base)}" if info.base and info.live.prior == "ledger" else ""
    }). <a href="training.html">Training page</a>.</p>
<h2>Tasks</h2>
<table><tr><th>class</th><th>tasks</th><th>meaning</th><th>task ids</th></tr>{classes}</table>
<h2>Pass rate by policy version: the {len(s["movers"])} tasks that moved most</h2>
<img alt="pass rate by version" src="data:image/png;base64,{img}">
{_table(pivot)}
<h2>Drift of the live estimate from the offline one, per bucket</h2>
{_table(s["drift"])}
</body></html>
"""
    page_path = out / f"history-{run_id}.html"
    page_path.write_text(page)
    return {f"history_{run_id}_png": png, f"history_{run_id}_html": page_path}
