"""``rldata report``: a selection's overview as PNG plots and one self-contained HTML page.

Plots (matplotlib, Agg backend: no display needed): the pass-rate histogram with the kept part
highlighted, retained vs dropped by reason, kept tasks per bucket stacked by category, and the
mean pass rate per category.  The HTML page embeds the PNGs as base64, so it can be mailed or
attached as one file.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

import matplotlib

from rldata.report.training import render_training

matplotlib.use("Agg")  # before pyplot: render to files on machines without a display

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.ticker import MaxNLocator

from rldata.report.overview import Overview

__all__ = ["PLOTS", "histogram_title", "render", "write_html", "write_plots"]

_KEEP, _DROP = "#2b8a3e", "#adb5bd"
_MAX_CATEGORIES = 8  # more categories than this are folded into "other" in the bucket plot


def _fig(width: float = 7.0, height: float = 3.6):
    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def _histogram(ov: Overview, ax) -> None:
    h = ov.histogram
    x = list(range(h.height))
    kept = h["kept"].to_list()
    dropped = [t - k for t, k in zip(h["tasks"].to_list(), kept, strict=True)]
    ax.bar(x, dropped, color=_DROP, label="dropped")
    ax.bar(x, kept, bottom=dropped, color=_KEEP, label="kept")
    step = max(1, h.height // 12)
    ax.set_xticks(x[::step], h["label"].to_list()[::step], rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("pass rate (n_correct / n)")
    ax.set_ylabel("tasks")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(histogram_title(ov))
    ax.legend(frameon=False)


def histogram_title(ov: Overview) -> str:
    """Counts the tasks plotted (the sampled ones), not every task of the selection."""
    sampled = int(ov.histogram["tasks"].sum())
    rest = f" (of {ov.total})" if sampled != ov.total else ""
    return f"Pass rates of {sampled} sampled tasks{rest}, {ov.key['model']}"


def _retained(ov: Overview, ax) -> None:
    r = ov.reasons.sort("tasks")
    colors = [_KEEP if d == "keep" else _DROP for d in r["decision"].to_list()]
    ax.barh(r["reason"].to_list(), r["tasks"].to_list(), color=colors)
    for i, v in enumerate(r["tasks"].to_list()):
        ax.text(v, i, f" {v} ({v / max(ov.total, 1):.0%})", va="center", fontsize=8)
    ax.set_xlabel("tasks")
    ax.set_title(f"Retained {ov.kept} of {ov.total} ({ov.retained_fraction:.1%})")


def _buckets(ov: Overview, ax) -> None:
    bc = ov.bucket_categories
    if bc.height == 0:
        ax.text(
            0.5,
            0.5,
            "not stratified yet: run rldata stratify",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        return
    top = bc.group_by("category").agg(pl.col("tasks").sum()).sort("tasks", descending=True)["category"]
    top = top.head(_MAX_CATEGORIES).to_list()
    bc = (
        bc.with_columns(
            pl.when(pl.col("category").is_in(top))
            .then("category")
            .otherwise(pl.lit("other"))
            .alias("category")
        )
        .group_by("bucket", "category")
        .agg(pl.col("tasks").sum())
    )
    order = [b for b in ov.buckets["bucket"].to_list() if b in set(bc["bucket"].to_list())]
    cats = top + (["other"] if "other" in set(bc["category"].to_list()) else [])
    bottom = [0] * len(order)
    cmap = plt.get_cmap("tab10")
    for ci, cat in enumerate(cats):
        got = dict(bc.filter(pl.col("category") == cat).select("bucket", "tasks").iter_rows())
        vals = [got.get(b, 0) for b in order]
        ax.bar(order, vals, bottom=bottom, color=cmap(ci % 10), label=cat)
        bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
    ax.set_ylabel("kept tasks")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Buckets by category")
    ax.legend(frameon=False, fontsize=7, ncols=2)


def _categories(ov: Overview, ax) -> None:
    c = ov.categories.head(20).sort("tasks")
    labels = [f"{d}/{k}" if d != "(none)" else k for d, k in c.select("domain", "category").iter_rows()]
    ax.barh(labels, c["mean_pass_rate"].fill_null(0).to_list(), color="#1971c2")
    lo, hi = (ov.params.get("band") or [None, None])[:2]
    for edge in (lo, hi):
        if edge is not None:
            ax.axvline(edge, color="#e03131", lw=1, ls="--")
    ax.set_xlim(0, 1)
    ax.set_xlabel("mean pass rate (dashed: the filter's band)")
    ax.set_title("Pass rate by category")


PLOTS = {"histogram": _histogram, "retained": _retained, "buckets": _buckets, "categories": _categories}


def write_plots(ov: Overview, out_dir: str | os.PathLike) -> dict[str, Path]:
    """One PNG per plot in ``out_dir``; returns {plot name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, draw in PLOTS.items():
        fig, ax = _fig()
        try:
            draw(ov, ax)
            fig.tight_layout()
            paths[name] = out / f"{name}.png"
            fig.savefig(paths[name])
        finally:
            plt.close(fig)
    return paths


def _table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    rows = []
    for r in df.iter_rows():
        cells = "".join(f"<td>{html.escape(f'{v:.4g}' if isinstance(v, float) else str(v))}</td>" for v in r)
        rows.append(f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _fmt_tokens(v: float | None) -> str:
    return "n/a (no trajectories; pass --tokens-per-sample)" if v is None else f"{v:,.0f}"


def write_html(ov: Overview, plots: dict[str, Path], path: str | os.PathLike) -> Path:
    """One HTML page with the plots embedded (base64): it opens anywhere, alone."""
    s = ov.savings
    facts = [
        ("selection", ov.selection),
        ("model", ov.key["model"]),
        ("sampling params", ov.key["params_hash"]),
        ("verifier", ov.key["verifier_key"]),
        ("passrates version", ov.passrates_version),
        (
            "band",
            f"{ov.params.get('band')} {'inclusive' if ov.params.get('inclusive', True) else 'exclusive'}",
        ),
        ("min n", ov.params.get("min_n")),
        ("tasks", ov.total),
        ("kept", f"{ov.kept} ({ov.retained_fraction:.1%})"),
        (
            "generation saved per epoch",
            f"{_fmt_tokens(s.saved_tokens)} tokens"
            + (
                f" ({s.saved_fraction:.1%} of an unfiltered epoch, G={s.group_size}, {s.source})"
                if s.saved_fraction is not None
                else ""
            ),
        ),
    ]
    facts_html = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in facts
    )
    imgs = "".join(
        f'<figure><img alt="{name}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        f"</figure>"
        for name, p in plots.items()
    )
    warn = "".join(f"<li>{html.escape(w)}</li>" for w in ov.warnings)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rldata report: {html.escape(ov.selection)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #212529; }}
table {{ border-collapse: collapse; margin: .5rem 0 1.5rem; }}
th, td {{ border-bottom: 1px solid #dee2e6; padding: .25rem .75rem; text-align: left; font-size: .9rem; }}
figure {{ display: inline-block; margin: .5rem; }} img {{ max-width: 520px; }}
.warn {{ color: #c92a2a; }}
</style></head><body>
<h1>Selection <code>{html.escape(ov.selection)}</code></h1>
<table>{facts_html}</table>
{f'<h2>Warnings</h2><ul class="warn">{warn}</ul>' if warn else ""}
{imgs}
<h2>Buckets</h2>{_table(ov.buckets)}
<h2>Decisions</h2>{_table(ov.reasons)}
<h2>Categories</h2>{_table(ov.categories)}
</body></html>
"""
    path = Path(path)
    path.write_text(page)
    return path


def render(
    ov: Overview, out_dir: str | os.PathLike, *, store=None, runs: tuple = (), group_by: str = "run"
) -> dict[str, Path]:
    """Write the plots and ``index.html`` into ``out_dir`` (and, given ``runs``, the training page:
    rldata.report.training); returns every file written."""
    plots = write_plots(ov, out_dir)
    files = {**plots, "html": write_html(ov, plots, Path(out_dir) / "index.html")}
    if runs:
        files |= render_training(store, runs, out_dir, group_by=group_by)
    return files
