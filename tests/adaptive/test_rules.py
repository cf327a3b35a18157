"""rldata.adaptive: the exact rule against brute force over every outcome sequence, the sequential
rule's error rate on simulated tasks, and the frame form against the scalar one."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from rldata.adaptive.rules import (
    AdaptiveSpec,
    Decision,
    band_text,
    decide,
    decide_frame,
    ledger_columns,
    parse_band_text,
)
from rldata.adaptive.sim import fit_pass_rate_grid, simulate, true_decision
from rldata.errors import RldataError
from rldata.ledger.select import Band
from rldata.ledger.select import decide as fixed_decide

BANDS = [
    Band(0.1, 0.9),
    Band(0.0, 1.0),  # keeps every sufficiently verified task: only errors can drop one
    Band(0.0, 0.0),  # edge 0: keeps never-solved tasks only
    Band(1.0, 1.0),  # edge 1
    Band(0.25, 0.75, inclusive=False),
    Band(0.5, 0.5),
    Band(0.0, 0.5, inclusive=False),
    Band(0.2, 1.0),
]
C, W, E = "c", "w", "e"


def _fixed(seqs, band, min_n):
    """select.decide on the counts of whole sequences: the reference decisions."""
    df = pl.DataFrame(
        {
            "n": [s.count(C) + s.count(W) for s in seqs],
            "n_correct": [s.count(C) for s in seqs],
            "n_error": [s.count(E) for s in seqs],
        }
    )
    return fixed_decide(df, band, min_n=min_n).select("decision", "reason").rows()


def _prefix_counts(prefixes):
    return pl.DataFrame(
        {
            "n": [p.count(C) + p.count(W) for p in prefixes],
            "n_correct": [p.count(C) for p in prefixes],
            "n_error": [p.count(E) for p in prefixes],
        }
    )


CASES = [(N, band, None) for N in range(1, 9) for band in BANDS] + [
    (6, Band(0.1, 0.9), 1),
    (6, Band(0.1, 0.9), 4),
    (5, Band(0.1, 0.9), 9),  # min_n below and above N
]


@pytest.mark.parametrize(("N", "band", "min_n"), CASES, ids=lambda x: str(x))
def test_exact_rule_matches_brute_force_over_every_sequence(N, band, min_n):
    seqs = ["".join(s) for s in itertools.product((C, W, E), repeat=N)]
    final = dict(zip(seqs, _fixed(seqs, band, N if min_n is None else min_n)))
    # brute force: a prefix is settled iff every sequence extending it gets the same decision
    outcomes: dict[str, set] = {}
    reasons: dict[str, set] = {}
    for s, (d, r) in final.items():
        for j in range(N + 1):
            outcomes.setdefault(s[:j], set()).add(d)
            reasons.setdefault(s[:j], set()).add(r)
    prefixes = sorted(outcomes)
    spec = AdaptiveSpec("exact", band=band, min_n=min_n)
    got = decide_frame(_prefix_counts(prefixes), spec, n_max=N)
    settled = dict(zip(prefixes, got["settled"].to_list()))
    decision = dict(zip(prefixes, got["decision"].to_list()))
    reason = dict(zip(prefixes, got["reason"].to_list()))
    for p in prefixes:
        assert settled[p] == (len(outcomes[p]) == 1), (p, outcomes[p])
        if settled[p]:
            assert {decision[p]} == outcomes[p], p
            assert reason[p] in reasons[p], p  # a reason some continuation really ends with
            if len(reasons[p]) == 1:
                assert {reason[p]} == reasons[p], p
    # rounds: stop at the first round boundary the rule calls settled; that is the first one where
    # brute force is settled, and the decision is fixed-N's on the same sequence
    for size in range(1, N + 1):
        bounds = sorted({min(j * size, N) for j in range(N // size + 2)})
        for s, (d, _) in final.items():
            stop = next(b for b in bounds if settled[s[:b]])
            assert stop == next(b for b in bounds if len(outcomes[s[:b]]) == 1)
            assert decision[s[:stop]] == d, (s, size)
    # trimmed rounds: following next_draws stops exactly where drawing one at a time would
    first = {s: next(j for j in range(N + 1) if settled[s[:j]]) for s in final}
    for size in (2, 3, N):
        nxt = dict(
            zip(
                prefixes,
                decide_frame(
                    _prefix_counts(prefixes),
                    AdaptiveSpec("exact", band=band, min_n=min_n, round_size=size),
                    n_max=N,
                )["next_draws"].to_list(),
            )
        )
        for s in final:
            j = 0
            while nxt[s[:j]]:
                assert 1 <= nxt[s[:j]] <= size
                j += nxt[s[:j]]
            assert j == first[s], (s, size)


def test_exact_saves_draws_where_it_should():
    b = Band(0.1, 0.9)
    # 2 right, 6 wrong: in band whatever the last 8 are (even all errors: 2/8 with 8 verified)
    assert decide("exact", n_drawn=8, n_correct=2, n_error=0, n_max=16, band=b) == Decision(
        True, "keep", "in_band", 1.0
    )
    # 2 right 2 wrong is not settled: 12 errors would leave 4 verified < 16/2 -> insufficient_samples
    assert not decide("exact", n_drawn=4, n_correct=2, n_error=0, n_max=16, band=b).settled
    # 0 of 15: even one more correct leaves 1/16 < 0.1
    assert decide("exact", n_drawn=15, n_correct=0, n_error=0, n_max=16, band=b).decision == "drop"
    assert not decide("exact", n_drawn=14, n_correct=0, n_error=0, n_max=16, band=b).settled


@pytest.mark.parametrize("rule", ["exact", "sequential", "fixed"])
@pytest.mark.parametrize("band", [Band(0.1, 0.9), Band(0.25, 0.75, inclusive=False), Band(0.0, 0.0)])
def test_frame_form_equals_scalar_form(rule, band):
    N = 10
    states = [(k, w, e) for k in range(N + 2) for w in range(N + 2) for e in range(3) if k + w + e <= N + 1]
    df = pl.DataFrame(
        {
            "n": [k + w for k, w, _ in states],
            "n_correct": [k for k, _, _ in states],
            "n_error": [e for _, _, e in states],
        }
    )
    alpha = 0.1 if rule == "sequential" else None
    got = decide_frame(df, AdaptiveSpec(rule, alpha, 3, band, trim=False), n_max=N)
    for (k, w, e), row in zip(states, got.iter_rows(named=True)):
        d = decide(rule, n_drawn=k + w + e, n_correct=k, n_error=e, n_max=N, band=band, alpha=alpha)
        assert (row["settled"], row["decision"], row["reason"]) == (d.settled, d.decision, d.reason)
        assert row["confidence"] == pytest.approx(d.confidence)
        assert row["next_draws"] == (0 if d.settled else min(3, N - (k + w + e)))
        assert Decision.from_row(row) == Decision(
            d.settled, d.decision, d.reason, pytest.approx(d.confidence)
        )


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_trimmed_sequential_rounds_stop_where_one_at_a_time_would(alpha):
    rng = np.random.default_rng(3)
    p, q = rng.beta(0.5, 0.5, 4000), np.where(rng.random(4000) < 0.2, 0.1, 0.0)
    one = simulate(p, q, AdaptiveSpec("sequential", alpha, 1, Band(0.1, 0.9)), n_max=16, seed=4)
    for size in (4, 16):
        got = simulate(p, q, AdaptiveSpec("sequential", alpha, size, Band(0.1, 0.9)), n_max=16, seed=4)
        assert (got.drawn == one.drawn).all() and (got.decision == one.decision).all()
    untrimmed = simulate(
        p, q, AdaptiveSpec("sequential", alpha, 4, Band(0.1, 0.9), trim=False), n_max=16, seed=4
    )
    assert untrimmed.samples > one.samples


def test_sequential_is_settled_whenever_exact_is_and_at_n():
    b = Band(0.1, 0.9)
    for k in range(17):
        for e in range(17 - k):
            for d in range(k + e, 17):
                ex = decide("exact", n_drawn=d, n_correct=k, n_error=e, n_max=16, band=b)
                sq = decide("sequential", n_drawn=d, n_correct=k, n_error=e, n_max=16, band=b, alpha=0.01)
                if ex.settled:
                    assert (sq.settled, sq.decision, sq.confidence) == (True, ex.decision, 1.0)
                if sq.settled:
                    assert sq.confidence >= 0.99 - 1e-9
                if d == 16:
                    assert sq.settled and ex.settled


# ---- the sequential rule's error rate ------------------------------------------------------------
def _bound(alpha, tasks):
    """alpha plus 3 binomial standard errors: the disagreement allowed on `tasks` simulated tasks."""
    return alpha + 3 * np.sqrt(alpha * (1 - alpha) / tasks)


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_sequential_alpha_holds_for_tasks_from_the_prior(alpha):
    """The stated guarantee: p and q from the rule's Jeffreys priors -> disagreement with fixed-N
    on the same samples <= alpha."""
    rng = np.random.default_rng(7)
    T = 20000
    p, q = rng.beta(0.5, 0.5, T), rng.beta(0.5, 0.5, T)
    res = simulate(p, q, AdaptiveSpec("sequential", alpha, 4, Band(0.1, 0.9)), n_max=16, seed=8)
    dis = 1 - res.agreement
    print(f"prior tasks alpha={alpha}: disagreement {dis:.4f}, mean draws {res.drawn.mean():.2f} of 16")
    assert dis <= _bound(alpha, T)
    assert res.drawn.mean() < 12  # it does stop early
    assert dis > 0  # it is not the exact rule in disguise


def test_sequential_alpha_holds_on_a_grid_of_pass_rates_incl_the_band_edges():
    grid = np.round(np.concatenate([np.linspace(0, 1, 41), [0.0625, 0.09, 0.11, 0.89, 0.91, 0.9375]]), 4)
    reps = 400
    p = np.repeat(grid, reps)
    for q, alpha in [(0.0, 0.05), (0.02, 0.05), (0.0, 0.01)]:
        res = simulate(p, q, AdaptiveSpec("sequential", alpha, 4, Band(0.1, 0.9)), n_max=16, seed=3)
        dis = 1 - res.agreement
        by_p = {float(g): float(np.mean(res.decision[p == g] != res.fixed_decision[p == g])) for g in grid}
        worst = max(by_p, key=by_p.get)
        truth = float(np.mean(res.decision != true_decision(p, Band(0.1, 0.9))))
        print(
            f"grid q={q} alpha={alpha}: disagreement with fixed-N {dis:.4f} (worst p={worst}: "
            f"{by_p[worst]:.3f}), with the true-p decision {truth:.3f}, mean draws {res.drawn.mean():.2f}"
        )
        assert dis <= _bound(alpha, len(p))
        assert res.drawn.mean() < 16


def test_sequential_alpha_holds_on_the_bundled_models_histogram():
    hist = [1162, 546, 293, 170, 95, 59, 67, 60, 55, 52, 80, 79, 83, 115, 163, 184, 237]
    ps, w = fit_pass_rate_grid(hist)
    p = np.random.default_rng(11).choice(ps, size=20000, p=w)
    for alpha in (0.05, 0.01):
        res = simulate(p, 0.0, AdaptiveSpec("sequential", alpha, 4, Band(0.1, 0.9)), n_max=16, seed=12)
        print(
            f"model histogram alpha={alpha}: agreement {res.agreement:.4f}, draws {res.samples / (16 * len(p)):.3f} of fixed"
        )
        assert 1 - res.agreement <= _bound(alpha, len(p))
    ex = simulate(p, 0.0, AdaptiveSpec("exact", None, 4, Band(0.1, 0.9)), n_max=16, seed=12)
    assert ex.agreement == 1.0 and ex.samples < 16 * len(p)


def test_the_simulated_error_check_can_fail():
    """A rule that stops too eagerly (alpha 0.45) breaks a 0.05 bound: the check has power."""
    hist = [1162, 546, 293, 170, 95, 59, 67, 60, 55, 52, 80, 79, 83, 115, 163, 184, 237]
    ps, w = fit_pass_rate_grid(hist)
    p = np.random.default_rng(11).choice(ps, size=20000, p=w)
    res = simulate(p, 0.0, AdaptiveSpec("sequential", 0.45, 4, Band(0.1, 0.9)), n_max=16, seed=12)
    assert 1 - res.agreement > _bound(0.05, len(p))


def test_fit_pass_rate_grid_reproduces_the_histogram():
    hist = [1162, 546, 293, 170, 95, 59, 67, 60, 55, 52, 80, 79, 83, 115, 163, 184, 237]
    ps, w = fit_pass_rate_grid(hist)
    k = np.random.default_rng(0).binomial(16, np.random.default_rng(1).choice(ps, size=350000, p=w))
    got = np.bincount(k, minlength=17) / 100
    assert np.allclose(got, hist, rtol=0.15, atol=15)


# ---- spec, ledger columns -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rule": "greedy", "band": Band(0.1, 0.9)}, "rule must be one of"),
        ({"rule": "sequential", "alpha": 0.5, "band": Band(0.1, 0.9)}, "alpha must lie in"),
        ({"rule": "sequential", "alpha": 0.0, "band": Band(0.1, 0.9)}, "alpha must lie in"),
        ({"rule": "sequential", "alpha": True, "band": Band(0.1, 0.9)}, "alpha must lie in"),
        ({"rule": "exact", "alpha": 0.05, "band": Band(0.1, 0.9)}, "sequential only"),
        ({"rule": "exact", "round_size": 0, "band": Band(0.1, 0.9)}, "round_size must be"),
        ({"rule": "exact", "round_size": 2.0, "band": Band(0.1, 0.9)}, "round_size must be"),
        ({"rule": "exact"}, "needs a band"),
        ({"rule": "exact", "band": "0.1,0.9"}, "must be a Band"),
        ({"rule": "exact", "band": Band(0.1, 0.9), "min_n": 0}, "min_n must be"),
        ({"rule": "exact", "band": Band(0.1, 0.9), "trim": 1}, "trim must be"),
    ],
)
def test_spec_checks(kwargs, match):
    with pytest.raises(RldataError, match=match):
        AdaptiveSpec(**kwargs)


def test_spec_parse_reuses_the_filter_band_syntax():
    s = AdaptiveSpec.parse("sequential", band="0.1, 0.9", round_size=5)
    assert s.band == Band(0.1, 0.9) and s.alpha == 0.05 and s.round_size == 5
    with pytest.raises(RldataError, match="^band must be LO,HI"):
        AdaptiveSpec.parse("exact", band="0.1")
    with pytest.raises(RldataError, match="band low"):
        AdaptiveSpec.parse("exact", band="0.9,0.1")
    for b in (Band(0.1, 0.9), Band(0.25, 0.75, inclusive=False), Band(0.0, 1.0)):
        assert parse_band_text(band_text(b)) == b
    assert band_text(Band(0.1, 0.9)) == "0.1,0.9"


def test_decide_rejects_bad_counts():
    with pytest.raises(RldataError, match="n_correct \\+ n_error <= n_drawn"):
        decide("exact", n_drawn=3, n_correct=3, n_error=1, n_max=16, band=Band(0.1, 0.9))
    with pytest.raises(RldataError, match="n_max"):
        decide("exact", n_drawn=3, n_correct=1, n_error=0, n_max=0, band=Band(0.1, 0.9))
    with pytest.raises(RldataError, match="row 1"):
        decide_frame(
            pl.DataFrame({"n": [4, 2], "n_correct": [1, 3], "n_error": [0, 0]}),
            AdaptiveSpec("exact", band=Band(0.1, 0.9)),
            n_max=16,
        )


def test_ledger_columns():
    spec = AdaptiveSpec("sequential", 0.05, 4, Band(0.1, 0.9))
    d = decide("sequential", n_drawn=4, n_correct=2, n_error=0, n_max=16, band=spec.band, alpha=0.05)
    cols = ledger_columns(spec, d, n_max=16)
    assert cols == {
        "stop_rule": "sequential",
        "alpha": 0.05,
        "confidence": pytest.approx(d.confidence),
        "n_max": 16,
        "band": "0.1,0.9",
    }
    assert 0.95 <= cols["confidence"] < 1.0
    fixed = ledger_columns(AdaptiveSpec(), Decision(True, None, None, 1.0), n_max=16)
    assert fixed == {"stop_rule": "fixed", "alpha": None, "confidence": None, "n_max": 16, "band": None}
