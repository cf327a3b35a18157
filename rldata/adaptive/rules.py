"""Adaptive N: stop sampling a task once its band decision is settled (``rldata sample --adaptive``).

``rldata sample --n N`` draws N samples per task and ``rldata filter --band lo,hi`` then keeps or
drops each task from its counts (:func:`rldata.ledger.select.decide`).  Most of those draws decide
nothing: 2 right and 2 wrong already put a task inside [0.1, 0.9] whatever the next 12 are, as long
as the verifier does not error on them.  With an adaptive rule the job samples in rounds of at
most ``round_size`` and, after each round, asks :func:`decide_frame` which tasks are settled and
how many draws each other task needs next (a round stops short where the task could settle
sooner: :func:`settle_distance`).

The target is always **the decision fixed-N sampling would make**: ``select.decide`` on the counts
of all N draws, with ``min_n`` (default N).  A draw has three outcomes: correct, wrong, or a
verifier error, and errors matter to that decision (they leave ``n`` and can make a task
``insufficient_samples``), so no rule here treats an error as "probably wrong" or ignores it.

- ``fixed``: never stop before N.
- ``exact``: settled when EVERY continuation of the remaining ``N - drawn`` draws, each one
  correct, wrong or an error, gives the same keep/drop from ``select.decide``.  Stopping therefore
  never changes the fixed-N decision on the same samples (100 % agreement, tested against brute
  force over every outcome sequence).  The price of covering errors: a task is kept early only
  once at least ``ceil(min_n / 2)`` draws were verified (fewer, and all-errors-from-now-on would
  make it insufficient).
- ``sequential``: settled when the *predictive* probability that the fixed-N decision equals the
  current leading decision is at least ``1 - alpha``.  Each task's pass rate p and error rate q get
  independent Jeffreys Beta(1/2, 1/2) priors; given the counts, the remaining draws are then a
  Polya urn, and the probability of each fixed-N reason is computed exactly by a backward pass
  over every count state (no sampling, no approximation).

  Why this test and not a posterior on "p in [lo, hi]" or an SPRT: the quantity the issue measures
  and the job needs is agreement with fixed-N, and at N = 16 a posterior P(p in band) > 1 - alpha is
  unreachable for a 0/16 task (Beta(1/2, 16.5) still gives p > 0.1 probability 0.09), so such a
  rule would never stop the third of the tasks that are never solved.  The predictive test asks
  the question that decides the draws that are left.  Jeffreys, not uniform: it is the reference
  prior, and like measured pass-rate histograms (docs/model.md: a third at 0/16, 7 % at 16/16) it
  is U-shaped, so it stops unsolvable tasks earlier without being fit to one model.

  **What alpha guarantees.** For tasks whose (p, q) follow the prior, the probability that a task's
  reported decision differs from the decision fixed-N would have made *on the same samples* is at
  most alpha: every early stop has conditional disagreement <= alpha given its counts, and a task
  that reaches N is decided by fixed-N itself; optional stopping does not break this, because the
  bound holds at every state the job may stop at.  It is not a bound for every single p: a task
  sitting on a band edge (p = 0.1) is a coin flip for fixed-N itself.  tests/test_adaptive.py checks
  the bound by simulation (prior-distributed tasks, a uniform grid incl. the edges, and the bundled
  model's histogram), and ``benchmarks/bench_adaptive_sim.py`` reports agreement and samples.

The rules depend only on the counts (k correct, w wrong, e errors), so each (N, band, min_n, rule)
is a table over the ``C(N+3, 3)`` count states, built once (cached) by one backward pass; the final
states' reasons come from ``select.decide`` itself, so the rules cannot drift from the filter.
Sequential rows are re-decided from their recorded counts and alpha (see ``rldata filter``); the
prior is part of the rule: changing :data:`PRIOR` must come with a new rule name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import polars as pl

from rldata.errors import ConfigError, RldataError
from rldata.stats import Band, band_text, parse_band_text
from rldata.stats import decide as fixed_decide

__all__ = [
    "DECIDED",
    "MAX_N",
    "PRIOR",
    "RULES",
    "AdaptiveSpec",
    "Decision",
    "band_text",
    "decide",
    "decide_frame",
    "ledger_columns",
    "parse_band_text",
    "rule_table",
    "settle_distance",
]

RULES = ("fixed", "exact", "sequential")
PRIOR = ((0.5, 0.5), (0.5, 0.5))  # Jeffreys Beta(a, b) for (pass rate, verifier error rate)
MAX_N = 128  # a table holds (N+2)^3 states x 4 floats (70 MB at 128); far above any N a job draws
# the fixed-N reasons a final state can get, in the tables' column order (not_sampled needs N = 0)
_REASONS = ("in_band", "too_hard", "too_easy", "insufficient_samples")
DECIDED = ("keep", "drop")
_EPS = 1e-12  # float slack in the 1 - alpha comparison: exact probabilities summed in floats


@dataclass(frozen=True)
class AdaptiveSpec:
    """How ``rldata sample --adaptive`` stops.

    rule: ``fixed`` | ``exact`` | ``sequential`` (module docstring).
    alpha: sequential only, in (0, 0.5): the allowed disagreement with fixed-N (default 0.05).
    round_size: the most draws per task per round (>= 1); N need not be a multiple.
    trim: draw no further in a round than the first point where the task *could* be settled
        (:func:`settle_distance`).  No state in between can stop, so this never costs a stop; it
        makes every round size stop as early as drawing one at a time would, at the price of more
        (smaller) rounds for some tasks.  False: always ``round_size`` (the last round short).
    band: the band the decision is about, as ``rldata filter --band``; required unless fixed.
    min_n: the filter's min_n the rule targets; None = N (what ``rldata filter`` defaults to).
    priors: sequential only: task -> Beta (a, b), each task's predicted prior instead of
        :data:`PRIOR` (rldata.adaptive.prior; its rows are stop_rule ``predicted`` in the ledger).
    """

    rule: str = "fixed"
    alpha: float | None = None
    round_size: int = 4
    band: Band | None = None
    min_n: int | None = None
    trim: bool = True
    priors: Mapping[str, tuple[float, float]] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.rule not in RULES:
            raise ConfigError(f"rule must be one of {', '.join(RULES)}, got {self.rule!r}", field="rule")
        if self.rule == "sequential":
            if self.alpha is None:
                object.__setattr__(self, "alpha", 0.05)
            if (
                isinstance(self.alpha, bool)
                or not isinstance(self.alpha, (int, float))
                or not 0 < self.alpha < 0.5
            ):
                raise ConfigError(f"alpha must lie in (0, 0.5), got {self.alpha!r}", field="alpha")
            object.__setattr__(self, "alpha", float(self.alpha))
        elif self.alpha is not None:
            raise ConfigError(f"alpha applies to rule sequential only, not {self.rule}", field="alpha")
        if isinstance(self.round_size, bool) or not isinstance(self.round_size, int) or self.round_size < 1:
            raise ConfigError(
                f"round_size must be an integer >= 1, got {self.round_size!r}", field="round_size"
            )
        if self.band is not None and not isinstance(self.band, Band):
            raise ConfigError(
                f"band must be a Band (parse it with AdaptiveSpec.parse), got {self.band!r}", field="band"
            )
        if self.band is None and self.rule != "fixed":
            raise ConfigError(f"rule {self.rule} needs a band: the band the decision is about", field="band")
        if self.min_n is not None and (
            isinstance(self.min_n, bool) or not isinstance(self.min_n, int) or self.min_n < 1
        ):
            raise ConfigError(f"min_n must be an integer >= 1, got {self.min_n!r}", field="min_n")
        if not isinstance(self.trim, bool):
            raise ConfigError(f"trim must be True or False, got {self.trim!r}", field="trim")

    @classmethod
    def parse(
        cls,
        rule: str = "fixed",
        *,
        band: str | None = None,
        alpha: float | None = None,
        round_size: int = 4,
        inclusive: bool = True,
        min_n: int | None = None,
        trim: bool = True,
    ) -> AdaptiveSpec:
        """From the CLI's strings; ``band`` uses ``rldata filter``'s ``--band`` parser."""
        b = Band.parse(band, inclusive=inclusive) if band is not None else None
        return cls(rule, alpha, round_size, b, min_n, trim)


@dataclass(frozen=True)
class Decision:
    """Where one task stands.

    settled: no more draws are needed (always True once N were drawn).
    decision: ``keep`` | ``drop`` when settled, else None.
    reason: the fixed-N reason reported (``in_band``, ``too_hard``, ``too_easy``,
        ``insufficient_samples``; the most probable one of its decision), None when not settled.
    confidence: predictive probability (Jeffreys priors) that fixed-N decides as the leading
        decision; exactly 1.0 when no continuation can change it.
    """

    settled: bool
    decision: str | None
    reason: str | None
    confidence: float

    @classmethod
    def from_row(cls, row: dict) -> Decision:
        """One row of :func:`decide_frame`'s output (``iter_rows(named=True)``) as a Decision."""
        return cls(bool(row["settled"]), row["decision"], row["reason"], float(row["confidence"]))


