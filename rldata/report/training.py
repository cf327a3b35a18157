"""The report's training page: a run's curves from the ``metrics`` and ``runs`` tables.

One PNG per family of metrics (reward and accuracy, held-out accuracy with its interval,
kept/dropped groups, KL / entropy / clip fraction, response length, per-bucket accuracy with the
curriculum's phase changes, time per phase, episodes' tool calls / tool errors / turns / finish
reasons, async staleness / rho / clip statistics), several runs overlaid, and runs sharing a tag
(``rldata train --tag``) drawn as their mean with a min-max band.  A family no run wrote is drawn as an explicit
"no data" panel.  ``training.html`` embeds the PNGs, like the selection page.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: render to files on machines without a display

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.ticker import MaxNLocator

from rldata.errors import ConfigError, RldataError
from rldata.store.core import Store

__all__ = ["FAMILIES", "GROUP_BY", "load_curves", "render_training", "write_training_plots"]

GROUP_BY = ("run", "tag")
TIME_PHASES = ("generate", "reward", "update", "sync", "writeback")
_STYLES = ("-", "--", ":", "-.")


def _run_tag(args: str | None) -> str | None:
    try:
        a = json.loads(args or "{}")
    except ValueError:
        return None
    return (a.get("run") or a.get("options") or {}).get("tag") or a.get("tag")


def load_curves(
    store: Store, run_ids: Sequence[str], *, group_by: str = "run"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(curves, runs): ``curves`` has one row per (series, name, step) with mean, lo, hi over the
    series' runs; a series is a run, or with ``group_by="tag"`` every run sharing its tag."""
    if group_by not in GROUP_BY:
        raise ConfigError(
            f"group_by must be one of {', '.join(GROUP_BY)}, got {group_by!r}", field="group_by"
        )
    ids = list(dict.fromkeys(run_ids))
    runs = store.sql(
        "SELECT run_id, kind, status, started_at, ended_at, args, summary FROM runs "
        "WHERE list_contains($1, run_id) ORDER BY started_at",
        params=[ids],
    ).pl()
    metrics = store.sql(
        "SELECT run_id, step, name, value FROM metrics WHERE list_contains($1, run_id) AND value IS NOT NULL",
        params=[ids],
    ).pl()
    missing = [r for r in ids if r not in set(runs["run_id"].to_list()) | set(metrics["run_id"].to_list())]
    if missing:
        raise RldataError(f"run {missing[0]!r}: not in the runs table and no metrics rows (see rldata runs)")
    tags = {r: _run_tag(a) for r, a in runs.select("run_id", "args").iter_rows()}
    series = {r: (tags.get(r) or r) if group_by == "tag" else r for r in ids}
    runs = runs.with_columns(pl.col("run_id").replace_strict(tags, default=None).alias("tag"))
    curves = (
        metrics.with_columns(pl.col("run_id").replace_strict(series).alias("series"))
        .group_by("series", "name", "step")
        .agg(
            pl.col("value").mean().alias("mean"),
            pl.col("value").min().alias("lo"),
            pl.col("value").max().alias("hi"),
            pl.col("run_id").n_unique().alias("runs"),
        )
        .sort("series", "name", "step")
    )
    order = list(dict.fromkeys(series[r] for r in ids))
    return curves.with_columns(pl.col("series").cast(pl.Enum(order))).sort("series", "name", "step"), runs


