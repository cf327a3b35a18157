"""The two layers of a prediction: a cross-task prior for every task, the live posterior for seen ones.

**Cross-task prior** (:class:`CrossTaskModel`).  A logistic model of the pass rate, fit with a binomial
likelihood: task i with k_i of n_i correct enters as a positive row of weight k_i and a negative row
of weight n_i - k_i (scikit-learn's ``LogisticRegression`` with ``sample_weight``), so a task
counts by its samples and an early-stopped task by what it drew (optional stopping leaves the
likelihood unchanged).  The fit, in order:

1. folds by a hash of (seed, task id), so a task's fold does not depend on what else is in the store;
2. the L2 strength C picked from a small grid by the held-out (out-of-fold) binomial deviance;
3. a two-parameter recalibration of the out-of-fold logits, ``sigmoid(a z + b)`` (Platt's, fit
   with the same binomial likelihood): a model that is over-confident on new tasks is flattened;
4. the prior's strength s by empirical Bayes on the recalibrated out-of-fold means
   (:func:`rldata.predict.calibration.eb_strength`);
5. the model refit on every training task with that C.

A task's prior is ``Beta(s m, s (1 - m))`` with m the recalibrated mean: for a task it was fit on,
its out-of-fold mean (never one that saw its own counts).

**Seen tasks** (:func:`seen_posterior`): the prior updated with the task's own evidence, as the live
samplers' posterior does (rldata.curriculum.live): discounted counts per policy version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from scipy import optimize, special
from threadpoolctl import threadpool_limits

from rldata.errors import RldataError
from rldata.predict.calibration import beta_from_mean, eb_strength
from rldata.predict.features import Features

__all__ = ["C_GRID", "CrossTaskModel", "fold_of", "seen_posterior"]

C_GRID = (0.02, 0.1, 0.5, 2.5)
_CLIP = 1e-6


def fold_of(task_ids: Sequence[str], *, seed: int, folds: int) -> np.ndarray:
    """Each task's fold in 0..folds-1, from a hash of (seed, task id) alone."""
    return np.array(
        [
            int.from_bytes(hashlib.sha256(f"{seed}:{t}".encode()).digest()[:8], "little") % folds
            for t in task_ids
        ],
        dtype=np.int64,
    )


def _check_counts(task_ids: Sequence[str], k: np.ndarray, n: np.ndarray) -> None:
    if len(task_ids) == 0 or n.sum() <= 0:
        raise RldataError(
            "no rows to fit on: the store holds no verified samples for this model and slice "
            "(run rldata sample first)"
        )
    if k.sum() == 0 or k.sum() == n.sum():
        side = "failed" if k.sum() == 0 else "passed"
        raise RldataError(
            f"one class only: every one of the {int(n.sum())} samples of {len(task_ids)} tasks {side}, "
            "so nothing tells easy from hard tasks (sample more tasks or another model)"
        )