@dataclass(frozen=True)
class _Table:
    prob: np.ndarray  # [k, w, e, reason]: predictive probability of each fixed-N reason
    mask: np.ndarray  # [k, w, e]: bit r set when some continuation ends with reason r


def _check_n_max(n_max: int) -> None:
    if isinstance(n_max, bool) or not isinstance(n_max, (int, np.integer)) or not 1 <= n_max <= MAX_N:
        raise RldataError(f"N (n_max) must be an integer in 1..{MAX_N}, got {n_max!r}")


def _next_correct(prior, k: np.ndarray, w: np.ndarray) -> np.ndarray:
    """P(next verified draw correct | k correct, w wrong) under a Beta (a, b) or a grid prior."""
    if prior[0] == "beta":
        a, b = prior[1:]
        return (a + k) / (a + b + k + w)
    ps, ws = np.asarray(prior[1]), np.asarray(prior[2])
    with np.errstate(divide="ignore", invalid="ignore"):
        lp, lq = np.log(ps)[None, :], np.log1p(-ps)[None, :]
        kk, ww = k[:, None], w[:, None]
        # 0 * log 0 = 0 at the grid ends (p = 0 with no correct draw is possible, not impossible)
        lw = np.log(ws)[None, :] + np.where(kk == 0, 0.0, kk * lp) + np.where(ww == 0, 0.0, ww * lq)
    lw -= lw.max(axis=1, keepdims=True)
    post = np.exp(lw)
    return (post * ps[None, :]).sum(1) / post.sum(1)


