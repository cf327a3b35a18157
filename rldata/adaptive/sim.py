"""Simulated adaptive sampling: the stopping rules of :mod:`rldata.adaptive` on Bernoulli tasks.

Used by the tests (error rates, agreement), ``benchmarks/bench_adaptive_sim.py`` and the bias
numbers of docs/adaptive.md.  Every task gets its N outcomes drawn up front (correct, wrong or a
verifier error), so the adaptive run and fixed-N decide on *the same samples*: the adaptive run
only sees a prefix.  Rounds call :func:`rldata.adaptive.decide_frame` once for all tasks, as the
sample job does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from rldata.adaptive.rules import AdaptiveSpec, decide_frame
from rldata.errors import RldataError
from rldata.stats import Band

__all__ = ["SimResult", "fit_pass_rate_grid", "simulate", "true_decision"]

CORRECT, WRONG, ERROR = 0, 1, 2


@dataclass(frozen=True)
class SimResult:
    """Per task (numpy arrays of one length): what the adaptive run drew and decided, and fixed-N."""

    drawn: np.ndarray  # samples drawn (errors included)
    n: np.ndarray  # verified samples among them
    n_correct: np.ndarray
    decision: np.ndarray  # 'keep' | 'drop'
    fixed_decision: np.ndarray  # fixed-N's decision on all N of the same samples
    fixed_pass_rate: np.ndarray  # k/n over all N (nan when n = 0)
    confidence: np.ndarray
    rounds: np.ndarray  # rounds in which the task drew (the job runs max(rounds) rounds)

    @property
    def agreement(self) -> float:
        return float(np.mean(self.decision == self.fixed_decision))

    @property
    def samples(self) -> int:
        return int(self.drawn.sum())


def simulate(
    p: np.ndarray,
    q: np.ndarray | float,
    spec: AdaptiveSpec,
    *,
    n_max: int,
    seed: int = 0,
    prior: tuple | None = None,
) -> SimResult:
    """Run ``spec`` on tasks with pass rates ``p`` and verifier error rates ``q`` (per draw)."""
    if spec.band is None:
        raise RldataError("simulate needs a spec with a band")
    p = np.asarray(p, dtype=float)
    q = np.broadcast_to(np.asarray(q, dtype=float), p.shape)
    rng = np.random.default_rng(seed)
    u, v = rng.random((len(p), n_max)), rng.random((len(p), n_max))
    outcome = np.where(v < q[:, None], ERROR, np.where(u < p[:, None], CORRECT, WRONG))
    full = _counts(outcome, np.full(len(p), n_max))
    fixed = decide_frame(full, AdaptiveSpec("fixed", band=spec.band, min_n=spec.min_n), n_max=n_max)
    drawn = np.zeros(len(p), dtype=np.int64)
    rounds = np.zeros(len(p), dtype=np.int64)
    kw = {} if prior is None else {"prior": prior}
    state = decide_frame(_counts(outcome, drawn), spec, n_max=n_max, **kw)
    while True:
        step = state["next_draws"].to_numpy()
        if not step.any():
            break
        drawn = drawn + step
        rounds += step > 0
        state = decide_frame(_counts(outcome, drawn), spec, n_max=n_max, **kw)
    n, k = full["n"].to_numpy(), full["n_correct"].to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    return SimResult(
        drawn=drawn,
        n=state["n"].to_numpy(),
        n_correct=state["n_correct"].to_numpy(),
        decision=state["decision"].to_numpy(),
        fixed_decision=fixed["decision"].to_numpy(),
        fixed_pass_rate=rate,
        confidence=state["confidence"].to_numpy(),
        rounds=rounds,
    )


def _counts(outcome: np.ndarray, drawn: np.ndarray) -> pl.DataFrame:
    seen = np.arange(outcome.shape[1])[None, :] < drawn[:, None]
    k = ((outcome == CORRECT) & seen).sum(1)
    w = ((outcome == WRONG) & seen).sum(1)
    e = ((outcome == ERROR) & seen).sum(1)
    return pl.DataFrame({"n": k + w, "n_correct": k, "n_error": e})


def true_decision(p: np.ndarray, band: Band) -> np.ndarray:
    """keep/drop from the true pass rate (the band's edge mode honoured, exact at the edges)."""
    p = np.asarray(p, dtype=float)
    inside = (p >= band.low) & (p <= band.high) if band.inclusive else (p > band.low) & (p < band.high)
    return np.where(inside, "keep", "drop")


def fit_pass_rate_grid(
    hist: list[int], *, grid: int = 201, iters: int = 5000
) -> tuple[np.ndarray, np.ndarray]:
    """A pass-rate distribution whose N-sample histogram matches ``hist`` (hist[k] = tasks at k/N).

    The nonparametric maximum-likelihood mixing distribution on a grid of p (EM over binomial
    likelihoods): returns (p values, weights).  Used to simulate a model whose per-task pass rates
    are not at hand but whose N=16 histogram is (docs/model.md)."""
    N = len(hist) - 1
    ps = np.linspace(0.0, 1.0, grid)
    ks = np.arange(N + 1)
    logc = np.array(
        [
            sum(np.log(np.arange(1, N + 1)))
            - sum(np.log(np.arange(1, k + 1)))
            - sum(np.log(np.arange(1, N - k + 1)))
            for k in ks
        ]
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        lik = np.exp(
            logc[:, None] + ks[:, None] * np.log(ps)[None, :] + (N - ks)[:, None] * np.log1p(-ps)[None, :]
        )
    lik = np.nan_to_num(lik)  # 0 * log 0 at the grid ends
    lik[0, 0], lik[N, -1] = 1.0, 1.0
    h = np.asarray(hist, dtype=float)
    w = np.full(grid, 1.0 / grid)
    for _ in range(iters):
        mix = lik @ w
        w = w * (lik.T @ (h / np.maximum(mix, 1e-300))) / h.sum()
    return ps, w / w.sum()
