"""``rldata predict``: pass rates before sampling, and ``--backtest`` of how well that works."""

from __future__ import annotations

from pathlib import Path

import typer

from rldata.api import predict as run_predict
from rldata.cli._common import FORMAT_OPT, OUT_OPT, Format, emit, lazy_store
from rldata.cli._options import command
from rldata.console import log
from rldata.predict.config import PredictConfig

_SHOWN = ("task_id", "model", "predictor", "p_mean", "p_low", "p_high", "alpha", "beta", "n_seen")


@command(PredictConfig)
def predict(ctx: typer.Context, config: PredictConfig, fmt: Format = FORMAT_OPT, out: Path = OUT_OPT) -> None:
    """Predict each task's pass rate for a model before sampling it (a Beta: mean and interval), from
    what the store holds; --backtest scores the predictor on held-out tasks and later policy versions.

    Reuses a stored fit of the same cutoff (passrates version, policy version). See docs/predict.md.
    """
    res = run_predict(lazy_store(ctx), config=config)
    if config.backtest:
        log(
            f"backtest of {res.model} at passrates version {res.store_version}"
            + (f": run {res.run_id}" if res.run_id else "")
        )
        emit(res.table, fmt, out)
        return
    log(
        f"{'reused' if res.reused else 'fit'} {res.fit_id} for {res.model} (passrates version "
        f"{res.store_version}, policy version {res.policy_version}): {res.tasks} tasks, {res.seen} seen, "
        f"{res.unseen} unseen; prior strength {res.strength:.2f}"
        + ("" if config.dry_run else "; written to predictions")
    )
    emit(res.rows.select(_SHOWN), fmt, out)


def register(app: typer.Typer) -> None:
    app.command("predict")(predict)
