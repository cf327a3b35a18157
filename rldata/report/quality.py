"""The report's data-quality page: flags per source and rule, and the runs that touched them.

Drawn from two frames :mod:`rldata.quality` computes (``rldata report`` passes them): tasks per
(source, flag, severity), and the blast radius of every flagged task (one row per run: rollouts,
tokens, steps and checkpoints on flagged tasks).  ``quality.html`` embeds its PNG, like the other pages.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: render to files on machines without a display

import matplotlib.pyplot as plt
import polars as pl

__all__ = ["render_quality"]


def _plot(by_source: pl.DataFrame, path: Path) -> Path:
    """Tasks per flag, one bar per flag, stacked by source."""
    wide = by_source.pivot(on="source", index="flag", values="tasks", aggregate_function="sum").fill_null(0)
    flags = wide["flag"].to_list()
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(flags) + 1.4), dpi=110)
    ax.spines[["top", "right"]].set_visible(False)
    left = [0] * len(flags)
    for source in [c for c in wide.columns if c != "flag"]:
        vals = wide[source].to_list()
        ax.barh(flags, vals, left=left, label=source)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_xlabel("tasks")
    ax.set_title("Flags per rule, by source")
    ax.invert_yaxis()
    ax.legend(fontsize=8, frameon=False, bbox_to_anchor=(1.01, 1), loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>" for v in r) + "</tr>"
        for r in df.iter_rows()
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render_quality(
    by_source: pl.DataFrame, runs: pl.DataFrame, out_dir: str | os.PathLike
) -> dict[str, Path]:
    """Write ``quality_flags.png`` and ``quality.html`` into ``out_dir``; returns them."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = _plot(by_source, out / "quality_flags.png") if by_source.height else None
    runs = runs.with_columns(
        pl.col("steps").cast(pl.List(pl.String)).list.join(","), pl.col("checkpoints").list.join(" ")
    )
    errors = by_source.filter(pl.col("severity") == "error")["tasks"].sum()
    img = (
        f'<figure><img alt="flags" src="data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()}"></figure>'
        if png is not None
        else "<p>No flags.</p>"
    )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rldata report: data quality</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #212529; }}
table {{ border-collapse: collapse; margin: .5rem 0 1.5rem; }}
th, td {{ border-bottom: 1px solid #dee2e6; padding: .25rem .75rem; text-align: left; font-size: .9rem; }}
img {{ max-width: 720px; }}
</style></head><body>
<h1>Data quality</h1>
<p>Flags from <code>rldata decontaminate</code>, <code>rldata lint</code> and <code>rldata dedup --near</code>.
Rows of severity <code>error</code> ({errors} task-flags) are left out by filter, stratify, train and export
unless <code>--include-flagged</code>; warnings are recorded only.  Details: <code>rldata blast-radius</code>.</p>
{img}
<h2>Flags per source and rule</h2>{_table(by_source)}
<h2>Runs that drew flagged tasks</h2>
{_table(runs) if runs.height else "<p>No run drew a flagged task.</p>"}
</body></html>
"""
    page_path = out / "quality.html"
    page_path.write_text(page)
    files = {"quality_html": page_path}
    if png is not None:
        files["quality_flags"] = png
    return files