@lru_cache(maxsize=8)  # one per (N, band, min_n) a job or filter uses
def rule_table(n_max: int, band: Band, min_n: int, prior: tuple = PRIOR) -> _Table:
    """Predictive reason probabilities and reachable-reason masks for every count state.

    The final layer (k + w + e = N) is decided by ``select.decide`` itself; each earlier state is
    the Polya-urn mixture of its three children: next draw an error with probability
    (a_q + e) / (a_q + b_q + drawn), else correct with probability (a + k) / (a + b + k + w).
    ``prior`` ((a, b) or ("grid", ps, weights) for p; (a_q, b_q) for q) is for simulations and
    benchmarks only: ledger rows are re-decided with :data:`PRIOR`, so a job must not change it.
    """
    _check_n_max(n_max)
    N = int(n_max)
    p_prior, (aq, bq) = prior
    if p_prior[0] != "grid":
        p_prior = ("beta", *p_prior)
    size = N + 2  # one spare slot on every axis: children of the last layer are never read
    prob = np.zeros((size, size, size, len(_REASONS)))
    mask = np.zeros((size, size, size), dtype=np.uint8)
    k, w = (g.ravel() for g in np.meshgrid(np.arange(N + 1), np.arange(N + 1), indexing="ij"))
    keep = k + w <= N
    k, w = k[keep], w[keep]
    e = N - k - w
    final = fixed_decide(pl.DataFrame({"n": k + w, "n_correct": k, "n_error": e}), band, min_n=min_n)[
        "reason"
    ].to_list()
    idx = np.array([_REASONS.index(r) for r in final])
    prob[k, w, e, idx] = 1.0
    mask[k, w, e] = (1 << idx).astype(np.uint8)
    for d in range(N - 1, -1, -1):
        k, w = (g.ravel() for g in np.meshgrid(np.arange(d + 1), np.arange(d + 1), indexing="ij"))
        keep = k + w <= d
        k, w = k[keep], w[keep]
        e = d - k - w
        pe = ((aq + e) / (aq + bq + d))[:, None]
        pc = _next_correct(p_prior, k, w)[:, None]
        prob[k, w, e] = pe * prob[k, w, e + 1] + (1 - pe) * (
            pc * prob[k + 1, w, e] + (1 - pc) * prob[k, w + 1, e]
        )
        mask[k, w, e] = mask[k, w, e + 1] | mask[k + 1, w, e] | mask[k, w + 1, e]
    prob.setflags(write=False)
    mask.setflags(write=False)
    return _Table(prob, mask)


