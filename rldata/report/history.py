"""The report's task-history page of a training run (``rldata report --run RUN_ID``): what the run
learned and forgot, task by task, from its pass-rate history (rldata.ledger.history).

Sections: counts of tasks learned (live estimate from < 0.2 to > 0.8), forgotten (the reverse),
never learned, never drawn; each class's tasks by category, named by their prompt (truncated),
source and category, each with the query that lists its rows; pass rate by policy version of the
tasks that moved most (a plot whose legend names the tasks, and a table); drift of the live estimate
from the offline one (the base model's ledger row), per bucket.  ``history-RUN_ID.html`` embeds its
plot, like the other pages.
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
from matplotlib.ticker import MaxNLocator

from rldata.ledger import history as ph
from rldata.store.core import Store

__all__ = ["history_summary", "mover_labels", "render_history"]

MOVERS = 8  # tasks drawn in the plot
LIST_MAX = 50  # tasks listed per class (the counts are complete)
PROMPT_CHARS = 80  # a prompt longer than this is cut, with an ellipsis (the whole text is its tooltip)
LEGEND_CHARS = 32


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
    shown = {t for k, v in classes.items() for t in v[:LIST_MAX]} | set(movers)
    tasks = store.sql(
        "SELECT task_id, prompt, source, category, domain FROM tasks WHERE list_contains($1, task_id)",
        params=[sorted(shown)],
    ).pl()
    return {
        "info": info,
        "tasks": {r["task_id"]: r for r in tasks.iter_rows(named=True)},
        "first_last": first_last,
        "pool_known": pool is not None,
        "classes": classes,
        "movers": movers,
        "by_version": hist.filter(pl.col("task_id").is_in(movers)),
        "drift": drift,
        "estimates": est,
    }


def mover_labels(s: dict) -> list[str]:
    """The plot's legend: each mover by its prompt, cut to fit (a task without a row: its id's start)."""
    return [_short(_label(s["tasks"], t), LEGEND_CHARS) for t in s["movers"]]


def _plot(s: dict, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    rows = (
        s["by_version"]
        .group_by("task_id", "policy_version")
        .agg(pl.col("n_correct").sum(), pl.col("n").sum())
    )
    for t, label in zip(s["movers"], mover_labels(s), strict=True):
        d = rows.filter(pl.col("task_id") == t).sort("policy_version")
        if d.height:
            ax.plot(d["policy_version"], d["n_correct"] / d["n"], marker="o", lw=1.2, label=label)
    if not s["movers"]:
        ax.text(
            0.5, 0.5, "no data: the run drew no task yet", ha="center", va="center", transform=ax.transAxes
        )
    ax.set_xlabel("policy version")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("pass rate (the version's groups)")
    ax.set_ylim(-0.05, 1.05)
    if s["movers"]:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _short(text: str, n: int) -> str:
    text = " ".join(str(text).split())  # one line
    return text if len(text) <= n else text[: n - 1] + "…"


def _label(tasks: dict, task_id: str) -> str:
    """A task as people read it: its prompt (the id when the tasks table has no row for it)."""
    row = tasks.get(task_id)
    return row["prompt"] if row and row.get("prompt") else task_id[:16]


def _anchor(task_id: str) -> str:
    return "task-" + "".join(c for c in task_id if c.isalnum())[:24]


def _task_link(tasks: dict, task_id: str, anchored: set[str]) -> str:
    """The task's prompt, linked to its row in the class tables when it has one there."""
    text = _label(tasks, task_id)
    short = html.escape(_short(text, PROMPT_CHARS))
    if task_id not in anchored:
        return f'<span title="{html.escape(text)}">{short}</span>'
    return f'<a href="#{_anchor(task_id)}" title="{html.escape(text)}">{short}</a>'


def _anchored(s: dict) -> set[str]:
    return {t for v in s["classes"].values() for t in v[:LIST_MAX]}


def _rows_query(run_id: str, task_id: str) -> str:
    q = lambda v: v.replace("'", "''")
    return (
        'rldata sql "SELECT step, policy_version, reward, completion FROM trajectories '
        f"WHERE run_id = '{q(run_id)}' AND task_id = '{q(task_id)}' ORDER BY step\""
    )


