"""``rldata predict``: fit on what the store holds for a policy, predict the selected tasks, store them.

The cutoff of a fit is (the passrates Delta version it read, the policy version it predicts for); the
fit id hashes it with the ledger slice, the features, the seed and the folds.  A second call with
the same fit id finds its predictions stored and reuses them (``refit`` fits again); any new sample
moves the passrates version, so predictions are never reused past new evidence.

A prediction per task (a row of ``predictions``), layered (rldata.predict.predictors):

- ``prior``: a task with none of its own rows in the slice gets the cross-task prior;
- ``live``: a seen task gets the prior updated with its own rows: for the model itself its ledger
  counts; for a training run's policy version (``run``) the run's live posterior
  (rldata.ledger.history.live_state: the run's groups and the base model's ledger row, discounted by
  policy version as the live samplers discount them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from rldata.engine.core import model_identity
from rldata.errors import RldataError
from rldata.ledger.history import live_state
from rldata.ledger.select import resolve_key
from rldata.predict.calibration import interval, mean_of
from rldata.predict.config import PredictConfig
from rldata.predict.features import Features, build_features, parse_families
from rldata.predict.predictors import C_GRID, CrossTaskModel, seen_posterior
from rldata.results import Result
from rldata.store import Store

__all__ = ["Cutoff", "PredictResult", "fit_predictor", "ledger_counts", "predict_store", "task_rows"]

_TASK_COLS = "task_id, prompt, source, category, metadata"


@dataclass(frozen=True)
class Cutoff:
    """What a fit read: the ledger slice of ``base`` at ``store_version``, for ``model`` at ``policy_version``."""

    model: str  # ledger name predicted for (BASE+RUN/vV for a run's policy version)
    base: str  # ledger name whose rows the cross-task fit learns from
    params_hash: str
    verifier_key: str
    store_version: int  # passrates Delta version
    policy_version: int
    run: str | None = None


@dataclass(frozen=True)
class PredictResult(Result):
    """What one ``predict`` call did: which fit, how many tasks, and the predictions."""

    fit_id: str
    model: str
    tasks: int
    seen: int
    unseen: int
    reused: bool
    strength: float | None
    store_version: int
    policy_version: int
    fit: dict
    rows: pl.DataFrame


def ledger_counts(
    store: Store, model: str, *, params_hash: str | None, verifier_key: str | None, version: int
) -> tuple[dict, pl.DataFrame]:
    """The slice ``(model, params_hash, verifier_key)`` of passrates at ``version`` (the one slice,
    as ``rldata filter`` resolves it) and its counts per task: task_id, n (verified), n_correct.
    Of a task's rows under several environment versions the one with most samples."""
    rows = store.sql(
        "SELECT task_id, model, params_hash, verifier_key, n, n_correct FROM passrates WHERE model = $1",
        params=[model],
        as_of={"passrates": version},
    ).pl()
    if rows.height == 0:
        raise RldataError(
            f"no rows to fit on: passrates holds nothing for model {model!r} (run rldata sample first)",
            field="model",
        )
    key = resolve_key(rows.lazy(), model=model, params_hash=params_hash, verifier_key=verifier_key)
    counts = (
        rows.filter(
            pl.col("params_hash") == key["params_hash"], pl.col("verifier_key") == key["verifier_key"]
        )
        .sort("task_id", "n", descending=[False, True])
        .unique("task_id", keep="first", maintain_order=True)
        .select("task_id", pl.col("n").cast(pl.Int64), pl.col("n_correct").cast(pl.Int64))
        .filter(pl.col("n") > 0)
    )
    return key, counts


def task_rows(store: Store, ids: Sequence[str]) -> list[dict]:
    """The tasks' rows (task_id, prompt, source, category, metadata), in ``ids`` order."""
    got = store.sql(
        f"SELECT {_TASK_COLS} FROM tasks JOIN _ids USING (task_id)",
        extra={"_ids": pa.table({"task_id": pa.array(sorted(set(ids)), pa.string())})},
    ).pl()
    by = {r["task_id"]: r for r in got.iter_rows(named=True)}
    return [by[t] for t in ids if t in by]


def _target_ids(store: Store, where: str | None) -> list[str]:
    q = "SELECT task_id FROM tasks" + (f" WHERE {where}" if where else "") + " ORDER BY task_id"
    return [t for (t,) in store.sql(q).fetchall()]


def _fit_id(cut: Cutoff, cfg: PredictConfig, revision: str) -> str:
    blob = {
        **asdict(cut),
        "features": list(parse_families(cfg.features)),
        "seed": cfg.seed,
        "folds": cfg.folds,
        "grid": list(C_GRID),
        "policy_revision": revision,
        "fit": 1,  # bump when the fitting procedure changes what it predicts
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:16]


def fit_predictor(feats: Features, counts: pl.DataFrame, *, seed: int, folds: int) -> CrossTaskModel:
    """The cross-task model fit on ``counts`` (task_id, n, n_correct) of tasks that have features."""
    have = set(feats.task_ids)
    counts = counts.filter(pl.col("task_id").is_in(list(have)))
    return CrossTaskModel(seed=seed, folds=folds).fit(
        feats, counts["task_id"].to_list(), counts["n_correct"].to_numpy(), counts["n"].to_numpy()
    )


