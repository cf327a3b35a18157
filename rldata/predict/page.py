"""The newest ``rldata predict --backtest`` on the report page: its metrics table and reliability plot.

``rldata report`` calls :func:`add_to_report` after writing its page; a store with no backtest run
gets nothing.  The plot: observed pass rate against predicted mean per bin, the model and its
baselines on the held-out tasks (left), and the Brier score of the fit at policy version v against
the refreshed live posterior per window of later versions (right), when the store holds a run.
"""

from __future__ import annotations

import base64
import html
import json
import os
from pathlib import Path

from rldata.store import Store

__all__ = ["add_to_report", "latest_backtest", "plot_backtest"]


def latest_backtest(store: Store) -> tuple[str, dict] | None:
    """(run_id, summary) of the newest finished backtest, or None."""
    rows = store.sql(
        "SELECT run_id, summary FROM runs WHERE kind = 'predict-backtest' AND status = 'done' "
        "ORDER BY started_at DESC LIMIT 1"
    ).fetchall()
    if not rows or not rows[0][1]:
        return None
    return rows[0][0], json.loads(rows[0][1])


def plot_backtest(summary: dict, path: str | os.PathLike) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = summary.get("splits") or {}
    versions = [s for s in splits if s != "tasks"]
    fig, axes = plt.subplots(1, 2 if versions else 1, figsize=(11 if versions else 5.5, 4.2), squeeze=False)
    ax = axes[0][0]
    ax.plot([0, 1], [0, 1], color="0.7", lw=1, ls="--")
    for name, m in (splits.get("tasks") or {}).items():
        rel = m.get("reliability") or []
        if rel:
            ax.plot(
                [r["predicted"] for r in rel],
                [r["observed"] for r in rel],
                marker="o",
                ms=3,
                label=f"{name} (rho {m['spearman']:.2f})" if m.get("spearman") is not None else name,
            )
    ax.set(
        xlabel="predicted pass rate",
        ylabel="observed pass rate",
        xlim=(0, 1),
        ylim=(0, 1),
        title="held-out tasks: reliability",
    )
    ax.legend(fontsize=7)
    if versions:
        ax = axes[0][1]
        names = sorted({p for s in versions for p in splits[s]}, key=lambda p: not p.startswith("fit@"))
        for label in ("fit", "live"):
            ys = [
                next((m["brier"] for p, m in splits[s].items() if p.startswith(label)), None)
                for s in versions
            ]
            ax.plot(
                range(len(versions)),
                ys,
                marker="o",
                label=next((n for n in names if n.startswith(label)), label)
                if label == "fit"
                else "live posterior refreshed at the window start",
            )
        ax.set_xticks(
            range(len(versions)), [s.split(" (")[0].replace("versions ", "v") for s in versions], fontsize=7
        )
        ax.set(
            ylabel="Brier (per sample)", title=f"drift over later policy versions (run {summary.get('run')})"
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _table(summary: dict) -> str:
    cols = ("tasks", "spearman", "auc", "brier", "loglik", "coverage", "bias")
    head = "".join(f"<th>{c}</th>" for c in ("split", "predictor", *cols))
    body = ""
    for split, preds in (summary.get("splits") or {}).items():
        for name, m in preds.items():
            cells = "".join(
                f"<td>{'' if m.get(c) is None else (f'{m[c]:.3f}' if isinstance(m[c], float) else m[c])}</td>"
                for c in cols
            )
            body += f"<tr><td>{html.escape(split)}</td><td>{html.escape(name)}</td>{cells}</tr>"
    return f"<table><tr>{head}</tr>{body}</table>"


def add_to_report(html_path: str | os.PathLike, store: Store, out_dir: str | os.PathLike) -> Path | None:
    """Insert the newest backtest (plot and table) into a written report page, before ``</body>``."""
    got = latest_backtest(store)
    if got is None:
        return None
    run_id, summary = got
    png = plot_backtest(summary, Path(out_dir) / "predict_backtest.png")
    img = base64.b64encode(png.read_bytes()).decode()
    section = (
        f'<section id="predict"><h2>Pass-rate predictions: backtest <code>{html.escape(run_id)}</code></h2>'
        f"<p>Model {html.escape(str(summary.get('model')))}, passrates version {summary.get('store_version')}; "
        "predicted before sampling, scored on tasks the fit never saw and on later policy versions "
        "(docs/predict.md).</p>"
        f'<figure><img alt="predict_backtest" src="data:image/png;base64,{img}"></figure>{_table(summary)}</section>'
    )
    path = Path(html_path)
    page = path.read_text()
    cut = page.rfind("</body>")
    path.write_text(page[:cut] + section + "\n" + page[cut:] if cut >= 0 else page + section)
    return path