def _class_tables(s: dict, run_id: str, desc: dict[str, str]) -> str:
    """Each class's first LIST_MAX tasks, grouped by category: prompt, source, first and last live
    estimate, and the query that lists the task's rows."""
    tasks = s["tasks"]
    moved = {r["task_id"]: r for r in s["first_last"].iter_rows(named=True)}
    out = []
    for k, ids in s["classes"].items():
        title = f"{k.replace('_', ' ')}: {len(ids)} task(s)"
        if not ids:
            out.append(f"<h3>{html.escape(title)}</h3><p>none</p>")
            continue
        shown = ids[:LIST_MAX]
        cat = lambda t: (tasks.get(t) or {}).get("category") or "(no category)"
        more = f" (the first {LIST_MAX})" if len(ids) > LIST_MAX else ""
        parts = [f"<h3>{html.escape(title)}{more}</h3><p>{html.escape(desc[k])}</p>"]
        for c in sorted({cat(t) for t in shown}):
            rows = []
            for t in sorted((t for t in shown if cat(t) == c), key=lambda t: _label(tasks, t)):
                row, m = tasks.get(t) or {}, moved.get(t) or {}
                est = f"{m['first']:.2f} → {m['last']:.2f}" if m.get("first") is not None else ""
                text = _label(tasks, t)
                rows.append(
                    f'<tr id="{_anchor(t)}"><td title="{html.escape(text)}">'
                    f"{html.escape(_short(text, PROMPT_CHARS))}</td>"
                    f"<td>{html.escape(row.get('source') or '')}</td><td>{html.escape(est)}</td>"
                    f"<td><details><summary><code>{html.escape(t[:12])}</code> rows</summary>"
                    f"<code>{html.escape(_rows_query(run_id, t))}</code></details></td></tr>"
                )
            parts.append(
                f"<h4>{html.escape(c)} ({len(rows)})</h4><table><tr><th>task (prompt)</th><th>source</th>"
                f"<th>live estimate first → last</th><th>its rows</th></tr>{''.join(rows)}</table>"
            )
        out.append("".join(parts))
    return "".join(out)


def _table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    cell = lambda v: f"{v:.3f}" if isinstance(v, float) else ("" if v is None else str(v))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in r) + "</tr>" for r in df.iter_rows()
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _movers_table(pivot: pl.DataFrame, tasks: dict, anchored: set[str]) -> str:
    """The movers' pass rate per policy version, each row named by its task (linked to its row below)."""
    versions = [c for c in pivot.columns if c != "task_id"]
    head = "<th>task (prompt)</th><th>category</th>" + "".join(
        f"<th>v{html.escape(v)}</th>" for v in versions
    )
    body = []
    for r in pivot.iter_rows(named=True):
        t = r["task_id"]
        cells = "".join(f"<td>{'' if r[v] is None else f'{r[v]:.3f}'}</td>" for v in versions)
        category = (tasks.get(t) or {}).get("category") or ""
        body.append(
            f"<tr><td>{_task_link(tasks, t, anchored)}</td><td>{html.escape(category)}</td>{cells}</tr>"
        )
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


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
        f"<tr><td>{k.replace('_', ' ')}</td><td>{len(v)}</td><td>{html.escape(desc[k])}</td></tr>"
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
    order = {t: i for i, t in enumerate(s["movers"])}
    pivot = pivot.sort(pl.col("task_id").replace_strict(order, default=len(order), return_dtype=pl.Int64))
    movers = _movers_table(pivot, s["tasks"], _anchored(s))
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
<table><tr><th>class</th><th>tasks</th><th>meaning</th></tr>{classes}</table>
<h2>Pass rate by policy version: the {len(s["movers"])} tasks that moved most</h2>
<img alt="pass rate by version" src="data:image/png;base64,{img}">
{movers}
<h2>Tasks by class and category</h2>
<p>Each task by its prompt (hover for the whole text), its source and the live estimate's first and
last value; "rows" gives the query that lists its rollouts in this run.</p>
{_class_tables(s, run_id, desc)}
<h2>Drift of the live estimate from the offline one, per bucket</h2>
{_table(s["drift"])}
</body></html>
"""
    page_path = out / f"history-{run_id}.html"
    page_path.write_text(page)
    return {f"history_{run_id}_png": png, f"history_{run_id}_html": page_path}
