"""``rldata filter`` and ``rldata stratify``: difficulty selection and curriculum buckets."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import typer

from rldata.api import filter as run_filter
from rldata.api import stratify as run_stratify
from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, get_store
from rldata.cli._options import command
from rldata.configs.select import FilterConfig, StratifyConfig
from rldata.console import log

_CURRICULUM_ARG = typer.Argument(Path("buckets.yaml"), help="The curriculum file to check.")


@command(FilterConfig)
def filter_cmd(
    ctx: typer.Context, config: FilterConfig, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT
) -> None:
    """Keep tasks whose pass rate lies in a band; record every decision with its reason."""
    from rldata.ledger.select import REASONS  # start-up: loads yaml

    res = run_filter(get_store(ctx, create=True), config=config)
    name, dry_run = config.name, config.dry_run
    key = ", ".join(f"{k}={v}" for k, v in res.key.items())
    where = "dry run, nothing written" if dry_run else f"selections version {res.selections_version}"
    log(
        f"filter {name!r}: kept {res.kept} of {res.total} tasks ({key}; passrates version "
        f"{res.passrates_version}; min_n {res.min_n}; {where})"
    )
    if res.left_out:
        log(
            f"read the base model {res.key['model']}: left out {len(res.left_out)} model(s) a training run "
            f"wrote (policy versions, checkpoints; --model picks one, e.g. {res.left_out[-1]})"
        )
    if res.total and not res.kept:
        # exit 0 all the same: the selection (every task's decision and reason) is written, and a
        # dry run exploring bands is no failure; the steps that need kept tasks refuse it themselves
        why = ", ".join(f"{r} {n}" for r, n in sorted(res.counts.items(), key=lambda kv: -kv[1]) if n)
        log(
            f"warning: filter {name!r} kept 0 of {res.total} tasks ({why}): widen --band, sample more "
            "(rldata sample --n 32), or filter another model's rows (--model)"
        )
    early = {k: v for k, v in res.decided_by.items() if k != "fixed"}
    if early:
        log(
            "decided by adaptive stopping rules (rows stopped early): "
            + ", ".join(f"{k} {v}" for k, v in sorted(early.items()))
        )
    for w in res.warnings:
        log(f"warning: {w}")
    short = res.counts.get("insufficient_samples", 0)
    if short:
        log(
            f"warning: {short} task(s) have fewer than {res.min_n} samples drawn, or under half of them verified "
            "(insufficient_samples, dropped): "
            f"rldata sql \"SELECT task_id, n FROM selections WHERE selection = '{name}' "
            "AND reason = 'insufficient_samples'\""
        )
    flagged = {r: n for r, n in res.counts.items() if r not in REASONS and n}
    if flagged:
        log(
            "left out as flagged (--include-flagged keeps them): "
            + ", ".join(f"{r} {n}" for r, n in flagged.items())
        )
    unsampled = res.counts.get("not_sampled", 0)
    if unsampled:
        log(f"{unsampled} task(s) have no samples for this ledger slice (not_sampled, dropped)")
    rows = [
        {
            "reason": r,
            "decision": "keep" if r == "in_band" else "drop",
            "tasks": res.counts.get(r, 0),
            "share": res.counts.get(r, 0) / res.total if res.total else 0.0,
        }
        for r in (*REASONS, *sorted(set(res.counts) - set(REASONS)))  # + flags: contaminated:PACK, ...
    ]
    done = (
        None
        if dry_run
        else f"filter committed selection {name!r} (selections version {res.selections_version})"
    )
    emit(pl.DataFrame(rows), fmt, out, committed=done)


@command(StratifyConfig)
def stratify(
    ctx: typer.Context, config: StratifyConfig, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT
) -> None:
    """Assign kept tasks to difficulty buckets and write the trainer's curriculum file."""
    res = run_stratify(get_store(ctx, create=True), config=config)
    selection, curriculum = config.selection, config.curriculum
    sizes = ", ".join(f"{b.name} {b.count} [{b.low:g}, {b.high:g})" for b in res.buckets)
    log(f"stratify {selection!r}: {sizes}; wrote {curriculum} (selections version {res.selections_version})")
    for w in res.warnings:
        log(f"warning: {w}")
    done = f"stratify committed the buckets of {selection!r} (selections version {res.selections_version})"
    emit(res.counts, fmt, out, committed=done)


def curriculum_cmd(
    ctx: typer.Context,
    path: Path = _CURRICULUM_ARG,
    fmt: Format = FORMAT_OPT,
) -> None:
    """Validate a curriculum file (buckets.yaml) and print its phases; errors name the key.  With a
    store (--store or $RLDATA_STORE), also check its selection there, as rldata train does."""
    from rldata.curriculum import CurriculumSampler, load, selection_buckets  # start-up: loads yaml

    cur = load(path)
    root = ctx.find_root().obj or {}
    if root.get("store") is not None:  # the default store is not "given": a file alone is checked alone
        store = get_store(ctx)
        CurriculumSampler(cur, selection_buckets(store, cur, path))  # unknown or empty buckets, as train
    log(
        f"{path}: valid; selection {cur.selection}, sampler {cur.sampler}, seed {cur.seed}, buckets "
        + ", ".join(f"{b.name} [{b.low:g}, {b.high:g})" if b.has_edges else b.name for b in cur.buckets)
    )
    rows = []
    for p in cur.phases:
        rule = p.promote_when
        rows.append(
            {
                "phase": p.name,
                **{f"w_{b}": float(p.weights.get(b, 0.0)) for b in cur.bucket_names},
                "until_step": p.until_step,
                "promote_when": None
                if rule is None
                else f"{rule.metric}({rule.bucket}) over {rule.window} steps >= {rule.threshold:g}",
            }
        )
    emit(pl.DataFrame(rows), fmt)


def register(app: typer.Typer) -> None:
    app.command("filter")(filter_cmd)
    app.command("stratify")(stratify)
    app.command("curriculum")(curriculum_cmd)