class CrossTaskModel:
    """The fitted cross-task prior (module docstring).  ``fit`` then ``mean``/``prior``."""

    def __init__(self, *, seed: int = 0, folds: int = 5, grid: Sequence[float] = C_GRID):
        self.seed, self.folds, self.grid = int(seed), int(folds), tuple(grid)
        self.C: float | None = None
        self.recal = (1.0, 0.0)
        self.strength: float | None = None
        self.oof: dict[str, float] = {}  # task -> recalibrated out-of-fold mean
        self.oof_deviance: float | None = None
        self._clf = None
        self._scale = None

    # -- the design matrix: the sparse columns the training rows use (hashed families are 2^16 wide
    # and mostly empty: an unused column only slows the solver), the dense block standardised on the
    # training rows and each of its groups scaled by 1/sqrt(its width), so a 128-wide prefill state
    # weighs about as much as one l2-normalised sparse family or one length column --
    def _matrix(self, feats: Features, idx: np.ndarray, *, fit_scale: bool = False, prep=None):
        xs, xd = feats.take(idx)
        if fit_scale:
            cols = None if xs is None else np.unique(xs.indices)
            scale = None
            if xd is not None:
                sd = xd.std(0)
                widths = (
                    np.repeat(feats.widths, feats.widths)
                    if feats.widths
                    else np.full(xd.shape[1], xd.shape[1])
                )
                scale = (xd.mean(0), np.where(sd > 1e-12, sd, 1.0) * np.sqrt(widths))
            prep = (cols, scale)
        cols, scale = prep
        blocks = [] if xs is None else [xs[:, cols]]
        if xd is not None:
            blocks.append(sp.csr_matrix((xd - scale[0]) / scale[1]))
        return sp.hstack(blocks, format="csr"), prep

    @staticmethod
    def _fit_logistic(X, k: np.ndarray, n: np.ndarray, C: float, seed: int):
        from sklearn.linear_model import LogisticRegression

        m = X.shape[0]
        Xr = sp.vstack([X, X], format="csr")
        y = np.r_[np.ones(m), np.zeros(m)]
        w = np.r_[k, n - k].astype(np.float64)
        keep = w > 0
        clf = LogisticRegression(C=C, max_iter=2000, tol=1e-5, random_state=seed)
        with threadpool_limits(1):  # BLAS threads only contend on these small problems
            clf.fit(Xr[keep], y[keep], sample_weight=w[keep])
        return clf

    def fit(self, feats: Features, task_ids: Sequence[str], k, n) -> CrossTaskModel:
        k, n = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
        _check_counts(task_ids, k, n)
        idx = feats.rows(task_ids)
        folds = max(2, min(self.folds, len(task_ids)))
        fold = fold_of(task_ids, seed=self.seed, folds=folds)
        best = None
        for C in self.grid:
            z = np.zeros(len(task_ids))
            for f in range(folds):
                tr, te = fold != f, fold == f
                if not te.any():
                    continue
                if k[tr].sum() in (0.0, n[tr].sum()):  # a fold with one class: its prior is the mean
                    z[te] = special.logit(np.clip((k[tr].sum() + 0.5) / (n[tr].sum() + 1), _CLIP, 1 - _CLIP))
                    continue
                X, scale = self._matrix(feats, idx[tr], fit_scale=True)
                clf = self._fit_logistic(X, k[tr], n[tr], C, self.seed)
                z[te] = clf.decision_function(self._matrix(feats, idx[te], prep=scale)[0])
            dev = _deviance(special.expit(z), k, n)
            if best is None or dev < best[0] - 1e-9:
                best = (dev, C, z)
        dev, self.C, z = best
        self.recal = _platt(z, k, n)
        oof = special.expit(self.recal[0] * z + self.recal[1])
        self.oof_deviance = _deviance(oof, k, n)
        self.oof = dict(zip(task_ids, oof.tolist()))
        self.strength = eb_strength(oof, k, n)
        X, self._scale = self._matrix(feats, idx, fit_scale=True)
        self._clf = self._fit_logistic(X, k, n, self.C, self.seed)
        return self

    def mean(self, feats: Features, task_ids: Sequence[str]) -> np.ndarray:
        """Recalibrated predicted mean of each task (the out-of-fold one for a task it was fit on)."""
        if self._clf is None:
            raise RldataError("the cross-task model is not fit yet")
        if not task_ids:
            return np.zeros(0)
        z = self._clf.decision_function(self._matrix(feats, feats.rows(task_ids), prep=self._scale)[0])
        p = special.expit(self.recal[0] * z + self.recal[1])
        return np.array([self.oof.get(t, float(x)) for t, x in zip(task_ids, p)])

    def prior(self, feats: Features, task_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return beta_from_mean(self.mean(feats, task_ids), self.strength)

    def describe(self) -> dict:
        return {
            "C": self.C,
            "recalibration": [round(self.recal[0], 6), round(self.recal[1], 6)],
            "strength": self.strength,
            "oof_deviance": self.oof_deviance,
            "folds": self.folds,
            "seed": self.seed,
        }


def _deviance(p: np.ndarray, k: np.ndarray, n: np.ndarray) -> float:
    """Mean binomial negative log-likelihood per sample."""
    p = np.clip(p, _CLIP, 1 - _CLIP)
    return float(-(k * np.log(p) + (n - k) * np.log1p(-p)).sum() / n.sum())


def _platt(z: np.ndarray, k: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """(a, b) maximising the binomial likelihood of ``sigmoid(a z + b)``; (1, 0) when that fails."""

    def nll(ab):
        p = np.clip(special.expit(ab[0] * z + ab[1]), _CLIP, 1 - _CLIP)
        return -float((k * np.log(p) + (n - k) * np.log1p(-p)).sum())

    res = optimize.minimize(
        nll,
        x0=np.array([1.0, 0.0]),
        method="Nelder-Mead",
        options={"xatol": 1e-6, "fatol": 1e-8, "maxiter": 2000},
    )
    if not res.success or not np.all(np.isfinite(res.x)) or res.x[0] <= 0:
        return (1.0, 0.0)
    return (float(res.x[0]), float(res.x[1]))


def seen_posterior(
    task_ids: Sequence[str], a: np.ndarray, b: np.ndarray, evidence: Mapping[str, tuple[float, float]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Beta(a + s, b + f)`` per task with (s, f) its own (discounted) passes and fails; tasks with
    none keep their prior.  Returns (a, b, effective samples s + f)."""
    s = np.array([evidence.get(t, (0.0, 0.0))[0] for t in task_ids], dtype=np.float64)
    f = np.array([evidence.get(t, (0.0, 0.0))[1] for t in task_ids], dtype=np.float64)
    return np.asarray(a) + s, np.asarray(b) + f, s + f