def _classify(t: _Table, k, w, e, rule: str, alpha: float | None):
    """Vectorised core of :func:`decide` for states with drawn < N: (settled, keep, reason index,
    confidence) arrays.  A sequential stop short of certainty needs one verified draw at least: the
    prior alone may clear 1 - alpha for a large alpha, and a decision on no evidence is no test."""
    p = t.prob[k, w, e]
    m = t.mask[k, w, e].astype(np.int64)
    reach = (m[:, None] >> np.arange(len(_REASONS))) & 1 == 1
    p0 = p[:, 0]
    keep = reach[:, 0] & (p0 >= 0.5)
    drop_reason = 1 + np.argmax(np.where(reach[:, 1:], p[:, 1:], -1.0), axis=1)  # likeliest reachable
    reason = np.where(keep, 0, drop_reason)
    certain = (m == 1) | (m & 1 == 0)  # only in_band reachable, or in_band unreachable
    conf = np.where(certain, 1.0, np.where(keep, p0, 1.0 - p0))
    if rule == "fixed":
        settled = np.zeros(len(m), dtype=bool)
    elif rule == "exact":
        settled = certain
    else:
        settled = certain | ((conf >= 1.0 - alpha - _EPS) & (k + w > 0))
    return settled, keep, reason, conf


@lru_cache(maxsize=8)
def settle_distance(
    n_max: int, band: Band, min_n: int, rule: str, alpha: float | None, prior: tuple = PRIOR
) -> np.ndarray:
    """[k, w, e]: the fewest further draws after which the task could be settled on SOME outcome
    sequence (0 = settled now).  Backward over the layers: 0 where settled, else 1 + the smallest
    child distance; at N every state is settled."""
    N = int(n_max)
    t = rule_table(N, band, min_n, prior)
    big = N + 1
    dist = np.full(t.mask.shape, big, dtype=np.int64)
    for d in range(N, -1, -1):
        k, w = (g.ravel() for g in np.meshgrid(np.arange(d + 1), np.arange(d + 1), indexing="ij"))
        keep = k + w <= d
        k, w = k[keep], w[keep]
        e = d - k - w
        if d == N:
            dist[k, w, e] = 0
            continue
        settled = _classify(t, k, w, e, rule, alpha)[0]
        child = np.minimum(np.minimum(dist[k + 1, w, e], dist[k, w + 1, e]), dist[k, w, e + 1])
        dist[k, w, e] = np.where(settled, 0, 1 + child)
    dist.setflags(write=False)
    return dist