def _resolve(store: Store, cfg: PredictConfig, *, version: int):
    """(cutoff, the slice's counts, seen evidence task -> (s, f), policy path and revision)."""
    ident = model_identity(cfg.model)
    base, policy_version, evidence = ident.name, 0, None
    if cfg.run is not None:
        state, policy_version, info = live_state(store, cfg.run, version=cfg.version)
        if info.base is None:
            raise RldataError(f"run {cfg.run!r} has no ledger rows of its base model", field="run")
        base = info.base
        evidence = {}
        for t in state.known():
            a, b = state.posterior(t)
            evidence[t] = (a - 1.0, b - 1.0)  # the discounted counts, without the flat pseudo-counts
    key, counts = ledger_counts(
        store, base, params_hash=cfg.params_hash, verifier_key=cfg.verifier_key, version=version
    )
    if evidence is None:
        evidence = {
            t: (float(k), float(n - k)) for t, n, k in counts.select("task_id", "n", "n_correct").iter_rows()
        }
    model = base if cfg.run is None else f"{base}+{cfg.run}/v{policy_version}"
    cut = Cutoff(model, base, key["params_hash"], key["verifier_key"], version, policy_version, cfg.run)
    return cut, counts, evidence, ident


def predict_store(
    store: Store, cfg: PredictConfig, *, task_ids: Sequence[str] | None = None
) -> PredictResult:
    """Fit (or reuse a fit of the same cutoff) and predict the tasks ``cfg.where`` selects (or
    ``task_ids``); write them to ``predictions`` unless ``cfg.dry_run``."""
    version = store.version("passrates")
    cut, counts, evidence, ident = _resolve(store, cfg, version=version)
    fit_id = _fit_id(cut, cfg, ident.revision)
    targets = list(task_ids) if task_ids is not None else _target_ids(store, cfg.where)
    if not targets:
        raise RldataError(
            "no tasks to predict" + (f" matching {cfg.where!r}" if cfg.where else ": the store holds none"),
            field="where",
        )
    if not cfg.refit:
        stored = _stored(store, fit_id, cut.model, targets)
        if stored.height == len(set(targets)):
            params = json.loads(stored["params"][0] or "{}")
            return _result(fit_id, cut, stored, reused=True, fit=params)
    families = parse_families(cfg.features)
    fit_ids = counts["task_id"].to_list()
    rows = task_rows(store, sorted(set(fit_ids) | set(targets)))
    feats = build_features(rows, families, model_path=ident.load, batch_size=cfg.batch_size)
    model = fit_predictor(feats, counts, seed=cfg.seed, folds=cfg.folds)
    targets = [t for t in targets if t in set(feats.task_ids)]
    pa_, pb = model.prior(feats, targets)
    a, b, n_seen = seen_posterior(targets, pa_, pb, evidence)
    lo, hi = interval(a, b, cfg.level)
    fit = {
        **model.describe(),
        "features": list(families),
        "policy": ident.name,
        "policy_revision": ident.revision,
        "fit_tasks": len(model.oof),
        "run": cut.run,
    }
    frame = pl.DataFrame(
        {
            "task_id": targets,
            "model": [cut.model] * len(targets),
            "fit_id": [fit_id] * len(targets),
            "predictor": np.where(n_seen > 0, "live", "prior").tolist(),
            "p_mean": mean_of(a, b),
            "p_low": lo,
            "p_high": hi,
            "level": [float(cfg.level)] * len(targets),
            "alpha": a,
            "beta": b,
            "prior_alpha": pa_,
            "prior_beta": pb,
            "n_seen": n_seen,
            "params_hash": [cut.params_hash] * len(targets),
            "verifier_key": [cut.verifier_key] * len(targets),
            "store_version": [cut.store_version] * len(targets),
            "policy_version": [cut.policy_version] * len(targets),
            "params": [json.dumps(fit, sort_keys=True)] * len(targets),
        },
        schema_overrides={"store_version": pl.Int64, "policy_version": pl.Int64},
    )
    if not cfg.dry_run:
        store.upsert("predictions", frame)
    return _result(fit_id, cut, frame, reused=False, fit=fit)


def _stored(store: Store, fit_id: str, model: str, targets: Sequence[str]) -> pl.DataFrame:
    return store.sql(
        "SELECT p.* EXCLUDE (created_at) FROM predictions p JOIN _ids USING (task_id) "
        "WHERE p.fit_id = $fit AND p.model = $model ORDER BY p.task_id",
        params={"fit": fit_id, "model": model},
        extra={"_ids": pa.table({"task_id": pa.array(sorted(set(targets)), pa.string())})},
    ).pl()


def _result(fit_id: str, cut: Cutoff, frame: pl.DataFrame, *, reused: bool, fit: dict) -> PredictResult:
    seen = int((frame["predictor"] == "live").sum())
    return PredictResult(
        fit_id=fit_id,
        model=cut.model,
        tasks=frame.height,
        seen=seen,
        unseen=frame.height - seen,
        reused=reused,
        strength=fit.get("strength"),
        store_version=cut.store_version,
        policy_version=cut.policy_version,
        fit=fit,
        rows=frame.sort("task_id"),
    )