def _no_data(ax, names: str) -> None:
    ax.text(
        0.5,
        0.5,
        f"no data: no run wrote {names}",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="#868e96",
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _draw(
    ax, curves: pl.DataFrame, name: str, *, label: str, color, style: str = "-", marker=None, lw: float = 1.5
) -> bool:
    """One metric of every series on ``ax``: a line per series (the mean), a band where it has >1 run.
    The series' name is in the label only when there are several (run ids are long)."""
    drew = False
    several = curves["series"].n_unique() > 1
    for i, ((series,), d) in enumerate(
        curves.filter(pl.col("name") == name).group_by("series", maintain_order=True)
    ):
        if d.height == 0:
            continue
        x, n = d["step"].to_list(), d["runs"].max()
        c = color if color is not None else plt.get_cmap("tab10")(i % 10)
        ls = style if color is None else _STYLES[i % len(_STYLES)]
        tag = f" (mean of {n})" if n > 1 else ""
        text = " ".join(t for t in (str(series) if several else "", label) if t) + tag
        ax.plot(x, d["mean"].to_list(), ls=ls, color=c, marker=marker, ms=5, lw=lw, label=text or None)
        if n > 1:
            ax.fill_between(x, d["lo"].to_list(), d["hi"].to_list(), color=c, alpha=0.15, lw=0)
        drew = True
    return drew


def _lines(
    ax,
    curves,
    names: Sequence[tuple[str, str]],
    *,
    per_metric_color: bool,
    marker=None,
    widths: Sequence[float] = (),
) -> bool:
    cmap = plt.get_cmap("tab10")
    drew = False
    for j, (name, label) in enumerate(names):
        drew |= _draw(
            ax,
            curves,
            name,
            label=label,
            color=cmap(j % 10) if per_metric_color else None,
            marker=marker,
            lw=widths[j] if j < len(widths) else 1.5,
        )
    if drew:
        if ax.get_legend_handles_labels()[1]:
            ax.legend(frameon=False, fontsize=7)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: 1, 2, not 1.0, 1.2
    return drew


def _simple(ax, curves, pairs, *, ylabel: str, missing: str, **kw) -> bool:
    """The metrics ``pairs`` on ``ax`` with ``ylabel``, or the "no data" panel naming ``missing``."""
    if _lines(ax, curves, pairs, **kw):
        ax.set_ylabel(ylabel)
        return True
    _no_data(ax, missing)
    return False


def _reward(curves, fig, ax) -> str:
    # reward drawn wide underneath: with the default 1/0 reward it equals accuracy
    if not _lines(
        ax,
        curves,
        [("reward_mean", "reward"), ("accuracy", "accuracy")],
        per_metric_color=True,
        widths=(4.0, 1.5),
    ):
        _no_data(ax, "reward_mean / accuracy")
    return "Reward and accuracy"


def _heldout(curves, fig, ax) -> str:
    if not _simple(
        ax,
        curves,
        [("eval/accuracy", "held-out accuracy")],
        ylabel="accuracy (points: evaluations)",
        missing="eval/accuracy (train with --eval-heldout)",
        per_metric_color=False,
        marker="o",
    ):
        return "Held-out accuracy"
    # each evaluation's 95% interval over its tasks (eval/ci_low, eval/ci_high: runs since they exist)
    ci = (
        curves.filter(pl.col("name").is_in(["eval/ci_low", "eval/ci_high"]) & (pl.col("runs") == 1))
        .pivot(on="name", index=["series", "step"], values="mean")
        .sort("series", "step")
    )
    if {"eval/ci_low", "eval/ci_high"} <= set(ci.columns):
        for i, ((series,), d) in enumerate(ci.group_by("series", maintain_order=True)):
            ax.vlines(
                d["step"].to_list(),
                d["eval/ci_low"].to_list(),
                d["eval/ci_high"].to_list(),
                color=plt.get_cmap("tab10")(i % 10),
                lw=2,
                alpha=0.5,
            )
        return "Held-out accuracy (bars: 95% interval over the tasks)"
    return "Held-out accuracy"


def _groups(curves, fig, ax) -> str:
    names = sorted(n for n in curves["name"].unique().to_list() if n.startswith("groups_dropped/"))
    pairs = [("groups_kept", "kept"), ("groups_dropped", "dropped")] + [
        (n, f"dropped: {n[15:]}") for n in names
    ]
    _simple(
        ax,
        curves,
        pairs,
        ylabel="groups per step",
        missing="groups_kept / groups_dropped",
        per_metric_color=True,
    )
    return "Kept and dropped groups"


def _policy(curves, fig, ax) -> str:
    ax.remove()
    axes = fig.subplots(1, 3)
    for a, (name, label) in zip(axes, [("kl", "KL"), ("entropy", "entropy"), ("clip_frac", "clip fraction")]):
        a.spines[["top", "right"]].set_visible(False)
        if _lines(a, curves, [(name, "")], per_metric_color=False):
            a.set_title(label, fontsize=9)
        else:
            _no_data(a, name)
    return "KL, entropy and clip fraction"


def _length(curves, fig, ax) -> str:
    _simple(
        ax,
        curves,
        [("response_len_mean", "")],
        ylabel="completion tokens (mean)",
        missing="response_len_mean",
        per_metric_color=False,
    )
    return "Response length"


def _buckets(curves, fig, ax) -> str:
    names = sorted(n for n in curves["name"].unique().to_list() if n.startswith("accuracy/"))
    if not names:  # runs written before accuracy/<bucket> existed: their reward per bucket
        names = sorted(n for n in curves["name"].unique().to_list() if n.startswith("reward_mean/"))
    ylabel = "accuracy" if names and names[0].startswith("accuracy/") else "reward (mean)"
    if not _simple(
        ax,
        curves,
        [(n, n.split("/", 1)[1]) for n in names],
        ylabel=ylabel,
        missing="accuracy/<bucket>",
        per_metric_color=True,
    ):
        return "Per-bucket accuracy"
    phase = curves.filter(pl.col("name") == "phase").sort("series", "step")
    changes = phase.filter(pl.col("mean") != pl.col("mean").shift(1).over("series"))
    several = curves["series"].n_unique() > 1
    for series, step, p in changes.select("series", "step", "mean").unique().sort("step").iter_rows():
        ax.axvline(step, color="#e03131", lw=1, ls="--")
        ax.text(
            step,
            1.0,
            f" {series}: phase {int(p)}" if several else f" phase {int(p)}",
            fontsize=7,
            transform=ax.get_xaxis_transform(),
            color="#e03131",
            va="top",
        )
    return "Per-bucket accuracy (dashed: curriculum phase changes)"


def _timing(curves, fig, ax) -> str:
    _simple(
        ax,
        curves,
        [(f"time/{p}", p) for p in TIME_PHASES],
        ylabel="seconds per step",
        missing="time/<phase>",
        per_metric_color=True,
    )
    return "Time per phase"


def _episodes(curves, fig, ax) -> str:
    ax.remove()
    axes = fig.subplots(1, 3)
    names = curves["name"].unique().to_list()
    finishes = sorted(n for n in names if n.startswith("episode/finish/"))
    panels = [
        (
            "tool calls and errors per episode",
            [("episode/tool_calls_mean", "calls"), ("episode/tool_errors_mean", "errors")],
        ),
        ("turns per episode", [("episode/turns_mean", "")]),
        ("finish reasons (share)", [(n, n.rsplit("/", 1)[1]) for n in finishes]),
    ]
    for a, (title, pairs) in zip(axes, panels):
        a.spines[["top", "right"]].set_visible(False)
        if pairs and _lines(a, curves, pairs, per_metric_color=True):
            a.set_title(title, fontsize=9)
        else:
            _no_data(a, "episode/* (train --env NAME)")
    return "Episodes: tool calls, tool errors, turns, finish reasons"


def _staleness(curves, fig, ax) -> str:
    ax.remove()
    axes = fig.subplots(1, 3)
    for a in axes:
        a.spines[["top", "right"]].set_visible(False)
    hist = (
        curves.filter(pl.col("name").str.starts_with("staleness/"))
        .with_columns(pl.col("name").str.split("/").list.get(1).cast(pl.Int64).alias("gap"))
        .group_by("series", "gap")
        .agg(pl.col("mean").sum().alias("rollouts"))
        .sort("series", "gap")
    )
    if hist.height:
        series = hist["series"].unique(maintain_order=True).to_list()
        width = 0.8 / len(series)
        for i, s in enumerate(series):
            d = hist.filter(pl.col("series") == s)
            a_x = [g + (i - (len(series) - 1) / 2) * width for g in d["gap"].to_list()]
            a = axes[0]
            a.bar(
                a_x,
                d["rollouts"].to_list(),
                width=width,
                color=plt.get_cmap("tab10")(i % 10),
                label=str(s) if len(series) > 1 else None,
            )
        axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[0].set_xlabel("policy versions behind")
        axes[0].set_title("staleness (rollouts, whole run)", fontsize=9)
        if len(series) > 1:
            axes[0].legend(frameon=False, fontsize=7)
    else:
        _no_data(axes[0], "staleness/<k>")
    for a, title, pairs in (
        (axes[1], "behaviour weight rho", [("rho_mean", "mean"), ("rho_max", "max")]),
        (
            axes[2],
            "clipped / truncated tokens",
            [("clip_frac", "clipped"), ("tis_frac", "truncated"), ("clip_or_tis_frac", "either")],
        ),
    ):
        if _lines(a, curves, pairs, per_metric_color=True):
            a.set_title(title, fontsize=9)
        else:
            _no_data(a, " / ".join(n for n, _ in pairs))
    return "Async: staleness, rho and clip statistics"


FAMILIES = {
    "train_reward": _reward,
    "train_heldout": _heldout,
    "train_groups": _groups,
    "train_policy": _policy,
    "train_length": _length,
    "train_buckets": _buckets,
    "train_timing": _timing,
    "train_episodes": _episodes,
    "train_async": _staleness,
}


def write_training_plots(curves: pl.DataFrame, out_dir: str | os.PathLike) -> dict[str, tuple[Path, str]]:
    """One PNG per family in ``out_dir``; returns {family: (path, title)}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    done = {}
    for name, draw in FAMILIES.items():
        fig, ax = plt.subplots(figsize=(7.0, 3.6), dpi=110)
        ax.spines[["top", "right"]].set_visible(False)
        try:
            title = draw(curves, fig, ax)
            fig.suptitle(title, fontsize=11)
            fig.tight_layout()
            done[name] = (out / f"{name}.png", title)
            fig.savefig(done[name][0])
        finally:
            plt.close(fig)
    return done


def _duration(start, end) -> str:
    if start is None or end is None:
        return ""
    return str(dt.timedelta(seconds=round((end - start).total_seconds())))


def _runs_table(runs: pl.DataFrame) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in ("run", "tag", "status", "started", "duration", "steps", "held-out first", "held-out last")
    )
    rows = []
    for r in runs.iter_rows(named=True):
        s = json.loads(r["summary"] or "{}")
        s = s if isinstance(s, dict) else {}
        ev = s.get("evals") or []
        cells = [
            r["run_id"],
            r["tag"] or "",
            r["status"],
            f"{r['started_at']:%Y-%m-%d %H:%M}",
            _duration(r["started_at"], r["ended_at"]),
            s.get("last_step", ""),
            f"{ev[0]['accuracy']:.3f}" if ev else "",
            f"{ev[-1]['accuracy']:.3f}" if len(ev) > 1 else "",
        ]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _link_from(index: Path) -> None:
    """A link to the training page at the top of the selection page (once)."""
    text = index.read_text()
    link = '<p><a href="training.html">Training page</a></p>'
    if link not in text and "</h1>" in text:
        index.write_text(text.replace("</h1>", "</h1>\n" + link, 1))


def render_training(
    store: Store, run_ids: Sequence[str], out_dir: str | os.PathLike, *, group_by: str = "run"
) -> dict[str, Path]:
    """Write the training PNGs and ``training.html`` into ``out_dir``; returns every file written."""
    if not run_ids:
        raise ConfigError("the training page needs at least one run id", field="runs")
    curves, runs = load_curves(store, run_ids, group_by=group_by)
    plots = write_training_plots(curves, out_dir)
    figs = "".join(
        f'<figure><figcaption>{html.escape(title)}</figcaption><img alt="{html.escape(title)}" '
        f'src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}"></figure>'
        for p, title in plots.values()
    )
    history = _history_pages(store, run_ids, out_dir)
    links = " ".join(
        f'<a href="{p.name}">{html.escape(p.stem.removeprefix("history-"))}</a>'
        for k, p in history.items()
        if k.endswith("_html")
    )
    index = Path(out_dir) / "index.html"
    back = ' <a href="index.html">Selection page</a>.' if index.exists() else ""
    note = _phase_note(curves)
    what = (
        "runs grouped by tag: mean, band = min..max over the group"
        if group_by == "tag"
        else "one line per run"
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rldata report: training</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #212529; }}
table {{ border-collapse: collapse; margin: .5rem 0 1.5rem; }}
th, td {{ border-bottom: 1px solid #dee2e6; padding: .25rem .75rem; text-align: left; font-size: .9rem; }}
figure {{ display: inline-block; margin: .5rem; }} img {{ max-width: 520px; }}
figcaption {{ font-weight: 600; font-size: .9rem; }}
.note {{ background: #fff9db; padding: .5rem .75rem; }}
</style></head><body>
<h1>Training</h1>
<p>{html.escape(what)}. Metrics from the store's <code>metrics</code> table.{back}</p>
{_runs_table(runs)}
{f'<p class="note">{html.escape(note)}</p>' if note else ""}
{f"<p>Task history (learned, forgotten, pass rate by policy version): {links}</p>" if links else ""}
{figs}
</body></html>
"""
    path = Path(out_dir) / "training.html"
    path.write_text(page)
    if index.exists():
        _link_from(index)
    return {name: p for name, (p, _) in plots.items()} | history | {"training_html": path}


def _phase_note(curves: pl.DataFrame) -> str | None:
    """Why the reward may fall, said where a run changed curriculum phase and has no held-out eval."""
    names = set(curves["name"].unique().to_list())
    phase = curves.filter(pl.col("name") == "phase")
    if "eval/accuracy" in names or phase.height == 0 or phase["mean"].n_unique() < 2:
        return None
    return (
        "The training reward and accuracy are those of the tasks drawn at each step: when the curriculum "
        "moves to a harder bucket (dashed lines) they fall even if the policy improves. Held-out "
        "accuracy measures the policy on a fixed set: train with --eval-heldout (or --eval-where, "
        "--eval-selection)."
    )


def _history_pages(store: Store, run_ids: Sequence[str], out_dir) -> dict[str, Path]:
    """A task-history page (rldata.report.history) per run that has pass-rate history."""
    from rldata.ledger.history import history  # start-up: loads yaml
    from rldata.report.history import render_history  # start-up: loads yaml

    files: dict[str, Path] = {}
    for r in dict.fromkeys(run_ids):
        if history(store, r).height:
            files |= render_history(store, r, out_dir)
    return files
