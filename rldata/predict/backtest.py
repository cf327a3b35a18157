"""``rldata predict --backtest``: how well the predictor does on the store's own rows, against baselines.

Two splits, each scored with rldata.predict.calibration.metrics (Spearman rho, AUC in band vs out,
Brier, beta-binomial log-likelihood, interval coverage, bias, reliability):

- **tasks**: a share ``holdout`` of the ledger slice's tasks, by a hash of (seed, task id), is held
  out; the cross-task prior is fit on the others alone (a held-out task's counts never reach the fit,
  :func:`holdout_split` and tests/predict/test_backtest.py) and predicts the held-out ones as unseen.
  Baselines, fit on the same training tasks: the global mean, the per-source mean (and the
  per-category mean), and prompt length (a one-feature binomial logistic model).
- **versions** (when a training run of the model is in the store): the prediction at the run's policy
  version v (default 0: before any step; the run's live posterior on the cross-task prior) scored on
  each task's own groups at later versions, in four windows of versions; beside it the live
  posterior refreshed at each window's start, which is what refitting per version buys.

The metrics land in the store: a ``runs`` row (kind ``predict-backtest``, every number and the
reliability tables in its summary) and ``metrics`` rows (``backtest/SPLIT/PREDICTOR/METRIC``);
``rldata report`` draws the newest one (rldata.predict.page).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from rldata.engine.core import model_identity
from rldata.errors import RldataError
from rldata.ledger.history import history, live_state, run_info
from rldata.predict.calibration import beta_from_mean, eb_strength, metrics
from rldata.predict.config import PredictConfig
from rldata.predict.features import Features, build_features, parse_families
from rldata.predict.fit import fit_predictor, ledger_counts, task_rows
from rldata.results import Result
from rldata.runs.core import record_run
from rldata.stats import Band
from rldata.store import Store

__all__ = ["TABLE_COLUMNS", "BacktestResult", "backtest_store", "holdout_split"]

TABLE_COLUMNS = ("split", "predictor", "tasks", "spearman", "auc", "brier", "loglik", "coverage", "bias")
_RUN_MODEL = r"\+(.*)/v([0-9]+)$"  # a training run's ledger name BASE+RUN/vV (rldata.trainer.writeback)


@dataclass(frozen=True)
class BacktestResult(Result):
    run_id: str | None
    model: str
    store_version: int
    splits: dict  # split -> predictor -> metrics
    table: pl.DataFrame  # one row per (split, predictor): TABLE_COLUMNS


def holdout_split(task_ids: Sequence[str], *, seed: int, share: float) -> tuple[list[str], list[str]]:
    """(train, held): a task is held out when a hash of (seed, task id) falls below ``share``; it
    depends on nothing else, so adding tasks never moves another task across the split."""
    train, held = [], []
    for t in task_ids:
        u = int.from_bytes(hashlib.sha256(f"holdout:{seed}:{t}".encode()).digest()[:8], "little") / 2**64
        (held if u < share else train).append(t)
    return train, held


def _smoothed(k: float, n: float) -> float:
    return (k + 0.5) / (n + 1.0)


def _baselines(train: pl.DataFrame, held: pl.DataFrame) -> dict[str, np.ndarray]:
    """Predicted means of the held-out tasks by each baseline, fit on ``train`` (task_id, n, n_correct,
    source, category, prompt)."""
    g = _smoothed(train["n_correct"].sum(), train["n"].sum())
    out = {"global mean": np.full(held.height, g)}
    for col, name in (("source", "per-source mean"), ("category", "per-category mean")):
        means = {
            key: _smoothed(k, n)
            for key, k, n in train.group_by(col).agg(pl.col("n_correct").sum(), pl.col("n").sum()).iter_rows()
        }
        out[name] = np.array([means.get(v, g) for v in held[col].to_list()])
    x_tr = np.log1p(train["prompt"].str.len_chars().to_numpy().astype(np.float64))
    x_he = np.log1p(held["prompt"].str.len_chars().to_numpy().astype(np.float64))
    out["prompt length"] = _logistic_1d(x_tr, train["n_correct"].to_numpy(), train["n"].to_numpy(), x_he)
    return out


def _logistic_1d(x: np.ndarray, k: np.ndarray, n: np.ndarray, x_new: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    xs = np.r_[x, x].reshape(-1, 1)
    y = np.r_[np.ones(len(x)), np.zeros(len(x))]
    w = np.r_[k, n - k].astype(np.float64)
    keep = w > 0
    if len(set(y[keep])) < 2:
        return np.full(len(x_new), _smoothed(k.sum(), n.sum()))
    clf = LogisticRegression(C=1e4, max_iter=2000).fit(xs[keep], y[keep], sample_weight=w[keep])
    return clf.predict_proba(x_new.reshape(-1, 1))[:, 1]


def _score(p, k, n, *, strength: float, band: Band, level: float) -> dict:
    a, b = beta_from_mean(p, strength)
    return metrics(p, k, n, band=(band.low, band.high), a=a, b=b, level=level) | {"strength": strength}


class _FeatureCache:
    """Features built once per task across the splits (the policy's forward passes are the costly part)."""

    def __init__(self, store: Store, cfg: PredictConfig, model_path: str):
        self.store, self.cfg, self.model_path = store, cfg, model_path
        self.feats: Features | None = None

    def get(self, ids: Sequence[str]) -> Features:
        have = set(self.feats.task_ids) if self.feats is not None else set()
        missing = [t for t in dict.fromkeys(ids) if t not in have]
        rows = task_rows(self.store, missing) if missing else []
        if rows:
            new = build_features(
                rows,
                parse_families(self.cfg.features),
                model_path=self.model_path,
                batch_size=self.cfg.batch_size,
            )
            self.feats = new if self.feats is None else _stack(self.feats, new)
        if self.feats is None:
            raise RldataError("no tasks to build features for")
        return self.feats


def _stack(a: Features, b: Features) -> Features:
    import scipy.sparse as sp

    return Features(
        a.task_ids + b.task_ids,
        None if a.sparse is None else sp.vstack([a.sparse, b.sparse], format="csr"),
        None if a.dense is None else np.vstack([a.dense, b.dense]),
        a.families,
        a.widths,
    )


def _task_split(store: Store, cfg: PredictConfig, counts: pl.DataFrame, cache: _FeatureCache) -> dict:
    band = Band.parse(cfg.band)
    rows = task_rows(store, counts["task_id"].to_list())
    info = pl.DataFrame(
        rows,
        schema={
            "task_id": pl.String,
            "prompt": pl.String,
            "source": pl.String,
            "category": pl.String,
            "metadata": pl.String,
        },
        orient="row",
    )
    data = counts.join(info, on="task_id", how="inner").sort("task_id")
    train_ids, held_ids = holdout_split(data["task_id"].to_list(), seed=cfg.seed, share=cfg.holdout)
    if set(train_ids) & set(held_ids):  # the split is a partition by construction; never let it leak
        raise RldataError("backtest split leaks: a task is in both the fit and the held-out set")
    if len(held_ids) < 2 or len(train_ids) < 2:
        raise RldataError(
            f"too few tasks to backtest: {len(train_ids)} to fit on, {len(held_ids)} held out "
            "(sample more tasks, or raise holdout)"
        )
    train = data.filter(pl.col("task_id").is_in(train_ids))
    held = data.filter(pl.col("task_id").is_in(held_ids))
    feats = cache.get(data["task_id"].to_list())
    model = fit_predictor(feats, train.select("task_id", "n", "n_correct"), seed=cfg.seed, folds=cfg.folds)
    k, n = held["n_correct"].to_numpy(), held["n"].to_numpy()
    out = {
        "model": _score(
            model.mean(feats, held_ids), k, n, strength=model.strength, band=band, level=cfg.level
        )
        | {"fit": model.describe(), "fit_tasks": train.height}
    }
    in_sample = _baselines(train, train)
    for name, p in _baselines(train, held).items():
        # each baseline's strength by the same empirical Bayes, on its own training-task means
        s = eb_strength(in_sample[name], train["n_correct"].to_numpy(), train["n"].to_numpy())
        out[name] = _score(p, k, n, strength=s, band=band, level=cfg.level)
    return out


def _runs_of(store: Store, base: str, version: int) -> list[str]:
    rows = store.sql(
        "SELECT regexp_extract(model, $pat, 1) AS run, max(updated_at) AS t FROM passrates "
        "WHERE starts_with(model, $base) AND regexp_matches(model, $pat) GROUP BY 1 ORDER BY t DESC, run",
        params={"pat": _RUN_MODEL, "base": base + "+"},
        as_of={"passrates": version},
    ).fetchall()
    return [r for r, _ in rows if r]


def _version_split(
    store: Store, cfg: PredictConfig, counts: pl.DataFrame, base: str, version: int, cache: _FeatureCache
):
    """The fit at the run's policy version v scored on later versions, and the refreshed live posterior."""
    runs = [cfg.run] if cfg.run else _runs_of(store, base, version)
    if not runs:
        return {}, None
    run = runs[0]
    hist = history(store, run)
    if hist.height == 0:
        return {}, run
    last = int(hist["policy_version"].max())
    v0 = cfg.version if cfg.version is not None else 0
    if v0 >= last:
        return {}, run
    band = Band.parse(cfg.band)
    ids = sorted(set(hist["task_id"].to_list()))
    feats = cache.get(sorted(set(ids) | set(counts["task_id"].to_list())))
    model = fit_predictor(feats, counts, seed=cfg.seed, folds=cfg.folds)
    known = set(feats.task_ids)
    ids = [t for t in ids if t in known]
    pa_, pb = model.prior(feats, ids)

    def at(v: int) -> tuple[np.ndarray, np.ndarray]:
        state, _, _ = live_state(store, run, version=v)
        s = np.array([state.posterior(t)[0] - 1.0 for t in ids])
        f = np.array([state.posterior(t)[1] - 1.0 for t in ids])
        return pa_ + s, pb + f

    stale = at(v0)
    width = max(1, math.ceil((last - v0) / 4))
    out = {}
    for lo in range(v0 + 1, last + 1, width):
        hi = min(last, lo + width - 1)
        obs = (
            hist.filter(pl.col("policy_version").is_between(lo, hi))
            .group_by("task_id")
            .agg(pl.col("n_correct").sum().alias("k"), pl.col("n").sum().alias("n"))
        )
        got = dict(zip(obs["task_id"].to_list(), zip(obs["k"].to_list(), obs["n"].to_list())))
        k = np.array([got.get(t, (0, 0))[0] for t in ids], dtype=np.float64)
        n = np.array([got.get(t, (0, 0))[1] for t in ids], dtype=np.float64)
        if n.sum() == 0:
            continue
        split = f"versions {lo}-{hi} (k={lo - v0}-{hi - v0})"
        fresh = at(lo - 1)
        out[split] = {
            f"fit@v{v0}": _score_ab(*stale, k, n, band=band, level=cfg.level),
            f"live@v{lo - 1}": _score_ab(*fresh, k, n, band=band, level=cfg.level),
        }
    return out, run


def _score_ab(a, b, k, n, *, band: Band, level: float) -> dict:
    return metrics(a / (a + b), k, n, band=(band.low, band.high), a=a, b=b, level=level)


def _table(splits: dict) -> pl.DataFrame:
    rows = [
        {"split": s, "predictor": p, **{c: m.get(c) for c in TABLE_COLUMNS[2:]}}
        for s, preds in splits.items()
        for p, m in preds.items()
    ]
    schema = {"split": pl.String, "predictor": pl.String, "tasks": pl.Int64} | {
        c: pl.Float64 for c in TABLE_COLUMNS[3:]
    }
    return pl.DataFrame(rows, schema=schema)


def backtest_store(store: Store, cfg: PredictConfig) -> BacktestResult:
    """Run both splits at the store's current passrates version; record and return the metrics."""
    ident = model_identity(cfg.model)
    version = store.version("passrates")
    base = ident.name
    if cfg.run is not None:
        base = run_info(store, cfg.run).base or base
    key, counts = ledger_counts(
        store, base, params_hash=cfg.params_hash, verifier_key=cfg.verifier_key, version=version
    )
    cache = _FeatureCache(store, cfg, ident.load)
    splits = {"tasks": _task_split(store, cfg, counts, cache)}
    by_version, run = _version_split(store, cfg, counts, base, version, cache)
    splits |= by_version
    table = _table(splits)
    summary = {
        "model": base,
        "slice": key,
        "store_version": version,
        "run": run,
        "splits": splits,
    }
    run_id = None
    if not cfg.dry_run:
        args = {
            "model": cfg.model,
            "features": cfg.features,
            "seed": cfg.seed,
            "holdout": cfg.holdout,
            "band": cfg.band,
            "run": cfg.run,
            "version": cfg.version,
        }
        with record_run(store, "predict-backtest", args) as rec:
            run_id = rec.run_id
            store.upsert("metrics", _metric_rows(run_id, splits))
            rec.summary = _json_safe(summary)
    return BacktestResult(run_id, base, version, _json_safe(splits), table)


def _metric_rows(run_id: str, splits: dict) -> list[dict]:
    rows = []
    for s, preds in splits.items():
        slug = re.sub(r"[^a-z0-9=.-]+", "_", s.lower())
        for p, m in preds.items():
            for c in TABLE_COLUMNS[2:]:
                v = m.get(c)
                if isinstance(v, (int, float)) and v is not None and math.isfinite(v):
                    rows.append(
                        {"run_id": run_id, "step": 0, "name": f"backtest/{slug}/{p}/{c}", "value": float(v)}
                    )
    return rows


def _json_safe(v):
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, (np.floating, float)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v
