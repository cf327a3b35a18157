"""``rldata stats`` (a selection in the terminal) and ``rldata report`` (PNG plots + one HTML page)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from rldata.api import report as run_report
from rldata.cli._common import get_store
from rldata.console import log

_SELECTION = typer.Option(None, "--selection", "-s", help="Selection to describe (default: the only one).")
_GROUP = typer.Option(
    None, "--group-size", help="Completions per task in training (default: the filter's min_n)."
)
_REPORT_DIR = typer.Option(..., "--out", "-o", help="Directory for the PNG plots and index.html.")
_TOKENS = typer.Option(
    None,
    "--tokens-per-sample",
    help="Completion tokens per sample when the store has no trajectories to measure.",
)

_RUNS = typer.Option(
    None,
    "--run",
    "-r",
    help="Add the training page (training.html) for this run; repeat "
    "to overlay runs. See rldata runs for the ids.",
)
_GROUP_BY = typer.Option(
    "run",
    "--group-by",
    help="run: one line per run; tag: runs sharing a --tag (seeds) as their mean with a min-max band.",
)


def _bar(kept: int, tasks: int, top: int, width: int = 40) -> str:
    """Kept tasks as full blocks, dropped ones as light shade: readable without colour too."""
    full = round(width * tasks / top) if top else 0
    k = round(width * kept / top) if top else 0
    return f"[green]{'█' * k}[/][grey50]{'░' * (full - k)}[/]"


def _print(ov) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(highlight=False, force_terminal=sys.stdout.isatty())
    con.print(
        f"[bold]selection {ov.selection}[/]  model {ov.key['model']}  params {ov.key['params_hash']}  "
        f"verifier {ov.key['verifier_key']}  passrates v{ov.passrates_version}"
    )
    band = ov.params.get("band")
    con.print(
        f"band {band} {'inclusive' if ov.params.get('inclusive', True) else 'exclusive'}, "
        f"min_n {ov.params.get('min_n')}: kept [bold]{ov.kept}[/] of {ov.total} tasks "
        f"({ov.retained_fraction:.1%})"
    )
    h = Table(title="pass-rate histogram", show_edge=False, header_style="bold")
    for col in ("pass rate", "tasks", "kept", ""):
        h.add_column(col, justify="right" if col in ("tasks", "kept") else "left")
    top = max(ov.histogram["tasks"].to_list() or [0])
    for label, _, _, tasks, kept in ov.histogram.iter_rows():
        h.add_row(label, str(tasks), str(kept), _bar(kept, tasks, top))
    con.print(h)
    r = Table(title="decisions", show_edge=False, header_style="bold")
    for col in ("decision", "reason", "tasks", "share"):
        r.add_column(col)
    for d, reason, n in ov.reasons.iter_rows():
        r.add_row(d, reason, str(n), f"{n / max(ov.total, 1):.1%}")
    con.print(r)
    if ov.buckets.height:
        b = Table(title="buckets (kept tasks)", show_edge=False, header_style="bold")
        for col in ("bucket", "low", "high", "tasks"):
            b.add_column(col)
        for name, lo, hi, n in ov.buckets.iter_rows():
            b.add_row(name, "" if lo is None else f"{lo:g}", "" if hi is None else f"{hi:g}", str(n))
        con.print(b)
    else:
        con.print("buckets: none yet (rldata stratify)")
    s = ov.savings
    if s.saved_tokens is None:
        con.print(
            f"generation saved: {s.dropped_tasks} dropped tasks x G={s.group_size} samples per epoch; "
            "no trajectories to measure tokens (give --tokens-per-sample)"
        )
    else:
        con.print(
            f"generation saved per epoch: [bold]{s.saved_tokens:,.0f}[/] completion tokens "
            f"({s.saved_fraction:.1%} of an unfiltered epoch): {s.dropped_tasks} dropped tasks x "
            f"G={s.group_size} x {s.tokens_per_sample:.1f} tokens ({s.source})"
        )
    for w in ov.warnings:
        con.print(f"[yellow]warning:[/] {w}")


def stats(
    ctx: typer.Context,
    selection: str = _SELECTION,
    group_size: int = _GROUP,
    tokens_per_sample: float = _TOKENS,
    as_json: bool = typer.Option(False, "--json", help="Print the numbers as one JSON object instead."),
) -> None:
    """Pass-rate histogram, bucket sizes, retained fraction and the generation the filter saves."""
    from rldata.report.overview import gather  # start-up: loads yaml

    ov = gather(get_store(ctx), selection, group_size=group_size, tokens_per_sample=tokens_per_sample)
    if as_json:
        sys.stdout.write(json.dumps(ov.summary(), default=str) + "\n")
    else:
        _print(ov)


def report(
    ctx: typer.Context,
    out: Path = _REPORT_DIR,
    selection: str = _SELECTION,
    group_size: int = _GROUP,
    tokens_per_sample: float = _TOKENS,
    audit_verifier: str = typer.Option(
        None, "--audit-verifier", help="Add a verifier audit section (see audit)."
    ),
    audit_against: str = typer.Option(
        "labels", "--audit-against", help="The audit's reference: a verifier or labels."
    ),
    runs: list[str] = _RUNS,
    group_by: str = _GROUP_BY,
) -> None:
    """The same as stats, as PNG plots and one self-contained HTML page (images embedded).

    With --run, also a training page of those runs' curves.  A store with no selection yet gets the
    training page only.
    """
    res = run_report(
        get_store(ctx),
        out=out,
        selection=selection,
        runs=tuple(runs or ()),
        group_by=group_by,
        group_size=group_size,
        tokens_per_sample=tokens_per_sample,
        audit_verifier=audit_verifier,
        audit_against=audit_against,
    )
    names = ", ".join(Path(p).name for p in res.files.values())
    if res.selection is None:
        log(f"training report of {', '.join(runs)}: {names} in {out}")
    else:
        log(f"report of {res.selection!r}: {names} in {out}")
    print(res.html)


def register(app: typer.Typer) -> None:
    app.command("stats")(stats)
    app.command("report")(report)
