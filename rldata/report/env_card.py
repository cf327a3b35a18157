"""The learnability card of an environment as one self-contained HTML page (its pass-rate histogram
embedded as a PNG), for ``rldata env profile NAME --report PAGE.html``."""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path
from typing import Any

import matplotlib

from rldata.envs.statistical import SEVERITY, verdict
from rldata.store.outputs import write_output

matplotlib.use("Agg")  # before pyplot: render to files on machines without a display

import matplotlib.pyplot as plt

from rldata.envs.profile import BAND

__all__ = ["histogram_png", "write_card"]

_IN, _OUT = "#2b8a3e", "#adb5bd"


def histogram_png(row: dict[str, Any]) -> bytes:
    """The card's pass-rate histogram; the deciles inside the band are green."""
    hist = list(row["histogram"] or [0] * 10)
    fig, ax = plt.subplots(figsize=(7.0, 3.6), dpi=110)
    ax.spines[["top", "right"]].set_visible(False)
    inside = [BAND[0] <= i / 10 and (i + 1) / 10 <= BAND[1] + 1e-9 for i in range(10)]
    ax.bar(range(10), hist, color=[_IN if b else _OUT for b in inside])
    ax.set_xticks(range(10), [f"{i / 10:.1f}-{(i + 1) / 10:.1f}" for i in range(10)], rotation=45, fontsize=8)
    ax.set_xlabel("pass rate of a task")
    ax.set_ylabel("tasks")
    ax.set_title(f"{row['env_id']}: {row['tasks']} tasks x {row['n']} samples, {row['model']}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _pct(v) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def _num(v, fmt: str = ".3g") -> str:
    return "n/a" if v is None else format(v, fmt)


def write_card(row: dict[str, Any], path: str | os.PathLike, *, checks: list[dict] | None = None) -> Path:
    """The card as one HTML page; ``checks``: its statistical checks (``env_checks``), as a table."""
    facts = [
        ("environment", f"{row['env_id']}@{row['env_version']}"),
        ("model", row["model"]),
        ("sampling params", row["params_hash"]),
        ("tasks x samples", f"{row['tasks']} x {row['n']}"),
        ("verdict", row["verdict"]),
        (
            f"in band [{BAND[0]}, {BAND[1]}]",
            f"{_pct(row['in_band'])} (Wilson 95%: {_pct(row['in_band_lo'])} - {_pct(row['in_band_hi'])})",
        ),
        ("mean turns", _num(row["mean_turns"])),
        ("tool-call rate", _pct(row["tool_call_rate"])),
        ("parse-fail rate", _pct(row["parse_fail_rate"])),
        ("env-error rate", _pct(row["env_error_rate"])),
        ("tokens per episode", _num(row["tokens_per_episode"], ".1f")),
        ("seconds per episode", _num(row["seconds_per_episode"], ".3g")),
        ("sampling run", row.get("run_id")),
    ]
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in facts)
    img = base64.b64encode(histogram_png(row)).decode()
    checks_html = ""
    if checks:
        cells = "".join(
            f"<tr><td><code>{html.escape(c['check_id'])}</code></td><td>{SEVERITY[c['check_id']]}</td>"
            f"<td>{html.escape(c['status'])}</td><td>{html.escape((c['evidence'] or [''])[0])}</td></tr>"
            for c in checks
        )
        checks_html = (
            f"<h2>Statistical checks (OpenEnv RFC 008, policy v2): {html.escape(verdict(checks))}</h2>"
            f"<table><tr><th>check</th><th>severity</th><th>status</th><th>measured</th></tr>{cells}</table>"
        )
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rldata env card: {html.escape(row["env_id"])}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 900px; color: #212529; }}
table {{ border-collapse: collapse; margin: .5rem 0 1.5rem; }}
th, td {{ border-bottom: 1px solid #dee2e6; padding: .25rem .75rem; text-align: left; font-size: .9rem; }}
</style></head><body>
<h1>Learnability card: <code>{html.escape(row["env_id"])}</code></h1>
<table>{rows}</table>
<figure><img alt="pass-rate histogram" src="data:image/png;base64,{img}"></figure>
{checks_html}
</body></html>
"""

    write_output(path, page, name="report")  # a full disk is one line naming --report
    return Path(path)
