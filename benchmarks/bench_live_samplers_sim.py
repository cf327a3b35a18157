"""Issue 28 §4, the sampling side alone: what each sampler spends on groups without variance, with the
trainer's own samplers on the benchmark's real pool, and verdicts drawn instead of generated.

    python benchmarks/bench_live_samplers_sim.py [--seeds 5] [--steps 40]

Reads the store bench_live_samplers.py prepared (benchmarks/_work/live_bench/store: 400 arith tasks
with N=16 base pass rates, the band buckets and their curriculum file).  Per seed, every task gets a
true pass rate drawn from Beta(1 + k, 1 + 16 - k) around its offline count k (so the ledger prior
the live samplers start from is an estimate, not the truth), fixed for the run: the policy does not
learn here, which is what makes this a measurement of the samplers and not of training.  Then per
config the trainer's sampler (``rldata.trainer.rollout.build_sampler``: the same buckets, seed, prior
and live state a run builds) draws ``--prompts`` groups a step, verdicts are Binomial(G, p), dynamic
sampling drops groups whose verdicts agree and redraws up to ``--max-resample`` rounds (as
``collect_step`` does), and the groups go back as evidence of the step's version.

Out: per config, rollouts generated, groups kept (the GRPO signal), rollouts per kept group, the
zero-variance share of generated groups, and the mean E[p(1-p)] of the drawn tasks under their true
rates; means over seeds with t-intervals, and per seed the ratio of uniform+ds's rollouts per group with
variance to each config's.  JSON to benchmarks/bench_live_samplers_sim.json (--out).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "live_bench"
TRAIN_SPLIT = "json_extract_string(metadata, '$.split') = 'train'"
CONFIGS = {
    "uniform": "uniform",
    "uniform+ds": "uniform",
    "curriculum": None,  # the curriculum file's own sampler (mixture), on its band buckets
    "live:band": "live:band",
    "live:learnability": "live:learnability",
    "live:skip": "live:skip",
    # the band pools at the offline filter's edges: the live counterpart of filter --band 0.1,0.9
    "live:band[0.1,0.9]": "live:band",
    # the live samplers choosing among the curriculum phase's band-filtered tasks
    "curriculum+live:band": "live:band",
    "curriculum+live:learnability": "live:learnability",
    # issue 43 §4: the Nemotron-style Gaussian over pass rate (default settings), alone and in the buckets
    "gaussian": "gaussian",
    "curriculum+gaussian": "gaussian",
}
LIVE = {"live:band[0.1,0.9]": {"pools": "0.1:0.05,0.9:1.0,1.0:0.05"}}
BASELINE = "uniform+ds"


def interval(xs: list[float]) -> dict:
    xs = [x for x in xs if x is not None]
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return {"mean": m, "n": len(xs)}
    t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57}.get(len(xs), 2.0)  # 95% two-sided, n-1 dof
    half = t * statistics.stdev(xs) / math.sqrt(len(xs))
    return {"mean": m, "lo": m - half, "hi": m + half, "n": len(xs)}


def simulate(store, args, name: str, seed: int, truth: dict[str, float], base: str) -> dict:
    from rldata.curriculum.live import LiveConfig
    from rldata.trainer.config import TrainConfig
    from rldata.trainer.rollout import build_sampler, extra_draws

    ds = name != "uniform"
    cfg = TrainConfig(
        seed=seed,
        steps=args.steps,
        prompts_per_step=args.prompts,
        n=args.group,
        max_resample=args.max_resample,
        dynamic_sampling=ds,
        curriculum=str(WORK / "buckets.yaml") if name.startswith("curriculum") else None,
        live=LiveConfig(decay=args.decay, age=args.age, **LIVE.get(name, {})),
    )
    where = (
        None
        if name.startswith("curriculum")
        else f"task_id IN (SELECT task_id FROM passrates WHERE model = '{base}') AND {TRAIN_SPLIT}"
    )
    sampler, _ = build_sampler(store, cfg, sampler=CONFIGS[name], tasks_where=where, prior_model=base)
    rng = random.Random(f"verdicts/{seed}/{name}")
    rollouts = kept = generated = flat = 0
    signal = []
    for step in range(1, args.steps + 1):
        if sampler.live is not None:
            sampler.live.set_version(step - 1)  # sync: the version that generates this step
        draws, groups = sampler.next_batch(args.prompts), []
        for rnd in range(1 + (args.max_resample if ds else 0)):
            new = []
            for task, bucket in draws:
                p = truth[task]
                passes = sum(rng.random() < p for _ in range(args.group))
                new.append((task, bucket, passes))
                signal.append(p * (1 - p))
            groups += new
            missing = sum(k in (0, args.group) for _, _, k in new)
            if missing == 0 or rnd == args.max_resample or not ds:
                break
            draws = extra_draws(sampler, missing)
        if sampler.live is not None:
            sampler.live.pop_draw_stats()
        zero = [k in (0, args.group) for _, _, k in groups]
        rollouts += len(groups) * args.group
        generated += len(groups)
        flat += sum(zero)
        kept += sum(not z for z in zero) if ds else len(groups)  # without ds every group enters the loss
        acc: dict[str, list[float]] = {}
        for _, b, k in groups:
            acc.setdefault(b, []).append(k / args.group)
        sampler.observe(
            step,
            {b: statistics.fmean(v) for b, v in acc.items()},
            [(t, step - 1, k, args.group - k) for t, _, k in groups],
        )
    useful = generated - flat  # groups with variance: the only ones with a GRPO gradient
    return {
        "rollouts": rollouts,
        "groups_kept": kept,
        "groups_with_variance": useful,
        "rollouts_per_group_with_variance": rollouts / useful if useful else None,
        "zero_variance_share": flat / generated,
        "mean_true_p1mp_drawn": statistics.fmean(signal),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-resample", type=int, default=2)
    ap.add_argument("--decay", type=float, default=0.9, help="live.decay of the live configs")
    ap.add_argument("--age", default="drawn", help="live.age of the live configs (drawn or version)")
    ap.add_argument("--out", default=str(HERE / "bench_live_samplers_sim.json"))
    args = ap.parse_args()
    from rldata import open_store

    store = open_store(WORK / "store")
    base = store.sql("SELECT model FROM passrates GROUP BY model ORDER BY count(*) DESC LIMIT 1").fetchall()[
        0
    ][0]
    counts = store.sql(
        f"SELECT task_id, n_correct, n FROM passrates WHERE model = $1 AND task_id IN "
        f"(SELECT task_id FROM tasks WHERE {TRAIN_SPLIT}) ORDER BY task_id",  # truth drawn in a fixed order
        params=[base],
    ).fetchall()
    out = {"args": vars(args), "pool_tasks": len(counts), "configs": {}}
    per = {n: [] for n in CONFIGS}
    for seed in range(args.seeds):
        trng = random.Random(f"truth/{seed}")
        truth = {t: trng.betavariate(1 + k, 1 + n - k) for t, k, n in counts}
        for name in CONFIGS:
            per[name].append(simulate(store, args, name, seed, truth, base))
    for name, rows in per.items():
        ratio = [
            b["rollouts_per_group_with_variance"] / r["rollouts_per_group_with_variance"]
            for r, b in zip(rows, per[BASELINE])
        ]
        out["configs"][name] = {
            **{k: interval([r[k] for r in rows]) for k in rows[0]},
            "efficiency_vs_baseline": interval(ratio),
            "per_seed": rows,
        }
    Path(args.out).write_text(json.dumps(out, indent=2))
    for name, c in out["configs"].items():
        print(
            f"{name:19s} rollouts {c['rollouts']['mean']:8.0f}  zero-var {c['zero_variance_share']['mean']:.3f}  "
            f"rollouts/useful group {c['rollouts_per_group_with_variance']['mean']:6.2f}  "
            f"x vs uniform+ds {c['efficiency_vs_baseline']['mean']:.2f} "
            f"[{c['efficiency_vs_baseline'].get('lo', float('nan')):.2f}, {c['efficiency_vs_baseline'].get('hi', float('nan')):.2f}]"
        )


if __name__ == "__main__":
    main()