def _check_counts(n_drawn, n_correct, n_error) -> None:
    if min(n_drawn, n_correct, n_error) < 0 or n_correct + n_error > n_drawn:
        raise RldataError(
            f"counts must satisfy 0 <= n_correct + n_error <= n_drawn, got n_drawn={n_drawn}, "
            f"n_correct={n_correct}, n_error={n_error}"
        )


def decide(
    rule: str,
    *,
    n_drawn: int,
    n_correct: int,
    n_error: int,
    n_max: int,
    band: Band | None,
    alpha: float | None = None,
    min_n: int | None = None,
) -> Decision:
    """The stopping decision for one task's counts (``n_drawn`` includes the error draws).

    ``band`` None is allowed for ``fixed`` only: then nothing is decided, only whether N is reached."""
    spec = AdaptiveSpec(rule, alpha, 1, band, min_n)  # validates rule, alpha, band, min_n
    _check_n_max(n_max)
    _check_counts(n_drawn, n_correct, n_error)
    if band is None:
        return Decision(n_drawn >= n_max, None, None, 1.0 if n_drawn >= n_max else 0.0)
    mn = n_max if min_n is None else min_n
    if n_drawn >= n_max:  # fixed-N's own decision (pooled rows may even hold more than N)
        df = pl.DataFrame({"n": [n_drawn - n_error], "n_correct": [n_correct], "n_error": [n_error]})
        r = fixed_decide(df, band, min_n=mn)["reason"][0]
        return Decision(True, "keep" if r == "in_band" else "drop", r, 1.0)
    k, w, e = (np.array([x]) for x in (n_correct, n_drawn - n_correct - n_error, n_error))
    settled, keep, reason, conf = _classify(rule_table(n_max, band, mn), k, w, e, rule, spec.alpha)
    if not settled[0]:
        return Decision(False, None, None, float(conf[0]))
    return Decision(True, "keep" if keep[0] else "drop", _REASONS[int(reason[0])], float(conf[0]))


