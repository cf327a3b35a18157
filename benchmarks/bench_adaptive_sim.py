"""Simulated adaptive N (rldata.adaptive) on the bundled model's pass-rate distribution.

Per-task pass rates of tiny-arith are not at hand, its N=16 histogram is (docs/model.md), so the
tasks' p are drawn from the maximum-likelihood mixing distribution that reproduces that histogram
(``rldata.adaptive_sim.fit_pass_rate_grid``).  Every task gets its 16 outcomes up front; fixed
N=16 and each adaptive rule decide on the same samples (the rule sees only the prefix it drew).

    OMP_NUM_THREADS=1 python benchmarks/bench_adaptive_sim.py [--tasks 35000] [--error-rate 0] [--json F]

Reports samples drawn (and the fraction of fixed N's), agreement with fixed N=16, agreement with
the true-p decision, for fixed, exact, sequential alpha 0.05 / 0.01 (round 4, band [0.1, 0.9]),
plus a round-size and alpha sweep.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from rldata.adaptive import AdaptiveSpec
from rldata.adaptive_sim import fit_pass_rate_grid, simulate, true_decision
from rldata.select import Band

HIST = [1162, 546, 293, 170, 95, 59, 67, 60, 55, 52, 80, 79, 83, 115, 163, 184, 237]  # docs/model.md


def run(p, q, spec, *, n_max, seed):
    t = time.perf_counter()
    r = simulate(p, q, spec, n_max=n_max, seed=seed)
    return {
        "rule": spec.rule, "alpha": spec.alpha, "round": spec.round_size,
        "samples": r.samples, "fraction_of_fixed": r.samples / (n_max * len(p)),
        "agreement_fixed_n": r.agreement,
        "agreement_true_p": float(np.mean(r.decision == true_decision(p, spec.band))),
        "seconds": time.perf_counter() - t,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=35000, help="simulated tasks (10x the bundled 3,500)")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--error-rate", type=float, default=0.0, help="verifier error probability per draw")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ps, w = fit_pass_rate_grid(HIST)
    p = np.random.default_rng(args.seed).choice(ps, size=args.tasks, p=w)
    band = Band(0.1, 0.9)
    main_rows = [run(p, args.error_rate, s, n_max=args.n, seed=args.seed + 1) for s in (
        AdaptiveSpec("fixed", None, 4, band),
        AdaptiveSpec("exact", None, 4, band),
        AdaptiveSpec("sequential", 0.05, 4, band),
        AdaptiveSpec("sequential", 0.01, 4, band),
    )]
    sweep = [run(p, args.error_rate, AdaptiveSpec(rule, a, rnd, band), n_max=args.n, seed=args.seed + 1)
             for rule, a in (("exact", None), ("sequential", 0.05)) for rnd in (1, 2, 8)]
    sweep += [run(p, args.error_rate, AdaptiveSpec("sequential", a, 4, band), n_max=args.n, seed=args.seed + 1)
              for a in (0.1, 0.2, 0.3)]
    print(f"{args.tasks} simulated tasks, p from the tiny-arith N=16 histogram, verifier error rate "
          f"{args.error_rate}, N={args.n}, band [0.1, 0.9]")
    print(f"{'rule':<12}{'alpha':>6}{'round':>6}{'samples':>10}{'of fixed':>10}{'saved':>8}"
          f"{'agree fixed-N':>15}{'agree true p':>14}")
    for r in main_rows + [None] + sweep:
        if r is None:
            print("-- sweep")
            continue
        print(f"{r['rule']:<12}{r['alpha'] or '':>6}{r['round']:>6}{r['samples']:>10}{r['fraction_of_fixed']:>10.3f}"
              f"{1 - r['fraction_of_fixed']:>8.1%}{r['agreement_fixed_n']:>15.4f}{r['agreement_true_p']:>14.4f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "main": main_rows, "sweep": sweep}, f, indent=1)


if __name__ == "__main__":
    main()
