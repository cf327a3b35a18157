"""``rldata sample --skip-predicted CONF``: what a sampling job takes from a prediction.

The job's tasks are predicted for its model (a fit is reused when one of the same cutoff is stored).
A task the prediction puts outside ``band`` with probability at least ``CONF`` and that has no sample
under the job's ledger key is skipped: a ``sample_predictions`` row with its reason
(``predicted_too_hard`` or ``predicted_too_easy``), never a ledger row.  With ``--adaptive
sequential`` every sampled task's prediction is its prior in the stopping rule (stop rule
``predicted``, rldata.adaptive.prior).

The fit learns from the model's ledger slice with the most tasks (the job's params hash first among
equals).  Which Beta is the rule's prior: when the fit read the job's own ledger slice, the cross-task prior
alone (``prior_alpha``, ``prior_beta``), because the job counts the task's stored samples itself and
must not count them twice; otherwise the whole prediction, whose evidence is another slice's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import polars as pl

from rldata.adaptive.prior import PredictedPlan, quantize
from rldata.adaptive.rules import AdaptiveSpec
from rldata.engine.core import model_identity
from rldata.predict.calibration import prob_outside
from rldata.predict.config import PredictConfig
from rldata.predict.fit import predict_store
from rldata.stats import Band
from rldata.store import Store

__all__ = ["plan_of", "sample_plan", "with_priors"]


def _slice_of(store: Store, model_name: str, params_hash: str) -> tuple[str | None, str | None]:
    """The ledger slice (params hash, verifier key) to learn from: the model's slice with the most
    tasks, the job's own params hash first among equals; (None, None) when the model has no rows (the
    fit then says so).  The largest slice, not the job's: a job's first rows must not swap the slice
    a re-run learns from."""
    got = store.sql(
        "SELECT params_hash, verifier_key, count(DISTINCT task_id) AS n FROM passrates WHERE model = $1 "
        "GROUP BY 1, 2 ORDER BY n DESC, params_hash = $2 DESC, 1, 2 LIMIT 1",
        params=[model_name, params_hash],
    ).fetchall()
    return (got[0][0], got[0][1]) if got else (None, None)


def sample_plan(
    store: Store,
    *,
    model: str | None,
    task_ids: Sequence[str],
    params_hash: str,
    band: Band,
    conf: float,
    seed: int = 0,
) -> PredictedPlan:
    """Predict ``task_ids`` for ``model`` and decide the skips at ``conf`` for ``band``."""
    name = model_identity(model).name
    ph, vkey = _slice_of(store, name, params_hash)
    cfg = PredictConfig(model=model, params_hash=ph, verifier_key=vkey, seed=seed)
    res = predict_store(store, cfg, task_ids=task_ids)
    # the fit read the job's own slice: the job counts each task's stored samples itself
    return plan_of(res.rows, band=band, conf=conf, own=ph == params_hash, fit_id=res.fit_id)


def plan_of(rows: pl.DataFrame, *, band: Band, conf: float, own: bool, fit_id: str = "") -> PredictedPlan:
    """The plan of prediction rows (task_id, alpha, beta, prior_alpha, prior_beta, p_mean): a skip
    where P(outside ``band``) >= ``conf``, named by the likelier side; the rule's prior the cross-task
    prior when ``own`` (module docstring), else the whole prediction."""
    a, b = rows["alpha"].to_numpy(), rows["beta"].to_numpy()
    below = prob_outside(a, b, band.low, 1.0)  # P(p < low): beta.sf(1) is 0
    p_out = prob_outside(a, b, band.low, band.high)
    pa_ = rows["prior_alpha" if own else "alpha"].to_numpy()
    pb = rows["prior_beta" if own else "beta"].to_numpy()
    ids = rows["task_id"].to_list()
    skips = {
        t: ("predicted_too_hard" if lo >= out - lo else "predicted_too_easy", float(out), float(m))
        for t, lo, out, m in zip(ids, below, p_out, rows["p_mean"].to_list())
        if out >= conf
    }
    return PredictedPlan(
        priors={t: quantize(float(x), float(y)) for t, x, y in zip(ids, pa_, pb)},
        skips=skips,
        conf=float(conf),
        band=f"{band.low:g},{band.high:g}",
        fit_id=fit_id,
        p_out=dict(zip(ids, np.asarray(p_out, dtype=float).tolist())),
        p_mean=dict(zip(ids, rows["p_mean"].to_list())),
    )


def with_priors(spec: AdaptiveSpec, plan: PredictedPlan) -> AdaptiveSpec:
    """The sequential rule with the plan's priors; other rules as they are (exact needs no prior)."""
    return replace(spec, priors=dict(plan.priors)) if spec.rule == "sequential" else spec