def decide_frame(
    df: pl.DataFrame, spec: AdaptiveSpec, *, n_max: int | str = "n_max", prior: tuple = PRIOR
) -> pl.DataFrame:
    """:func:`decide` for every row of a frame of per-task counts, in one call per round.

    ``df`` has the ledger's count columns ``n`` (verified), ``n_correct`` and ``n_error``; ``n_max``
    is N, or the name of a column holding each row's N.  Adds ``n_drawn``, ``settled``,
    ``decision``, ``reason``, ``confidence`` (as :class:`Decision`) and ``next_draws`` (what to
    draw next round: 0 once settled; at most ``round_size``, fewer when ``spec.trim`` and the task
    could settle sooner).  Rows keep their order.  ``prior``: see :func:`rule_table`
    (simulations only).
    """
    if spec.band is None and spec.rule != "fixed":
        raise RldataError("decide_frame needs a band")  # unreachable: AdaptiveSpec checks it
    if spec.priors is not None and spec.rule == "sequential":
        # cycle: rldata.adaptive.prior imports this module
        from rldata.adaptive.prior import decide_with_priors  # built on this function: imported here

        return decide_with_priors(df, spec, n_max=n_max)
    if isinstance(n_max, str):
        if n_max not in df.columns:
            raise RldataError(f"decide_frame: no column {n_max!r} (give n_max=N or a column name)")
        nmax = df[n_max].cast(pl.Int64).to_numpy()
    else:
        _check_n_max(n_max)
        nmax = np.full(df.height, int(n_max), dtype=np.int64)
    cap = np.minimum(spec.round_size, nmax)  # replaced below by the trimmed round where it applies
    for col in ("n", "n_correct", "n_error"):
        if col not in df.columns:
            raise RldataError(f"decide_frame: missing count column {col!r}")
        if df[col].null_count():
            raise RldataError(f"decide_frame: null in count column {col!r}")
    n = df["n"].cast(pl.Int64).to_numpy()
    k = df["n_correct"].cast(pl.Int64).to_numpy()
    e = df["n_error"].cast(pl.Int64).to_numpy()
    bad = (k < 0) | (e < 0) | (k > n)
    if bad.any():
        i = int(np.argmax(bad))
        raise RldataError(
            f"decide_frame: row {i}: need 0 <= n_correct <= n and n_error >= 0, "
            f"got n={n[i]}, n_correct={k[i]}, n_error={e[i]}"
        )
    drawn = n + e
    settled = drawn >= nmax
    keep = np.zeros(df.height, dtype=bool)
    reason = np.full(df.height, -1)
    conf = np.where(settled, 1.0, 0.0)
    if spec.band is not None:
        done = np.flatnonzero(settled)
        if done.size:  # fixed-N's own decision, by select.decide, per N (min_n defaults to N)
            for N in np.unique(nmax[done]):
                sub = done[nmax[done] == N]
                r = fixed_decide(
                    pl.DataFrame({"n": n[sub], "n_correct": k[sub], "n_error": e[sub]}),
                    spec.band,
                    min_n=int(N) if spec.min_n is None else spec.min_n,
                )["reason"]
                idx = np.array([_REASONS.index(x) for x in r.to_list()], dtype=np.int64)
                reason[sub] = idx
                keep[sub] = idx == 0
        for N in np.unique(nmax[~settled]):
            _check_n_max(int(N))
            sub = np.flatnonzero(~settled & (nmax == N))
            t = rule_table(int(N), spec.band, int(N) if spec.min_n is None else spec.min_n, prior)
            s, kp, rs, cf = _classify(t, k[sub], n[sub] - k[sub], e[sub], spec.rule, spec.alpha)
            settled[sub], keep[sub], reason[sub], conf[sub] = s, kp, rs, cf
            if spec.trim and spec.rule != "fixed":
                mn = int(N) if spec.min_n is None else spec.min_n
                dist = settle_distance(int(N), spec.band, mn, spec.rule, spec.alpha, prior)
                cap[sub] = np.maximum(1, np.minimum(cap[sub], dist[k[sub], n[sub] - k[sub], e[sub]]))
    names = np.array([*_REASONS, None], dtype=object)
    has = settled & (reason >= 0)
    out_reason = np.where(has, names[reason], None).tolist()
    out_decision = np.where(has, np.where(keep, "keep", "drop").astype(object), None).tolist()
    return df.with_columns(
        pl.Series("n_drawn", drawn, dtype=pl.Int64),
        pl.Series("settled", settled, dtype=pl.Boolean),
        pl.Series("decision", out_decision, dtype=pl.String),
        pl.Series("reason", out_reason, dtype=pl.String),
        pl.Series("confidence", conf, dtype=pl.Float64),
        pl.Series("next_draws", np.where(settled, 0, np.minimum(cap, nmax - drawn)), dtype=pl.Int64),
    )


def ledger_columns(spec: AdaptiveSpec, decision: Decision, *, n_max: int) -> dict:
    """The passrates columns ``stop_rule``, ``alpha``, ``confidence``, ``n_max``, ``band`` of a task
    whose sampling ended, for :func:`rldata.ledger.core.passrate_row` (``**ledger_columns(...)``)."""
    predicted = spec.priors is not None and spec.rule == "sequential"  # rldata.adaptive.prior.PREDICTED
    return {
        "stop_rule": "predicted" if predicted else spec.rule,
        "alpha": spec.alpha,
        "confidence": float(decision.confidence) if decision.settled and spec.band is not None else None,
        "n_max": int(n_max),
        "band": band_text(spec.band) if spec.band is not None else None,
    }
