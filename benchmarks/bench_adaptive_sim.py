"""Simulated adaptive N (rldata.adaptive) on the bundled model's pass-rate distribution.

Per-task pass rates of tiny-arith are not at hand, its N=16 histogram is (docs/model.md), so the
tasks' p are drawn from the maximum-likelihood mixing distribution that reproduces that histogram
(``rldata.adaptive.sim.fit_pass_rate_grid``).  Every task gets its 16 outcomes up front; fixed
N=16 and each adaptive rule decide on the same samples (the rule sees only the prefix it drew).

    OMP_NUM_THREADS=1 python benchmarks/bench_adaptive_sim.py [--tasks 35000] [--error-rate 0] [--json F]

Reports samples drawn (and the fraction of fixed N's), agreement with fixed N=16, agreement with
the true-p decision, for fixed, exact, sequential alpha 0.05 / 0.01 (round 4, band [0.1, 0.9]),
plus a sweep (untrimmed rounds, round sizes, alphas), the Bayes-optimal bound, and with --bias the
pass-rate bias table of docs/adaptive.md.  "rounds": mean rounds a task drew in; "job": rounds the
job needs (the slowest task).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from rldata.adaptive.rules import AdaptiveSpec
from rldata.adaptive.sim import fit_pass_rate_grid, simulate, true_decision
from rldata.ledger.select import Band

HIST = [1162, 546, 293, 170, 95, 59, 67, 60, 55, 52, 80, 79, 83, 115, 163, 184, 237]  # docs/model.md


def run(p, q, spec, *, n_max, seed):
    t = time.perf_counter()
    r = simulate(p, q, spec, n_max=n_max, seed=seed)
    return {
        "rule": spec.rule,
        "alpha": spec.alpha,
        "round": spec.round_size,
        "trim": spec.trim,
        "mean_rounds": float(r.rounds.mean()),
        "job_rounds": int(r.rounds.max()),
        "samples": r.samples,
        "fraction_of_fixed": r.samples / (n_max * len(p)),
        "agreement_fixed_n": r.agreement,
        "agreement_true_p": float(np.mean(r.decision == true_decision(p, spec.band))),
        "seconds": time.perf_counter() - t,
    }


def oracle_frontier(ps, w, *, n_max, band, round_size, lams):
    """The Bayes-optimal stopping policy that KNOWS the tasks' pass-rate distribution (no verifier
    errors): for each price lambda of a disagreement, backward induction over the count states
    minimises E[samples] + lambda * E[disagreement with fixed N].  Its (samples, agreement) points
    bound what any rule can reach on this distribution with this round size."""
    from math import comb

    from rldata.ledger.select import band_limits

    kmin, kmax = band_limits(band, n_max)
    logw = np.log(np.maximum(w, 1e-300))

    def post(k, f):
        with np.errstate(divide="ignore", invalid="ignore"):
            lw = logw + np.where(k == 0, 0, k * np.log(ps)) + np.where(f == 0, 0, f * np.log1p(-ps))
        lw = np.exp(lw - lw.max())
        return lw / lw.sum()

    def pmf(r, p):  # [j, grid]: Binomial(r, p) at j = 0..r
        j = np.arange(r + 1)[:, None]
        return (
            np.array([comb(r, x) for x in range(r + 1)], dtype=float)[:, None]
            * p[None, :] ** j
            * (1 - p[None, :]) ** (r - j)
        )

    out = []
    for lam in lams:
        memo = {}

        def solve(k, f, memo=memo, lam=lam):
            if (k, f) in memo:
                return memo[(k, f)]
            d = k + f
            if d == n_max:
                memo[(k, f)] = (0.0, 0.0, 0.0)
                return memo[(k, f)]
            po, r = post(k, f), n_max - d
            lo, hi = max(0, kmin - k), min(r, kmax - k)
            pk = float(po @ pmf(r, ps)[lo : hi + 1].sum(0)) if lo <= hi else 0.0
            stop = (lam * min(pk, 1 - pk), 0.0, min(pk, 1 - pk))
            rr = min(round_size, r)
            pj = pmf(rr, ps) @ po
            cont = [float(rr), float(rr), 0.0]
            for j in range(rr + 1):
                v = solve(k + j, f + rr - j)
                cont = [cont[0] + pj[j] * v[0], cont[1] + pj[j] * v[1], cont[2] + pj[j] * v[2]]
            memo[(k, f)] = stop if stop[0] <= cont[0] else tuple(cont)
            return memo[(k, f)]

        _, samples, dis = solve(0, 0)
        out.append({"lambda": lam, "fraction_of_fixed": samples / n_max, "agreement_fixed_n": 1 - dis})
    return out


def bias_table(*, n_max=16, round_size=4, tasks_per_p=20000, seed=0):
    """Mean k/n after stopping minus the true p, per rule, on a grid of p (docs/adaptive.md)."""
    band = Band(0.1, 0.9)
    grid = [0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0]
    rows = []
    for i, pv in enumerate(grid):
        p = np.full(tasks_per_p, pv)
        row = {"p": pv}
        for spec in (
            AdaptiveSpec("fixed", None, round_size, band),
            AdaptiveSpec("exact", None, round_size, band),
            AdaptiveSpec("sequential", 0.05, round_size, band),
        ):
            r = simulate(p, 0.0, spec, n_max=n_max, seed=seed + i)
            est = r.n_correct / np.maximum(r.n, 1)
            row[spec.rule] = float(est.mean() - pv)
            row[f"{spec.rule}_draws"] = float(r.drawn.mean())
            kept = r.decision == "keep"
            row[f"{spec.rule}_kept_bias"] = float(est[kept].mean() - pv) if kept.any() else None
        rows.append(row)
    return rows


def bucket_moves(p, *, n_max=16, seed=0):
    """Kept tasks whose stratify bucket (easy 0.7-0.9, medium 0.4-0.7, hard 0.1-0.4) differs between
    the early-stopped k/n and k/16 of the same samples, per rule."""
    band = Band(0.1, 0.9)
    edges = np.array([0.4, 0.7])
    truth = np.digitize(p, edges)
    out = {}
    for spec in (AdaptiveSpec("exact", None, 4, band), AdaptiveSpec("sequential", 0.05, 4, band)):
        r = simulate(p, 0.0, spec, n_max=n_max, seed=seed)
        both = (r.decision == "keep") & (r.fixed_decision == "keep")
        early = np.digitize(r.n_correct / np.maximum(r.n, 1), edges)
        full = np.digitize(np.nan_to_num(r.fixed_pass_rate), edges)
        out[spec.rule] = float(np.mean(early[both] != full[both]))
        out[f"{spec.rule}_vs_true_p"] = float(np.mean(early[both] != truth[both]))
        out["fixed_vs_true_p"] = float(np.mean(full[both] != truth[both]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=35000, help="simulated tasks (10x the bundled 3,500)")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--error-rate", type=float, default=0.0, help="verifier error probability per draw")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--bias", action="store_true", help="also print the pass-rate bias table of docs/adaptive.md"
    )
    args = ap.parse_args()
    ps, w = fit_pass_rate_grid(HIST)
    p = np.random.default_rng(args.seed).choice(ps, size=args.tasks, p=w)
    band = Band(0.1, 0.9)
    main_rows = [
        run(p, args.error_rate, s, n_max=args.n, seed=args.seed + 1)
        for s in (
            AdaptiveSpec("fixed", None, 4, band),
            AdaptiveSpec("exact", None, 4, band),
            AdaptiveSpec("sequential", 0.05, 4, band),
            AdaptiveSpec("sequential", 0.01, 4, band),
        )
    ]
    # untrimmed rounds (always 4 draws), other round sizes, other alphas
    sweep = [
        run(p, args.error_rate, AdaptiveSpec(rule, a, 4, band, trim=False), n_max=args.n, seed=args.seed + 1)
        for rule, a in (("exact", None), ("sequential", 0.05), ("sequential", 0.01))
    ]
    sweep += [
        run(
            p, args.error_rate, AdaptiveSpec(rule, a, rnd, band, trim=False), n_max=args.n, seed=args.seed + 1
        )
        for rule, a in (("exact", None), ("sequential", 0.05))
        for rnd in (1, 2, 8)
    ]
    sweep += [
        run(p, args.error_rate, AdaptiveSpec("sequential", a, 4, band), n_max=args.n, seed=args.seed + 1)
        for a in (0.1, 0.2)
    ]
    print(
        f"{args.tasks} simulated tasks, p from the tiny-arith N=16 histogram, verifier error rate "
        f"{args.error_rate}, N={args.n}, band [0.1, 0.9]"
    )
    print(
        f"{'rule':<12}{'alpha':>6}{'round':>6}{'samples':>10}{'of fixed':>10}{'saved':>8}"
        f"{'agree fixed-N':>15}{'agree true p':>14}{'trim':>6}{'rounds':>8}{'job':>5}"
    )
    for r in main_rows + [None] + sweep:
        if r is None:
            print("-- sweep")
            continue
        print(
            f"{r['rule']:<12}{r['alpha'] or '':>6}{r['round']:>6}{r['samples']:>10}{r['fraction_of_fixed']:>10.3f}"
            f"{1 - r['fraction_of_fixed']:>8.1%}{r['agreement_fixed_n']:>15.4f}{r['agreement_true_p']:>14.4f}"
            f"{'yes' if r['trim'] else 'no':>6}{r['mean_rounds']:>8.2f}{r['job_rounds']:>5}"
        )
    print(
        "-- bound: the Bayes-optimal policy knowing the p distribution (no errors), by price of a disagreement"
    )
    bound = []
    for rnd in (4, 1):
        for r in oracle_frontier(ps, w, n_max=args.n, band=band, round_size=rnd, lams=(25, 50, 75, 100, 200)):
            bound.append({**r, "round": rnd})
            print(
                f"{'oracle':<12}{r['lambda']:>6}{rnd:>6}{'':>10}{r['fraction_of_fixed']:>10.3f}"
                f"{1 - r['fraction_of_fixed']:>8.1%}{r['agreement_fixed_n']:>15.4f}"
            )
    bias = moves = None
    if args.bias:
        bias = bias_table(n_max=args.n, seed=args.seed)
        print("-- bias of k/n after stopping (mean estimate - p; mean draws), round 4, band [0.1, 0.9]")
        print(
            f"{'p':>6}{'fixed':>9}{'exact':>9}{'draws':>7}{'seq .05':>9}{'draws':>7}"
            f"{'kept: fixed':>13}{'exact':>9}{'seq':>9}"
        )

        def fmt(x):
            return "" if x is None else f"{x:+.4f}"

        for r in bias:
            print(
                f"{r['p']:>6}{r['fixed']:>+9.4f}{r['exact']:>+9.4f}{r['exact_draws']:>7.2f}{r['sequential']:>+9.4f}"
                f"{r['sequential_draws']:>7.2f}{fmt(r['fixed_kept_bias']):>13}{fmt(r['exact_kept_bias']):>9}"
                f"{fmt(r['sequential_kept_bias']):>9}"
            )
        moves = bucket_moves(p, n_max=args.n, seed=args.seed + 1)
        print(
            "kept tasks (hard 0.1-0.4, medium 0.4-0.7, easy 0.7-0.9) in another bucket than k/16 of the same "
            f"samples: exact {moves['exact']:.1%}, sequential {moves['sequential']:.1%}; than their true p: "
            f"fixed {moves['fixed_vs_true_p']:.1%}, exact {moves['exact_vs_true_p']:.1%}, "
            f"sequential {moves['sequential_vs_true_p']:.1%}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "args": vars(args),
                    "main": main_rows,
                    "sweep": sweep,
                    "bound": bound,
                    "bias": bias,
                    "bucket_moves": moves,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
